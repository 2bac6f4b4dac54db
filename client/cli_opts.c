/* Flag parsing and connecting: the parts every keel command shares.
 *
 * Flags are table rows (struct cli_flag); the common connection flags are
 * one more table, so `keel pub --help` lists both and an unknown flag is a
 * one-line usage error (exit 2) wherever it appears.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli.h"
#include "keel_units.h"

#define CLI_URL_DEFAULT "nats://127.0.0.1:4222"

void cli_conn_opts_init(struct cli_conn_opts *conn)
{
    memset(conn, 0, sizeof *conn);
    conn->timeout_ms = CLI_TIMEOUT_MS_DEFAULT;
}

/* The common table is built per call because its rows point into `conn`. */
static void common_flags(struct cli_conn_opts *conn, struct cli_flag *out)
{
    struct cli_flag rows[] = {
        {"server", 's', CLI_FLAG_STR, &conn->servers, "URLS",
         "comma-separated server URLs (default $NATS_URL, else " CLI_URL_DEFAULT
         ")"},
        {"user", 0, CLI_FLAG_STR, &conn->user, "USER", "user name"},
        {"password", 0, CLI_FLAG_STR, &conn->password, "PASSWORD", "password"},
        {"creds", 0, CLI_FLAG_STR, &conn->creds, "FILE",
         "user credentials file (JWT and seed)"},
        {"tlscert", 0, CLI_FLAG_STR, &conn->tlscert, "FILE",
         "client certificate for TLS (with --tlskey)"},
        {"tlskey", 0, CLI_FLAG_STR, &conn->tlskey, "FILE",
         "client private key for TLS"},
        {"tlsca", 0, CLI_FLAG_STR, &conn->tlsca, "FILE",
         "CA certificates to verify the server (turns TLS on)"},
        {"timeout", 0, CLI_FLAG_DURATION, &conn->timeout_ms, "DURATION",
         "connect and request timeout, e.g. 500ms, 5s (default 5s)"},
        CLI_FLAG_END,
    };
    memcpy(out, rows, sizeof rows);
}

#define COMMON_FLAGS_ROWS 9

static int parse_int(const char *name, const char *value, int64_t *out,
                     char **end, char *errmsg)
{
    errno = 0;
    long long v = strtoll(value, end, 10);
    if (errno != 0 || *end == value || v < 0 || v > CLI_COUNT_MAX) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--%s wants a whole number from 0 to %lld, got '%s'",
                        name, (long long)CLI_COUNT_MAX, value);
    }
    *out = v;
    return 0;
}

static int parse_size(const char *name, const char *value, int64_t *out,
                      char *errmsg)
{
    char *end;
    int64_t v = 0;
    uint64_t n = 0;
    /* The number's bound and message first, then the unit (KiB, MiB). */
    int rv = parse_int(name, value, &v, &end, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (!keel_size_parse(value, KEEL_SIZE_IEC, &n)) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--%s wants bytes like 16, 1KiB or 1MiB, got '%s'",
                        name, value);
    }
    *out = (int64_t)n;
    return 0;
}

static int parse_duration(const char *name, const char *value, int64_t *out,
                          char *errmsg)
{
    uint64_t ns = 0;
    /* Bare numbers are seconds, as in the nats CLI; 0.5s is 500ms. */
    if (!keel_duration_parse(value, KEEL_DURATION_FRACTION, &ns) || ns == 0 ||
        ns > (uint64_t)CLI_TIMEOUT_MS_MAX * 1000000) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--%s wants a duration like 500ms, 5s or 2m, got '%s'",
                        name, value);
    }
    *out = ns < 1000000 ? 1 : (int64_t)(ns / 1000000);
    return 0;
}

