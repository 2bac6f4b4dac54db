#include "srv_config.h"

#include <ctype.h>
#include <signal.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_confparse.h"
#include "srv_log.h"

void srv_config_defaults(struct srv_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->addr, sizeof c->addr, "0.0.0.0");
    c->port = 4222;
    c->http_port = -1;
    snprintf(c->store_dir, sizeof c->store_dir, "keel-data");
    c->max_payload = SRV_PAYLOAD_BYTES_DEFAULT;
    c->max_pending = SRV_CONN_WRITE_BYTES_MAX;
    c->ping_interval_ms = SRV_PING_INTERVAL_MS_DEFAULT;
    c->ping_max = SRV_PINGS_OUTSTANDING_MAX;
    c->fsync = SRV_FSYNC_GROUP;
    c->max_connections = SRV_CONNS_MAX;
    c->max_subs = SRV_SUBS_PER_CONN_MAX;
    c->max_header_bytes = SRV_HEADER_BYTES_DEFAULT;
    c->tls_timeout_ms = SRV_TLS_TIMEOUT_MS_DEFAULT;
    c->js_max_memory = -1;
    c->js_max_file = -1;
    c->scrub_pass_ms = SRV_SCRUB_PASS_MS_DEFAULT;
}

void srv_config_release(struct srv_config *c)
{
    json_decref(c->auth_users);
    c->auth_users = NULL;
}

static int copy_str(char *dst, size_t dst_len, const char *v, const char *what,
                    char *errmsg)
{
    if (strlen(v) >= dst_len) {
        return keel_err(KEEL_EUSAGE, errmsg, "%s is too long (max %zu bytes)",
                        what, dst_len - 1);
    }
    snprintf(dst, dst_len, "%s", v);
    return 0;
}

static int set_port(int *port, const char *v, bool allow_neg, char *errmsg)
{
    char *end;
    long p;

    errno = 0;
    p = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || end == v || p > 65535 ||
        p < (allow_neg ? -1 : 0)) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "invalid port '%s': use a number 0-65535", v);
    }
    *port = (int)p;
    return 0;
}

static int set_fsync(struct srv_config *c, const char *v, char *errmsg)
{
    if (strcmp(v, "group") == 0) {
        c->fsync = SRV_FSYNC_GROUP;
        return 0;
    }
    if (strcmp(v, "always") == 0) {
        c->fsync = SRV_FSYNC_ALWAYS;
        return 0;
    }
    if (strncmp(v, "interval:", 9) == 0) {
        uint64_t ms;
        const char *d = v + 9;
        char buf[64];
        /* interval:<ms>; a suffixed duration is accepted too. */
        bool bare = d[0] != '\0' && strspn(d, "0123456789") == strlen(d);
        snprintf(buf, sizeof buf, bare ? "%sms" : "%s", d);
        if (srv_parse_duration_ms(buf, &ms) && ms > 0) {
            c->fsync = SRV_FSYNC_INTERVAL;
            c->fsync_interval_ms = ms;
            return 0;
        }
    }
    return keel_err(KEEL_EUSAGE, errmsg,
                    "invalid --fsync '%s': use group, always or "
                    "interval:<ms>",
                    v);
}

static int set_size(uint64_t *dst, const char *v, uint64_t max,
                    const char *what, char *errmsg)
{
    uint64_t n;

    if (!srv_parse_size(v, &n) || n == 0 || n > max) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "invalid %s '%s': use a size from 1 to %llu bytes "
                        "(suffixes K, MB, GB allowed)",
                        what, v, (unsigned long long)max);
    }
    *dst = n;
    return 0;
}

enum opt_id {
    OPT_ADDR,
    OPT_PORT,
    OPT_HTTP_PORT,
    OPT_HTTPS_PORT,
    OPT_NAME,
    OPT_CONFIG,
    OPT_STORE_DIR,
    OPT_DEBUG,
    OPT_TRACE,
    OPT_DEBUG_TRACE,
    OPT_LOG,
    OPT_LOG_LEVEL,
    OPT_PORTS_FILE_DIR,
    OPT_MAX_PAYLOAD,
    OPT_SEGMENT_SIZE,
    OPT_SNAPSHOT_ENTRIES,
    OPT_SCRUB_PASS,
    OPT_MAX_PENDING,
    OPT_PING_INTERVAL,
    OPT_PING_MAX,
    OPT_CLUSTER,
    OPT_CLUSTER_NAME,
    OPT_ROUTES,
    OPT_FSYNC,
    OPT_HELP,
    OPT_VERSION,
    OPT_SIGNAL,
    OPT_USER,
    OPT_PASS,
    OPT_AUTH,
    OPT_AUTH_TIMEOUT,
    OPT_MAX_CONNS,
    OPT_MAX_SUBS,
    OPT_MAX_HEADER,
    OPT_TLS,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_TLS_CA,
    OPT_TLS_VERIFY,
    OPT_TLS_TIMEOUT,
    OPT_JETSTREAM,
};

