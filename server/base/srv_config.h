/* keeld settings: defaults, then the config file (-c), then flags, which
 * override the file. Flags are spelled as nats-server spells them.
 */
#ifndef SRV_CONFIG_H
#define SRV_CONFIG_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"
#include "srv_tags.h"
#include "srv_units.h"

#define SRV_VERSION_ADVERTISED "2.10.24"

enum srv_fsync_mode {
    SRV_FSYNC_GROUP = 0,
    SRV_FSYNC_ALWAYS,
    SRV_FSYNC_INTERVAL,
};

struct srv_config {
    char addr[256];
    int port;      /* 0 = kernel picks */
    int http_port; /* -1 = no monitoring listener */
    char name[128];
    char store_dir[PATH_MAX];
    char log_file[PATH_MAX];
    char config_file[PATH_MAX];
    char ports_file_dir[PATH_MAX];
    uint64_t max_payload;
    uint64_t max_pending;
    uint64_t ping_interval_ms;
    unsigned ping_max;
    bool debug;
    bool trace;
    char log_level[16]; /* --log-level / log_level; "" = from debug/trace */
    enum srv_fsync_mode fsync;
    uint64_t fsync_interval_ms;
    /* Store segment size and stream snapshot interval in applied entries
     * (0: the store's and replica's defaults; tests use small ones). */
    uint64_t segment_bytes;
    uint64_t snapshot_entries;
    /* Background scrub: a full pass over every record and snapshot file
     * takes this long (0: off; SRV_SCRUB_PASS_MS_DEFAULT). */
    uint64_t scrub_pass_ms;
    /* Clustering is a later issue: these are accepted and stored only. */
    char cluster_listen[256];
    char cluster_name[128];
    char routes[1024];
    struct srv_tags server_tags; /* server_tags: placement picks by them */
    /* cluster { authorization { user, password }, tls { cert_file,
     * key_file, ca_file } }: link security (srv_cluster_tls.c). */
    char cluster_user[SRV_AUTH_SECRET_BYTES_MAX + 1];
    char cluster_pass[SRV_AUTH_SECRET_BYTES_MAX + 1];
    char cluster_tls_cert[PATH_MAX];
    char cluster_tls_key[PATH_MAX];
    char cluster_tls_ca[PATH_MAX];
    /* Security (srv_auth, srv_tls). Limits of 0 take the named maximum;
     * auth_timeout_ms 0 takes the default for the auth mode. */
    uint64_t max_connections;
    uint64_t max_subs;
    uint64_t max_header_bytes;
    uint64_t auth_timeout_ms;
    char auth_token[SRV_AUTH_SECRET_BYTES_MAX + 1];
    char auth_user[SRV_AUTH_SECRET_BYTES_MAX + 1];
    char auth_pass[SRV_AUTH_SECRET_BYTES_MAX + 1];
    json_t *auth_users; /* the users list of the file, owned (release) */
    bool tls;
    bool tls_verify;
    char tls_cert[PATH_MAX];
    char tls_key[PATH_MAX];
    char tls_ca[PATH_MAX];
    uint64_t tls_timeout_ms;
    bool tls_handshake_first; /* TLS before INFO (tls { handshake_first }) */
    bool https; /* monitoring over TLS (https_port / https:), tls { } keys */
    uint64_t js_max_streams; /* jetstream { max_streams }; 0 = the maximum */
    /* jetstream { max_memory_store, max_file_store }: bytes the streams of
     * each storage type may hold on this node; -1 = no limit. */
    int64_t js_max_memory;
    int64_t js_max_file;
    /* jetstream { domain }: also answer $JS.<domain>.API.> ("" = none). */
    char js_domain[SRV_JS_DOMAIN_BYTES_MAX + 1];
    bool help;
    bool version;
    /* --signal CMD=PID: send signal_num to the keeld of signal_pid (a pid
     * or a file holding one) and exit; 0 = not asked. */
    int signal_num;
    char signal_pid[PATH_MAX];
};

/* Fill the defaults: 0.0.0.0:4222, no monitoring, 1 MiB payloads, 2 min
 * pings, fsync group, store dir "./keel-data". */
void srv_config_defaults(struct srv_config *c);

/* Build the config from argv (argv[0] is skipped): defaults, then the file
 * named by -c/--config if any, then every flag in order. Returns 0,
 * KEEL_EUSAGE for an unknown flag or bad value (errmsg is the one-line
 * reason), or KEEL_ECONFIG / KEEL_EIO for a bad or unreadable file.
 * --help and --version set c->help / c->version and stop.
 */
KEEL_MUST_USE int srv_config_from_args(struct srv_config *c, int argc,
                                       char **argv, char *errmsg);

/* Apply a parsed config file tree (see srv_confparse). Unknown keys are
 * logged and ignored. Returns 0 or KEEL_ECONFIG. */
KEEL_MUST_USE int srv_config_apply_json(struct srv_config *c,
                                        const json_t *root, char *errmsg);

/* Apply the file's jetstream value (enabled, true or a { } block; see
 * srv_config_js.c). Returns 0, or KEEL_EUSAGE naming what keeld refuses:
 * turning JetStream off, an unknown or unsupported block key, a bad size. */
KEEL_MUST_USE int srv_config_apply_jetstream(struct srv_config *c,
                                             const json_t *v, char *errmsg);

/* --scrub_pass / jetstream { scrub_pass }: a duration such as 24h, 30m or
 * 2s ("0" turns the scrub off). KEEL_EUSAGE with the reason. */
KEEL_MUST_USE int srv_config_set_scrub_pass(struct srv_config *c, const char *v,
                                            char *errmsg);

/* Free what the config owns (auth_users). */
void srv_config_release(struct srv_config *c);

/* Usage text for --help. */
const char *srv_config_usage(void);

#endif
