/* keel passwd (also the standalone keel-passwd): print a salted
 * PBKDF2-HMAC-SHA256 hash of a password for keeld's authorization block
 * (`password: "<hash>"`, or --pass).
 *
 * The password is read from the terminal with echo off (asked twice), or
 * as one line from stdin when stdin is not a terminal, so it never shows
 * in argv or the shell history.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "cli_passwd.h"
#include "keel_passwd.h"

#define EXIT_USAGE 2

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [--iterations N]\n\n"
            "Reads a password (from the terminal without echo, or one line "
            "from stdin)\nand prints its hash for keeld's config:\n"
            "  authorization { users = [ {user: alice, password: "
            "\"<hash>\"} ] }\n\n"
            "  --iterations N   PBKDF2 rounds (%u; %u to %u)\n",
            prog, KEEL_PASSWD_ITER_DEFAULT, KEEL_PASSWD_ITER_MIN,
            KEEL_PASSWD_ITER_MAX);
}

/* One line from f without its newline; false on EOF or an overlong line. */
static bool read_line(FILE *f, char *buf, size_t len)
{
    if (fgets(buf, (int)len, f) == NULL) {
        return false;
    }
    size_t n = strlen(buf);
    if (n > 0 && buf[n - 1] == '\n') {
        buf[--n] = '\0';
    } else if (!feof(f)) {
        return false;
    }
    if (n > 0 && buf[n - 1] == '\r') {
        buf[n - 1] = '\0';
    }
    return true;
}

static bool prompt_no_echo(const char *prompt, char *buf, size_t len)
{
    struct termios old;
    struct termios quiet;
    bool ok;

    fputs(prompt, stderr);
    fflush(stderr);
    if (tcgetattr(STDIN_FILENO, &old) != 0) {
        return false;
    }
    quiet = old;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    ok = read_line(stdin, buf, len);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    fputc('\n', stderr);
    return ok;
}

static int read_password(char *pw, size_t len)
{
    char again[KEEL_PASSWD_BYTES_MAX + 2];

    if (!isatty(STDIN_FILENO)) {
        return read_line(stdin, pw, len) ? 0 : KEEL_EUSAGE;
    }
    if (!prompt_no_echo("Password: ", pw, len) ||
        !prompt_no_echo("Again: ", again, sizeof again)) {
        return KEEL_EUSAGE;
    }
    int rv = strcmp(pw, again) == 0 ? 0 : KEEL_EINVAL;
    memset(again, 0, sizeof again);
    return rv;
}

static int parse_args(int argc, char **argv, const char *prog, uint32_t *iter)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout, prog);
            return 1;
        }
        if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (errno != 0 || *end != '\0' || v < KEEL_PASSWD_ITER_MIN ||
                v > KEEL_PASSWD_ITER_MAX) {
                fprintf(stderr, "%s: --iterations must be %u to %u\n", prog,
                        KEEL_PASSWD_ITER_MIN, KEEL_PASSWD_ITER_MAX);
                return -1;
            }
            *iter = (uint32_t)v;
            continue;
        }
        fprintf(stderr, "%s: unknown argument '%s'\n", prog, argv[i]);
        usage(stderr, prog);
        return -1;
    }
    return 0;
}

int cli_passwd_run(int argc, char **argv, const char *prog)
{
    char pw[KEEL_PASSWD_BYTES_MAX + 2];
    char hash[KEEL_PASSWD_STRING_BYTES];
    char errmsg[KEEL_ERRMSG_MAX] = "";
    uint32_t iter = KEEL_PASSWD_ITER_DEFAULT;
    int rv = parse_args(argc, argv, prog, &iter);

    if (rv != 0) {
        return rv > 0 ? 0 : EXIT_USAGE;
    }
    rv = read_password(pw, sizeof pw);
    if (rv != 0 || pw[0] == '\0' || strlen(pw) > KEEL_PASSWD_BYTES_MAX) {
        fprintf(stderr, "%s: %s\n", prog,
                rv == KEEL_EINVAL ? "the passwords differ"
                                  : "give a password of 1 to 1024 bytes");
        memset(pw, 0, sizeof pw);
        return EXIT_USAGE;
    }
    rv = keel_passwd_hash(pw, iter, hash, sizeof hash, errmsg);
    memset(pw, 0, sizeof pw);
    if (rv != 0) {
        fprintf(stderr, "%s: %s\n", prog, errmsg);
        return 1;
    }
    printf("%s\n", hash);
    return 0;
}

#ifdef CLI_PASSWD_STANDALONE
int main(int argc, char **argv)
{
    return cli_passwd_run(argc, argv, "keel-passwd");
}
#endif