/* One row per option: its command-line flags and the top-level
 * config-file keys that set it (docs/operations.md lists both). */
struct opt {
    const char *names[4];
    const char *keys[3];
    enum opt_id id;
    bool has_value;
};

static const struct opt opts[] = {
    {{"a", "addr", "net", "host"}, {"host", "net", "addr"}, OPT_ADDR, true},
    {{"p", "port"}, {"port"}, OPT_PORT, true},
    {{"m", "http_port"}, {"http_port", "monitor_port"}, OPT_HTTP_PORT, true},
    {{"ms", "https_port"}, {"https_port"}, OPT_HTTPS_PORT, true},
    {{"n", "name", "server_name"}, {"server_name", "name"}, OPT_NAME, true},
    {{"c", "config"}, {NULL}, OPT_CONFIG, true},
    {{"sd", "store_dir"}, {"store_dir"}, OPT_STORE_DIR, true},
    {{"D", "debug"}, {"debug"}, OPT_DEBUG, false},
    {{"V", "trace"}, {"trace"}, OPT_TRACE, false},
    {{"DV"}, {NULL}, OPT_DEBUG_TRACE, false},
    {{"l", "log", "log_file"}, {"logfile", "log_file"}, OPT_LOG, true},
    {{"log-level", "log_level"}, {"log_level"}, OPT_LOG_LEVEL, true},
    {{"ports_file_dir"}, {"ports_file_dir"}, OPT_PORTS_FILE_DIR, true},
    {{"max_payload"}, {"max_payload"}, OPT_MAX_PAYLOAD, true},
    {{"segment_size"}, {"segment_size"}, OPT_SEGMENT_SIZE, true},
    {{"snapshot_entries"}, {"snapshot_entries"}, OPT_SNAPSHOT_ENTRIES, true},
    {{"scrub_pass"}, {"scrub_pass"}, OPT_SCRUB_PASS, true},
    {{"max_pending"}, {"max_pending"}, OPT_MAX_PENDING, true},
    {{"ping_interval"}, {"ping_interval"}, OPT_PING_INTERVAL, true},
    {{"ping_max"}, {"ping_max"}, OPT_PING_MAX, true},
    {{"cluster", "cluster_listen"}, {NULL}, OPT_CLUSTER, true},
    {{"cluster_name"}, {NULL}, OPT_CLUSTER_NAME, true},
    {{"routes"}, {NULL}, OPT_ROUTES, true},
    {{"fsync"}, {"fsync"}, OPT_FSYNC, true},
    {{"h", "help"}, {NULL}, OPT_HELP, false},
    {{"v", "version"}, {NULL}, OPT_VERSION, false},
    {{"sl", "signal"}, {NULL}, OPT_SIGNAL, true},
    {{"user"}, {NULL}, OPT_USER, true},
    {{"pass"}, {NULL}, OPT_PASS, true},
    {{"auth"}, {NULL}, OPT_AUTH, true},
    {{"auth_timeout"}, {NULL}, OPT_AUTH_TIMEOUT, true},
    {{"max_connections", "max_conn"},
     {"max_connections", "max_conn"},
     OPT_MAX_CONNS,
     true},
    {{"max_subscriptions", "max_subs"},
     {"max_subscriptions", "max_subs"},
     OPT_MAX_SUBS,
     true},
    {{"max_header_size"}, {"max_header_size"}, OPT_MAX_HEADER, true},
    {{"tls"}, {NULL}, OPT_TLS, false},
    {{"tlscert"}, {NULL}, OPT_TLS_CERT, true},
    {{"tlskey"}, {NULL}, OPT_TLS_KEY, true},
    {{"tlscacert"}, {NULL}, OPT_TLS_CA, true},
    {{"tlsverify"}, {NULL}, OPT_TLS_VERIFY, false},
    {{"tls_timeout"}, {NULL}, OPT_TLS_TIMEOUT, true},
    {{"js", "jetstream"}, {NULL}, OPT_JETSTREAM, false},
};

/* nats-server's --signal commands and the signals keeld acts on. */
static const struct {
    const char *cmd;
    int signum;
} signal_cmds[] = {
    {"ldm", SIGUSR2},  {"term", SIGTERM},  {"quit", SIGINT},
    {"stop", SIGKILL}, {"reload", SIGHUP},
};

/* --signal CMD=PID or CMD=PIDFILE (nats-server's form). keeld needs the
 * PID: it does not search the process table by name. */
