/* keel passwd: hash a password for keeld's authorization block. */
#ifndef CLI_PASSWD_H
#define CLI_PASSWD_H

/* Parse argv[1..argc) (--iterations N, --help), read the password from the
 * terminal without echo or one line from stdin, print its hash. Messages
 * are prefixed with prog. Returns the exit status: 0, 1 or 2 (usage). */
int cli_passwd_run(int argc, char **argv, const char *prog);

#endif