int cli_parse_value(enum cli_flag_kind kind, const char *name,
                    const char *value, void *dst, char *errmsg)
{
    char *end;
    int64_t v = 0;
    int rv;
    struct cli_list *list;

    switch (kind) {
    case CLI_FLAG_BOOL:
        *(bool *)dst = true;
        return 0;
    case CLI_FLAG_STR:
        *(const char **)dst = value;
        return 0;
    case CLI_FLAG_INT:
        /* Parse into a local: a rejected value must leave dst unchanged. */
        rv = parse_int(name, value, &v, &end, errmsg);
        if (rv == 0 && *end != '\0') {
            rv = keel_err(KEEL_EUSAGE, errmsg,
                          "--%s wants a whole number, got '%s'", name, value);
        }
        if (rv == 0) {
            *(int64_t *)dst = v;
        }
        return rv;
    case CLI_FLAG_SIZE:
        return parse_size(name, value, dst, errmsg);
    case CLI_FLAG_DURATION:
        return parse_duration(name, value, dst, errmsg);
    case CLI_FLAG_LIST:
        list = dst;
        if (list->count >= CLI_LIST_ITEMS_MAX) {
            return keel_err(KEEL_EUSAGE, errmsg,
                            "--%s given more than %d times", name,
                            CLI_LIST_ITEMS_MAX);
        }
        list->items[list->count++] = value;
        return 0;
    }
    ASSERT(0 && "unknown flag kind");
    return KEEL_EINVAL;
}

static void print_flags(const struct cli_flag *flags)
{
    for (int i = 0; flags[i].name != NULL; i++) {
        char left[64];
        const struct cli_flag *f = &flags[i];
        char short_part[8] = "    ";
        if (f->short_name != 0) {
            snprintf(short_part, sizeof short_part, "-%c, ", f->short_name);
        }
        snprintf(left, sizeof left, "%s--%s%s%s", short_part, f->name,
                 f->arg ? " " : "", f->arg ? f->arg : "");
        printf("  %-28s %s%s\n", left, f->help,
               f->kind == CLI_FLAG_LIST ? " (repeatable)" : "");
    }
}

static void print_cmd_help(const struct cli_cmd *cmd,
                           const struct cli_flag *flags,
                           const struct cli_flag *common)
{
    printf("usage: keel %s %s [flags]\n\n%s\n", cmd->name, cmd->usage,
           cmd->summary);
    if (flags != NULL && flags[0].name != NULL) {
        printf("\nflags:\n");
        print_flags(flags);
    }
    printf("\nconnection flags:\n");
    print_flags(common);
}

static const struct cli_flag *find_flag(const struct cli_flag *a,
                                        const struct cli_flag *b,
                                        const char *name, size_t len,
                                        char short_name)
{
    const struct cli_flag *tables[2] = {a, b};
    for (int t = 0; t < 2; t++) {
        for (int i = 0; tables[t] != NULL && tables[t][i].name != NULL; i++) {
            const struct cli_flag *f = &tables[t][i];
            if (short_name != 0 ? f->short_name == short_name
                                : (strlen(f->name) == len &&
                                   strncmp(f->name, name, len) == 0)) {
                return f;
            }
        }
    }
    return NULL;
}

/* One flag at argv[*i]; may consume argv[*i + 1] as its value. */
static int parse_flag(const char *cmd_name, const struct cli_flag *flags,
                      const struct cli_flag *common, int argc, char **argv,
                      int *i, char *errmsg)
{
    const char *arg = argv[*i];
    bool is_long = arg[1] == '-';
    const char *name = arg + (is_long ? 2 : 1);
    const char *eq = is_long ? strchr(name, '=') : NULL;
    size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    if (!is_long && len != 1) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "unknown flag %s (see keel %s --help)", arg, cmd_name);
    }
    const struct cli_flag *f =
        find_flag(flags, common, name, len, is_long ? 0 : name[0]);
    if (f == NULL) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "unknown flag %s (see keel %s --help)", arg, cmd_name);
    }
    const char *value = NULL;
    if (f->kind != CLI_FLAG_BOOL) {
        if (eq != NULL) {
            value = eq + 1;
        } else if (*i + 1 < argc) {
            value = argv[++*i];
        } else {
            return keel_err(KEEL_EUSAGE, errmsg, "flag --%s needs a value (%s)",
                            f->name, f->arg);
        }
    } else if (eq != NULL) {
        return keel_err(KEEL_EUSAGE, errmsg, "flag --%s takes no value",
                        f->name);
    }
    return cli_parse_value(f->kind, f->name, value, f->dst, errmsg);
}