static int set_signal(struct srv_config *c, const char *v, char *errmsg)
{
    const char *eq = strchr(v, '=');
    size_t n = eq != NULL ? (size_t)(eq - v) : strlen(v);
    c->signal_num = 0;
    for (size_t i = 0; i < sizeof signal_cmds / sizeof signal_cmds[0]; i++) {
        if (strlen(signal_cmds[i].cmd) == n &&
            memcmp(signal_cmds[i].cmd, v, n) == 0) {
            c->signal_num = signal_cmds[i].signum;
        }
    }
    if (c->signal_num == 0) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--signal '%.*s': use ldm, term, quit, stop or reload "
                        "(keeld does not reopen log files on a signal)",
                        (int)n, v);
    }
    if (eq == NULL || eq[1] == '\0') {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--signal %.*s needs the process: %.*s=PID or "
                        "%.*s=PIDFILE",
                        (int)n, v, (int)n, v, (int)n, v);
    }
    return copy_str(c->signal_pid, sizeof c->signal_pid, eq + 1, "signal",
                    errmsg);
}

static const struct opt *find_opt(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        for (size_t k = 0; k < 4 && opts[i].names[k] != NULL; k++) {
            if (strlen(opts[i].names[k]) == len &&
                strncmp(opts[i].names[k], name, len) == 0) {
                return &opts[i];
            }
        }
    }
    return NULL;
}

static const struct opt *find_file_key(const char *key)
{
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        for (size_t k = 0; k < 3 && opts[i].keys[k] != NULL; k++) {
            if (strcmp(opts[i].keys[k], key) == 0) {
                return &opts[i];
            }
        }
    }
    return NULL;
}

static int set_ping_max(struct srv_config *c, const char *v, char *errmsg)
{
    char *end;
    unsigned long n;

    errno = 0;
    n = strtoul(v, &end, 10);
    if (errno != 0 || *end != '\0' || end == v || n == 0 || n > 1000) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "invalid ping_max '%s': use a number 1-1000", v);
    }
    c->ping_max = (unsigned)n;
    return 0;
}

static int set_ping_interval(struct srv_config *c, const char *v, char *errmsg)
{
    uint64_t ms;

    if (!srv_parse_duration_ms(v, &ms) || ms == 0) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "invalid ping_interval '%s': use e.g. 2m, 30s, "
                        "500ms",
                        v);
    }
    c->ping_interval_ms = ms;
    return 0;
}

static int set_count(uint64_t *dst, const char *v, uint64_t max,
                     const char *what, char *errmsg)
{
    char *end;
    unsigned long long n;

    errno = 0;
    n = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || end == v || n == 0 || n > max) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "invalid %s '%s': use a number 1-%llu", what, v,
                        (unsigned long long)max);
    }
    *dst = n;
    return 0;
}

static int set_timeout(uint64_t *dst, const char *v, const char *what,
                       char *errmsg)
{
    uint64_t ms;

    if (!srv_parse_duration_ms(v, &ms) || ms == 0 ||
        ms > SRV_AUTH_TIMEOUT_MS_MAX) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "invalid %s '%s': use e.g. 2 (seconds), 2s, 500ms "
                        "(at most 10m)",
                        what, v);
    }
    *dst = ms;
    return 0;
}

/* Security options (auth, limits, TLS): a dispatch switch. */
static int apply_security_opt(struct srv_config *c, enum opt_id id,
                              const char *v, char *errmsg)
{
    switch (id) {
    case OPT_USER:
        return copy_str(c->auth_user, sizeof c->auth_user, v, "user", errmsg);
    case OPT_PASS:
        return copy_str(c->auth_pass, sizeof c->auth_pass, v, "pass", errmsg);
    case OPT_AUTH:
        return copy_str(c->auth_token, sizeof c->auth_token, v, "auth token",
                        errmsg);
    case OPT_AUTH_TIMEOUT:
        return set_timeout(&c->auth_timeout_ms, v, "auth_timeout", errmsg);
    case OPT_MAX_CONNS:
        return set_count(&c->max_connections, v, SRV_CONNS_MAX,
                         "max_connections", errmsg);
    case OPT_MAX_SUBS:
        return set_count(&c->max_subs, v, SRV_SUBS_PER_CONN_MAX,
                         "max_subscriptions", errmsg);
    case OPT_MAX_HEADER:
        return set_size(&c->max_header_bytes, v, SRV_PAYLOAD_BYTES_MAX,
                        "max_header_size", errmsg);
    case OPT_TLS:
        c->tls = true;
        return 0;
    case OPT_TLS_CERT:
        return copy_str(c->tls_cert, sizeof c->tls_cert, v, "tlscert", errmsg);
    case OPT_TLS_KEY:
        return copy_str(c->tls_key, sizeof c->tls_key, v, "tlskey", errmsg);
    case OPT_TLS_CA:
        return copy_str(c->tls_ca, sizeof c->tls_ca, v, "tlscacert", errmsg);
    case OPT_TLS_VERIFY:
        c->tls = true;
        c->tls_verify = true;
        return 0;
    case OPT_TLS_TIMEOUT:
        return set_timeout(&c->tls_timeout_ms, v, "tls timeout", errmsg);
    default:
        return keel_err(KEEL_EUSAGE, errmsg, "unhandled option");
    }
}