int cli_parse(const struct cli_cmd *cmd, const struct cli_flag *flags,
              struct cli_conn_opts *conn, int argc, char **argv,
              struct cli_args *args, bool *help_shown, char *errmsg)
{
    struct cli_flag common[COMMON_FLAGS_ROWS];
    bool flags_done = false;
    int rv;

    ASSERT(cmd != NULL);
    ASSERT(argc >= 1);
    common_flags(conn, common);
    args->count = 0;
    *help_shown = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!flags_done && strcmp(a, "--") == 0) {
            flags_done = true;
        } else if (!flags_done &&
                   (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            print_cmd_help(cmd, flags, common);
            *help_shown = true;
            return 0;
        } else if (!flags_done && a[0] == '-' && a[1] != '\0') {
            rv = parse_flag(cmd->name, flags, common, argc, argv, &i, errmsg);
            if (rv != 0) {
                return rv;
            }
        } else if (args->count < CLI_ARGS_MAX) {
            args->items[args->count++] = argv[i];
        } else {
            return keel_err(KEEL_EUSAGE, errmsg, "too many arguments");
        }
    }
    if (args->count < cmd->args_min || args->count > cmd->args_max) {
        return keel_err(KEEL_EUSAGE, errmsg, "usage: keel %s %s (see --help)",
                        cmd->name, cmd->usage);
    }
    return 0;
}

/* --creds, --tlscert/--tlskey, --tlsca (any of the TLS ones turns TLS
 * on, as in the nats CLI). */
static natsStatus tls_options(const struct cli_conn_opts *conn,
                              natsOptions *opts)
{
    natsStatus s = NATS_OK;
    if (conn->creds != NULL) {
        s = natsOptions_SetUserCredentialsFromFiles(opts, conn->creds, NULL);
    }
    bool tls = conn->tlsca != NULL || conn->tlscert != NULL;
    if (s == NATS_OK && tls) {
        s = natsOptions_SetSecure(opts, true);
    }
    if (s == NATS_OK && conn->tlsca != NULL) {
        s = natsOptions_LoadCATrustedCertificates(opts, conn->tlsca);
    }
    if (s == NATS_OK && conn->tlscert != NULL) {
        s = natsOptions_LoadCertificatesChain(opts, conn->tlscert,
                                              conn->tlskey);
    }
    return s;
}

int cli_options_create(const struct cli_conn_opts *conn, natsOptions **out,
                       char *errmsg)
{
    char buf[CLI_SERVERS_BYTES_MAX]; /* SetServers copies the strings */
    const char *urls[CLI_SERVERS_MAX];
    int n = 0;
    natsOptions *opts = NULL;
    natsStatus s;

    const char *list = conn->servers;
    if (list == NULL || list[0] == '\0') {
        list = getenv("NATS_URL");
    }
    if (list == NULL || list[0] == '\0') {
        list = CLI_URL_DEFAULT;
    }
    if (strlen(list) >= sizeof buf) {
        return keel_err(KEEL_EUSAGE, errmsg, "--server list is too long");
    }
    strcpy(buf, list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t != NULL;
         t = strtok_r(NULL, ", ", &save)) {
        if (n == CLI_SERVERS_MAX) {
            return keel_err(KEEL_EUSAGE, errmsg, "more than %d servers given",
                            CLI_SERVERS_MAX);
        }
        urls[n++] = t;
    }
    if (n == 0) {
        return keel_err(KEEL_EUSAGE, errmsg, "--server list is empty");
    }
    s = natsOptions_Create(&opts);
    if (s == NATS_OK) {
        s = natsOptions_SetServers(opts, urls, n);
    }
    if (s == NATS_OK && (conn->user != NULL || conn->password != NULL)) {
        s = natsOptions_SetUserInfo(opts, conn->user, conn->password);
    }
    if (s == NATS_OK) {
        s = natsOptions_SetTimeout(opts, conn->timeout_ms);
    }
    if (s == NATS_OK) {
        s = tls_options(conn, opts);
    }
    if (s == NATS_OK) {
        /* Shows in the server's connection list (monitoring). */
        s = natsOptions_SetName(opts, "keel");
    }
    if (s == NATS_OK) {
        /* Try the servers in the order given: predictable for scripts. */
        s = natsOptions_SetNoRandomize(opts, true);
    }
    if (s != NATS_OK) {
        natsOptions_Destroy(opts);
        return keel_err(s == NATS_NO_MEMORY ? KEEL_ENOMEM : KEEL_EUSAGE, errmsg,
                        "bad connection options (%s): check --server",
                        natsStatus_GetText(s));
    }
    *out = opts;
    return 0;
}