/* One option with its value (NULL for switches). A dispatch switch over
 * every option, so it runs past 70 lines by design. */
static int apply_opt(struct srv_config *c, enum opt_id id, const char *v,
                     char *errmsg)
{
    switch (id) {
    case OPT_ADDR:
        return copy_str(c->addr, sizeof c->addr, v, "address", errmsg);
    case OPT_PORT: {
        int rv = set_port(&c->port, v, true, errmsg);
        if (rv == 0 && c->port == -1) {
            c->port = 0; /* nats-server's RANDOM_PORT: any free port */
        }
        return rv;
    }
    case OPT_HTTP_PORT:
        return set_port(&c->http_port, v, true, errmsg);
    case OPT_HTTPS_PORT:
        c->https = true; /* the monitoring port, served over TLS */
        return set_port(&c->http_port, v, true, errmsg);
    case OPT_NAME:
        return copy_str(c->name, sizeof c->name, v, "server name", errmsg);
    case OPT_CONFIG:
        return copy_str(c->config_file, sizeof c->config_file, v, "config path",
                        errmsg);
    case OPT_STORE_DIR:
        if (v[0] == '\0') {
            return keel_err(KEEL_EUSAGE, errmsg, "store_dir is empty");
        }
        return copy_str(c->store_dir, sizeof c->store_dir, v, "store_dir",
                        errmsg);
    case OPT_DEBUG:
        c->debug = true;
        return 0;
    case OPT_TRACE:
        c->trace = true;
        return 0;
    case OPT_DEBUG_TRACE:
        c->debug = true;
        c->trace = true;
        return 0;
    case OPT_LOG:
        return copy_str(c->log_file, sizeof c->log_file, v, "log path", errmsg);
    case OPT_LOG_LEVEL: {
        enum srv_log_level lvl;
        int rv = srv_log_level_parse(v, &lvl, errmsg);
        return rv != 0 ? rv
                       : copy_str(c->log_level, sizeof c->log_level, v,
                                  "log level", errmsg);
    }
    case OPT_PORTS_FILE_DIR:
        return copy_str(c->ports_file_dir, sizeof c->ports_file_dir, v,
                        "ports_file_dir", errmsg);
    case OPT_MAX_PAYLOAD:
        return set_size(&c->max_payload, v, SRV_PAYLOAD_BYTES_MAX,
                        "max_payload", errmsg);
    case OPT_SEGMENT_SIZE: {
        int rv = set_size(&c->segment_bytes, v, STORE_SEGMENT_BYTES_MAX,
                          "segment_size", errmsg);
        if (rv == 0 && c->segment_bytes < STORE_SEGMENT_BYTES_MIN) {
            rv = keel_err(KEEL_EUSAGE, errmsg, "segment_size below %u bytes",
                          STORE_SEGMENT_BYTES_MIN);
        }
        return rv;
    }
    case OPT_SNAPSHOT_ENTRIES:
        return set_size(&c->snapshot_entries, v, UINT32_MAX, "snapshot_entries",
                        errmsg);
    case OPT_SCRUB_PASS:
        return srv_config_set_scrub_pass(c, v, errmsg);
    case OPT_MAX_PENDING:
        return set_size(&c->max_pending, v, SRV_CONN_WRITE_BYTES_MAX,
                        "max_pending", errmsg);
    case OPT_PING_INTERVAL:
        return set_ping_interval(c, v, errmsg);
    case OPT_PING_MAX:
        return set_ping_max(c, v, errmsg);
    case OPT_CLUSTER:
        return copy_str(c->cluster_listen, sizeof c->cluster_listen, v,
                        "cluster", errmsg);
    case OPT_CLUSTER_NAME:
        return copy_str(c->cluster_name, sizeof c->cluster_name, v,
                        "cluster_name", errmsg);
    case OPT_ROUTES:
        return copy_str(c->routes, sizeof c->routes, v, "routes", errmsg);
    case OPT_FSYNC:
        return set_fsync(c, v, errmsg);
    case OPT_HELP:
        c->help = true;
        return 0;
    case OPT_VERSION:
        c->version = true;
        return 0;
    case OPT_JETSTREAM:
        /* JetStream is always on (docs/decisions/0001): -js says so. */
        return 0;
    case OPT_SIGNAL:
        return set_signal(c, v, errmsg);
    default:
        return apply_security_opt(c, id, v, errmsg);
    }
    return keel_err(KEEL_EUSAGE, errmsg, "unhandled option");
}

/* Render a scalar as the string a flag would carry. */
static bool scalar_str(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v)) {
        snprintf(buf, len, "%s", json_string_value(v));
        return true;
    }
    if (json_is_integer(v)) {
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
        return true;
    }
    return false;
}