static const char *servers_text(const struct cli_conn_opts *conn)
{
    if (conn->servers != NULL && conn->servers[0] != '\0') {
        return conn->servers;
    }
    const char *env = getenv("NATS_URL");
    return env != NULL && env[0] != '\0' ? env : CLI_URL_DEFAULT;
}

int cli_connect(const struct cli_conn_opts *conn, natsOptions *opts,
                natsConnection **nc, char *errmsg)
{
    natsStatus s = natsConnection_Connect(nc, opts);
    if (s == NATS_OK) {
        return 0;
    }
    const char *detail = nats_GetLastError(NULL);
    const char *why;
    switch (s) {
    case NATS_NO_SERVER:
        why = "connection refused or unreachable";
        break;
    case NATS_CONNECTION_AUTH_FAILED:
        return keel_err(KEEL_EAUTH, errmsg,
                        "cannot connect to %s: authorization failed — check "
                        "--user and --password",
                        servers_text(conn));
    case NATS_TIMEOUT:
        why = "timed out";
        break;
    default:
        why = detail != NULL && detail[0] != '\0' ? detail
                                                  : natsStatus_GetText(s);
        break;
    }
    return keel_err(KEEL_ECONN, errmsg,
                    "cannot connect to %s: %s — is keeld running? "
                    "(tools/dev run)",
                    servers_text(conn), why);
}