/* "host:port", ":port" or a bare port. */
static int apply_hostport(struct srv_config *c, const json_t *v, bool http,
                          char *errmsg)
{
    char buf[512];
    char *colon;

    if (!scalar_str(v, buf, sizeof buf)) {
        return keel_err(KEEL_EUSAGE, errmsg, "expected host:port");
    }
    colon = strrchr(buf, ':');
    if (colon == NULL) {
        return apply_opt(c, http ? OPT_HTTP_PORT : OPT_PORT, buf, errmsg);
    }
    *colon = '\0';
    if (!http && buf[0] != '\0') {
        int rv = apply_opt(c, OPT_ADDR, buf, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return apply_opt(c, http ? OPT_HTTP_PORT : OPT_PORT, colon + 1, errmsg);
}

/* Keys nats-server reads at the top level that keeld does not implement.
 * They are refused, never ignored: a deployment that relies on one (accounts
 * for auth, a gateway, a pid file its scripts signal) must not start without
 * it (docs/operations.md, "Config file"). */
static const char *const nats_only_keys[] = {
    "accounts",
    "authorization_callout",
    "client_advertise",
    "connect_error_reports",
    "default_js_domain",
    "disable_sublist_cache",
    "gateway",
    "http_base_path",
    "lame_duck_duration",
    "lame_duck_grace_period",
    "leaf",
    "leafnodes",
    "logfile_size_limit",
    "max_closed_clients",
    "max_control_line",
    "max_traced_msg_len",
    "mqtt",
    "no_auth_user",
    "no_header_support",
    "no_system_account",
    "nkey",
    "ocsp",
    "ocsp_cache",
    "operator",
    "operators",
    "pid_file",
    "pidfile",
    "prof_port",
    "reconnect_error_reports",
    "remote_syslog",
    "resolver",
    "resolver_preload",
    "resolver_tls",
    "syslog",
    "system_account",
    "trusted",
    "trusted_keys",
    "websocket",
    "write_deadline",
};

/* The one nats-server key accepted and ignored on purpose, with why. */
#define IGNORED_KEY "logtime"
#define IGNORED_WHY "keeld stamps every log line with its UTC time"

static bool key_in(const char *key, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(key, keys[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* The first key of block o that keeld does not read fails the load, as an
 * unknown field fails nats-server's; where names the block. */
static int check_block_keys(const json_t *o, const char *where,
                            const char *const *known, size_t n, char *errmsg)
{
    const char *key;
    const json_t *v;

    json_object_foreach((json_t *)o, key, v)
    {
        (void)v;
        if (!key_in(key, known, n)) {
            return keel_err(KEEL_EUSAGE, errmsg,
                            "%s: '%s' is not supported by keeld; remove it "
                            "(docs/operations.md lists the keys keeld reads)",
                            where, key);
        }
    }
    return 0;
}

#define KEYS(a) a, sizeof a / sizeof a[0]

/* A top-level block (cluster, authorization, tls): a { } object whose keys
 * are all known. */
static int check_block(const json_t *v, const char *where,
                       const char *const *known, size_t n, char *errmsg)
{
    if (!json_is_object(v)) {
        return keel_err(KEEL_EUSAGE, errmsg, "expected a { } block");
    }
    return check_block_keys(v, where, known, n, errmsg);
}

/* A string member key of block o into dst (cap bytes); absent leaves dst
 * alone. */
static int member_str(const json_t *o, const char *key, char *dst, size_t cap,
                      char *errmsg)
{
    const json_t *v = json_object_get(o, key);

    if (v == NULL) {
        return 0;
    }
    if (!scalar_str(v, dst, cap)) {
        return keel_err(KEEL_EUSAGE, errmsg, "%s: expected a value", key);
    }
    return 0;
}

/* cluster { authorization { user, password }, tls { cert_file, key_file,
 * ca_file } }: the route secret and the links' mutual TLS. */
static int apply_cluster_security(struct srv_config *c, const json_t *v,
                                  char *errmsg)
{
    const json_t *a = json_object_get(v, "authorization");
    const json_t *t = json_object_get(v, "tls");
    int rv = 0;

    if ((a != NULL && !json_is_object(a)) ||
        (t != NULL && !json_is_object(t))) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "authorization and tls: expected { } blocks");
    }
    static const char *const akeys[] = {"user", "pass", "password"};
    /* Links are always mutual TLS: verify: true asks for what is done. */
    static const char *const tkeys[] = {"cert_file", "key_file", "ca_file",
                                        "verify"};
    if (a != NULL) {
        rv = check_block_keys(a, "cluster.authorization", KEYS(akeys), errmsg);
    }
    if (t != NULL && rv == 0) {
        rv = check_block_keys(t, "cluster.tls", KEYS(tkeys), errmsg);
        if (rv == 0 && json_is_false(json_object_get(t, "verify"))) {
            rv = keel_err(KEEL_EUSAGE, errmsg,
                          "cluster.tls: verify: false is not supported "
                          "(cluster links are always mutual TLS)");
        }
    }
    /* One row a string member; a block absent (NULL) leaves its fields. */
    const struct {
        const json_t *block;
        const char *key;
        char *dst;
        size_t cap;
    } members[] = {
        {a, "user", c->cluster_user, sizeof c->cluster_user},
        {a, "pass", c->cluster_pass, sizeof c->cluster_pass},
        {a, "password", c->cluster_pass, sizeof c->cluster_pass},
        {t, "cert_file", c->cluster_tls_cert, sizeof c->cluster_tls_cert},
        {t, "key_file", c->cluster_tls_key, sizeof c->cluster_tls_key},
        {t, "ca_file", c->cluster_tls_ca, sizeof c->cluster_tls_ca},
    };
    for (size_t i = 0; rv == 0 && i < sizeof members / sizeof members[0]; i++) {
        rv = member_str(members[i].block, members[i].key, members[i].dst,
                        members[i].cap, errmsg);
    }
    return rv;
}

static int apply_cluster(struct srv_config *c, const json_t *v, char *errmsg)
{
    const json_t *x;
    char buf[1024];
    size_t n = 0;
    size_t i;

    static const char *const keys[] = {"name", "listen", "routes",
                                       "authorization", "tls"};
    int krv = check_block(v, "cluster", KEYS(keys), errmsg);
    if (krv != 0) {
        return krv;
    }
    x = json_object_get(v, "name");
    if (x != NULL && scalar_str(x, buf, sizeof buf)) {
        int rv = apply_opt(c, OPT_CLUSTER_NAME, buf, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    x = json_object_get(v, "listen");
    if (x != NULL && scalar_str(x, buf, sizeof buf)) {
        int rv = apply_opt(c, OPT_CLUSTER, buf, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    int rv = apply_cluster_security(c, v, errmsg);
    if (rv != 0) {
        return rv;
    }
    x = json_object_get(v, "routes");
    const json_t *r;
    c->routes[0] = '\0';
    json_array_foreach(x, i, r)
    {
        if (scalar_str(r, buf, sizeof buf) &&
            n + strlen(buf) + 2 < sizeof c->routes) {
            n += (size_t)snprintf(c->routes + n, sizeof c->routes - n, "%s%s",
                                  n > 0 ? "," : "", buf);
        }
    }
    return 0;
}

/* A string member of block o into dst via the flag of the same meaning;
 * absent members leave dst alone. */
static int block_str(struct srv_config *c, const json_t *o, const char *key,
                     enum opt_id id, char *errmsg)
{
    const json_t *v = json_object_get(o, key);
    char buf[PATH_MAX];

    if (v == NULL) {
        return 0;
    }
    const char *str = json_string_value(v);
    char *end = NULL;
    double secs =
        str != NULL && strchr(str, '.') != NULL ? strtod(str, &end) : 0;
    if (json_is_real(v) || (end != NULL && end != str && *end == '\0')) {
        /* timeout: 0.5 (seconds, as nats-server reads it) */
        secs = json_is_real(v) ? json_real_value(v) : secs;
        if (secs < 0 || secs > SRV_AUTH_TIMEOUT_MS_MAX / 1000.0) {
            return keel_err(KEEL_EUSAGE, errmsg, "%s: out of range", key);
        }
        snprintf(buf, sizeof buf, "%llums", (unsigned long long)(secs * 1000));
    } else if (!scalar_str(v, buf, sizeof buf)) {
        return keel_err(KEEL_EUSAGE, errmsg, "%s: expected a value", key);
    }
    return apply_opt(c, id, buf, errmsg);
}

/* A block's value keys and the option each sets (as its flag would). */
struct block_key {
    const char *key;
    enum opt_id id;
};

/* block_str for each row, in order; the first error stops. */
static int block_strs(struct srv_config *c, const json_t *o,
                      const struct block_key *rows, size_t n, char *errmsg)
{
    int rv = 0;

    for (size_t i = 0; rv == 0 && i < n; i++) {
        rv = block_str(c, o, rows[i].key, rows[i].id, errmsg);
    }
    return rv;
}

/* authorization { token | user+password | users [...], timeout } */
static int apply_authorization(struct srv_config *c, const json_t *v,
                               char *errmsg)
{
    const json_t *users;
    int rv;

    static const char *const keys[] = {"token", "user",    "password",
                                       "pass",  "timeout", "users"};
    static const struct block_key strs[] = {{"token", OPT_AUTH},
                                            {"user", OPT_USER},
                                            {"password", OPT_PASS},
                                            {"pass", OPT_PASS},
                                            {"timeout", OPT_AUTH_TIMEOUT}};
    rv = check_block(v, "authorization", KEYS(keys), errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = block_strs(c, v, KEYS(strs), errmsg);
    users = json_object_get(v, "users");
    if (rv == 0 && users != NULL) {
        if (!json_is_array(users)) {
            return keel_err(KEEL_EUSAGE, errmsg, "users: expected a [ ] list");
        }
        json_decref(c->auth_users);
        c->auth_users = json_incref((json_t *)users);
    }
    return rv;
}

/* tls { cert_file, key_file, ca_file, verify, timeout } */
static int apply_tls(struct srv_config *c, const json_t *v, char *errmsg)
{
    int rv;

    static const char *const keys[] = {"cert_file", "key_file",
                                       "ca_file",   "verify",
                                       "timeout",   "handshake_first"};
    static const struct block_key strs[] = {{"cert_file", OPT_TLS_CERT},
                                            {"key_file", OPT_TLS_KEY},
                                            {"ca_file", OPT_TLS_CA},
                                            {"timeout", OPT_TLS_TIMEOUT}};
    rv = check_block(v, "tls", KEYS(keys), errmsg);
    if (rv != 0) {
        return rv;
    }
    c->tls = true;
    c->tls_verify = json_is_true(json_object_get(v, "verify"));
    c->tls_handshake_first =
        json_is_true(json_object_get(v, "handshake_first"));
    return block_strs(c, v, KEYS(strs), errmsg);
}

static int apply_key(struct srv_config *c, const char *key, const json_t *v,
                     char *errmsg)
{
    char buf[PATH_MAX];

    if (strcmp(key, "authorization") == 0) {
        return apply_authorization(c, v, errmsg);
    }
    if (strcmp(key, "tls") == 0) {
        return apply_tls(c, v, errmsg);
    }

    if (strcmp(key, "https") == 0) {
        c->https = true; /* https: host:port, as http: but over TLS */
        return apply_hostport(c, v, true, errmsg);
    }
    if (strcmp(key, "listen") == 0 || strcmp(key, "http") == 0) {
        return apply_hostport(c, v, key[0] == 'h', errmsg);
    }
    if (strcmp(key, "cluster") == 0) {
        return apply_cluster(c, v, errmsg);
    }
    if (strcmp(key, "jetstream") == 0) {
        return srv_config_apply_jetstream(c, v, errmsg);
    }
    if (strcmp(key, "server_tags") == 0) {
        return srv_tags_parse(v, &c->server_tags, errmsg);
    }
    const struct opt *o = find_file_key(key);
    if (o != NULL) {
        enum opt_id id = o->id;
        if (id == OPT_DEBUG || id == OPT_TRACE) {
            bool on = json_is_true(v);
            *(id == OPT_DEBUG ? &c->debug : &c->trace) = on;
            return 0;
        }
        if (!scalar_str(v, buf, sizeof buf)) {
            return keel_err(KEEL_EUSAGE, errmsg, "expected a value");
        }
        return apply_opt(c, id, buf, errmsg);
    }
    if (strcasecmp(key, IGNORED_KEY) == 0) {
        SRV_INFO("config", "ignoring '%s': %s", key, IGNORED_WHY);
        return 0;
    }
    if (key_in(key, KEYS(nats_only_keys))) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "a nats-server setting keeld does not implement: "
                        "remove it (docs/operations.md lists the keys keeld "
                        "reads)");
    }
    return keel_err(KEEL_EUSAGE, errmsg,
                    "unknown field (docs/operations.md lists the keys keeld "
                    "reads)");
}

int srv_config_apply_json(struct srv_config *c, const json_t *root,
                          char *errmsg)
{
    const char *key;
    const json_t *v;
    char sub[KEEL_ERRMSG_MAX];

    json_object_foreach((json_t *)root, key, v)
    {
        int rv = apply_key(c, key, v, sub);
        if (rv != 0) {
            return keel_err(KEEL_ECONFIG, errmsg, "config key '%s': %s", key,
                            sub);
        }
    }
    return 0;
}

static int load_file(struct srv_config *c, const char *path, char *errmsg)
{
    FILE *f = fopen(path, "r");
    char *text;
    size_t n;
    json_t *root = NULL;
    int rv;

    if (f == NULL) {
        return keel_err(KEEL_EIO, errmsg, "cannot read config %s: %s", path,
                        strerror(errno));
    }
    text = malloc(SRV_CONFIG_BYTES_MAX + 1);
    if (text == NULL) {
        fclose(f);
        return KEEL_ENOMEM;
    }
    n = fread(text, 1, SRV_CONFIG_BYTES_MAX + 1, f);
    fclose(f);
    rv = srv_confparse(text, n, &root, errmsg);
    free(text);
    if (rv != 0) {
        return rv;
    }
    rv = srv_config_apply_json(c, root, errmsg);
    json_decref(root);
    return rv;
}

/* Walk argv; with only_config, apply just -c (and help/version) so the
 * file can load before the flags that override it. */
static int walk_args(struct srv_config *c, int argc, char **argv,
                     bool only_config, char *errmsg)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *name = a + 1;
        const char *v = NULL;
        if (a[0] != '-' || a[1] == '\0') {
            return keel_err(KEEL_EUSAGE, errmsg,
                            "unexpected argument '%s' (see --help)", a);
        }
        if (name[0] == '-') {
            name++;
        }
        const char *eq = strchr(name, '=');
        size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
        const struct opt *o = find_opt(name, len);
        if (o == NULL) {
            return keel_err(KEEL_EUSAGE, errmsg,
                            "unknown flag '%s' (see --help)", a);
        }
        if (o->has_value) {
            if (eq != NULL) {
                v = eq + 1;
            } else if (i + 1 < argc) {
                v = argv[++i];
            } else {
                return keel_err(KEEL_EUSAGE, errmsg, "flag '%s' needs a value",
                                a);
            }
        } else if (eq != NULL) {
            return keel_err(KEEL_EUSAGE, errmsg, "flag '%s' takes no value", a);
        }
        bool early = o->id == OPT_CONFIG || o->id == OPT_HELP ||
                     o->id == OPT_VERSION || o->id == OPT_SIGNAL;
        if (only_config != early) {
            continue;
        }
        int rv = apply_opt(c, o->id, v, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

int srv_config_from_args(struct srv_config *c, int argc, char **argv,
                         char *errmsg)
{
    int rv;

    srv_config_defaults(c);
    rv = walk_args(c, argc, argv, true, errmsg);
    if (rv != 0 || c->help || c->version || c->signal_num != 0) {
        return rv;
    }
    if (c->config_file[0] != '\0') {
        rv = load_file(c, c->config_file, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return walk_args(c, argc, argv, false, errmsg);
}

const char *srv_config_usage(void)
{
    return "usage: keeld [options]\n"
           "  -a, --addr, --net HOST     client listen address (0.0.0.0)\n"
           "  -p, --port PORT            client port (4222; 0 or -1 = any)\n"
           "  -m, --http_port PORT       monitoring port (off; 0 = any)\n"
           "  -ms, --https_port PORT     monitoring over TLS (tls { } files)\n"
           "  -n, --name, --server_name  server name\n"
           "  -c, --config FILE          config file (flags override it)\n"
           "  -sd, --store_dir DIR       data directory (keel-data)\n"
           "  -js, --jetstream           JetStream (always on; accepted as\n"
           "                             nats-server spells it)\n"
           "  -l, --log FILE             log to FILE instead of stderr\n"
           "  -D, -V, -DV                debug, trace, both\n"
           "  --log-level LEVEL          error|warn|info|debug|trace (SIGHUP\n"
           "                             re-reads log_level from the config)\n"
           "  --ports_file_dir DIR       write keeld_<pid>.ports there\n"
           "  --max_payload SIZE         largest message (1MB)\n"
           "  --segment_size SIZE        store segment file size (64MB)\n"
           "  --snapshot_entries N       snapshot a stream every N entries\n"
           "  --scrub_pass DUR           verify every record and snapshot\n"
           "                             once per DUR in the background\n"
           "                             (24h; 0 turns the scrub off)\n"
           "                             (65536)\n"
           "  --max_pending SIZE         per-connection outbound limit\n"
           "  --ping_interval DUR        server ping interval (2m)\n"
           "  --ping_max N               unanswered pings before close "
           "(2)\n"
           "  --fsync MODE               group | always | interval:<ms>\n"
           "  --cluster URL, --cluster_name NAME, --routes URLS\n"
           "                             listen for cluster links on URL "
           "(port 0 ok),\n"
           "                             refuse nodes of another cluster "
           "name, dial the\n"
           "                             seed URLs (may list this node)\n"
           "  --user USER, --pass PASS   require this user (pass may be a "
           "keel-passwd hash)\n"
           "  --auth TOKEN               require this token\n"
           "  --auth_timeout DUR         time allowed until CONNECT (2s with "
           "auth, else 10s)\n"
           "  --max_connections N        connections at once (65536)\n"
           "  --max_subscriptions N      subscriptions per connection "
           "(65536)\n"
           "  --max_header_size SIZE     largest header block (64K)\n"
           "  --tls, --tlsverify         enable TLS (verify client certs)\n"
           "  --tlscert, --tlskey, --tlscacert FILE   PEM files\n"
           "  --tls_timeout DUR          TLS handshake time (2s)\n"
           "  -h, --help                 this text\n"
           "  -v, --version              print the version\n"
           "  -sl, --signal CMD=PID      send ldm (lame duck), term, quit,\n"
           "                             stop or reload to the keeld of PID\n"
           "                             (or of the pid in file PIDFILE)\n";
}