int cli_connect_default(const struct cli_conn_opts *conn, natsConnection **nc,
                        char *errmsg)
{
    natsOptions *opts = NULL;
    int rv = cli_options_create(conn, &opts, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = cli_connect(conn, opts, nc, errmsg);
    natsOptions_Destroy(opts);
    return rv;
}

int cli_nats_err(natsStatus s, char *errmsg, const char *what)
{
    int rv = KEEL_EIO;
    switch (s) {
    case NATS_TIMEOUT:
        rv = KEEL_ETIMEOUT;
        break;
    case NATS_NO_MEMORY:
        rv = KEEL_ENOMEM;
        break;
    case NATS_INVALID_SUBJECT:
    case NATS_INVALID_ARG:
    case NATS_INVALID_QUEUE_NAME:
        rv = KEEL_EUSAGE;
        break;
    case NATS_NOT_PERMITTED:
        rv = KEEL_EPERM;
        break;
    case NATS_CONNECTION_CLOSED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_STALE_CONNECTION:
        rv = KEEL_ECONN;
        break;
    default:
        break;
    }
    return keel_err(rv, errmsg, "%s: %s", what, natsStatus_GetText(s));
}

/* Reverse argv[lo, hi): the building block of an in-place rotation. */
static void reverse_args(char **argv, int lo, int hi)
{
    for (hi--; lo < hi; lo++, hi--) {
        char *t = argv[lo];
        argv[lo] = argv[hi];
        argv[hi] = t;
    }
}

/* How many words the connection flag at `arg` spans (1 or 2), 0 when it is
 * not a connection flag, or -1 when its value is missing. */
static int conn_flag_words(const struct cli_flag *common, const char *arg,
                           bool has_next)
{
    if (arg[0] != '-' || arg[1] == '\0' || strcmp(arg, "--") == 0) {
        return 0;
    }
    bool is_long = arg[1] == '-';
    const char *name = arg + (is_long ? 2 : 1);
    const char *eq = is_long ? strchr(name, '=') : NULL;
    size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    if (!is_long && len != 1) {
        return 0;
    }
    const struct cli_flag *f =
        find_flag(common, NULL, name, len, is_long ? 0 : name[0]);
    if (f == NULL) {
        return 0;
    }
    ASSERT(f->kind != CLI_FLAG_BOOL); /* every connection flag has a value */
    if (eq != NULL) {
        return 1;
    }
    return has_next ? 2 : -1;
}

int cli_hoist_conn_flags(int argc, char **argv, int *hoisted, char *errmsg)
{
    struct cli_conn_opts unused;
    struct cli_flag common[COMMON_FLAGS_ROWS];

    ASSERT(argc >= 1);
    cli_conn_opts_init(&unused);
    common_flags(&unused, common);
    int end = 1; /* the leading block is argv[1, end) */
    while (end < argc) {
        int n = conn_flag_words(common, argv[end], end + 1 < argc);
        if (n < 0) {
            return keel_err(KEEL_EUSAGE, errmsg, "flag %s needs a value",
                            argv[end]);
        }
        if (n == 0) {
            break;
        }
        end += n;
    }
    *hoisted = end - 1;
    /* Move the block behind the command's own words, before any "--" so it
     * is still read as flags: [block][rest) becomes [rest)[block]. */
    int stop = end;
    while (stop < argc && strcmp(argv[stop], "--") != 0) {
        stop++;
    }
    if (end > 1 && stop > end) {
        reverse_args(argv, 1, end);
        reverse_args(argv, end, stop);
        reverse_args(argv, 1, stop);
    }
    ASSERT(*hoisted >= 0 && *hoisted < argc);
    return 0;
}

int cli_perm_err(natsConnection *nc, const char *what, char *errmsg)
{
    const char *text = NULL;
    if (natsConnection_GetLastError(nc, &text) != NATS_NOT_PERMITTED) {
        return 0;
    }
    /* The server refused with -ERR 'Permissions Violation ...'; libnats
     * keeps it as the connection's last error and otherwise only times
     * out, so the user would never learn why. */
    return keel_err(KEEL_EPERM, errmsg,
                    "%s: the server denied it (%s) — ask for the permission "
                    "or connect as another --user",
                    what, text != NULL ? text : "permissions violation");
}

int cli_pair_split(const char *item, char sep, const char *flag, char *key,
                   size_t cap, const char **value, char *errmsg)
{
    const char *at = strchr(item, sep);
    size_t klen = at != NULL ? (size_t)(at - item) : 0;
    if (klen == 0 || klen >= cap) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "%s '%s' must look like Key%cValue (a key of 1 to %zu "
                        "bytes)",
                        flag, item, sep, cap - 1);
    }
    memcpy(key, item, klen);
    key[klen] = '\0';
    for (*value = at + 1; **value == ' ';) {
        (*value)++;
    }
    return 0;
}

int cli_subject_check(const char *subject, bool wildcards_ok, char *errmsg)
{
    ASSERT(subject != NULL);
    const char *why = NULL;
    size_t n = strlen(subject);
    if (n == 0) {
        why = "it is empty";
    } else if (strpbrk(subject, " \t\r\n") != NULL) {
        why = "it contains white space";
    } else if (subject[0] == '.' || subject[n - 1] == '.' ||
               strstr(subject, "..") != NULL) {
        why = "it has an empty token (a leading, trailing or double dot)";
    } else if (!wildcards_ok && strpbrk(subject, "*>") != NULL) {
        why = "wildcards (* and >) are for subscribing, not publishing";
    }
    if (why == NULL) {
        return 0;
    }
    return keel_err(KEEL_EUSAGE, errmsg, "subject \"%s\" is not valid: %s",
                    subject, why);
}
