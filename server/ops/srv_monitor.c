#include "srv_monitor.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/error.h"
#include "srv_log.h"
#include "srv_metrics.h"
#include "srv_monitor_tls.h"

struct srv_monitor {
    struct MHD_Daemon *daemon;
    struct srv_server *srv;
};

static json_t *varz_jetstream(const struct srv_mon_snap *snap)
{
    if (!snap->js_enabled) {
        return NULL;
    }
    json_t *o = json_pack(
        "{s:{s:s, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:{s:I, s:I}}, "
        "s:{s:s, s:I, s:I}}",
        "config", "store_dir", snap->store_dir, "max_memory",
        (json_int_t)snap->max_memory, "max_storage",
        (json_int_t)snap->max_storage, "stats", "memory", (json_int_t)0,
        "storage", (json_int_t)snap->bytes, "streams",
        (json_int_t)snap->nstreams, "consumers", (json_int_t)snap->consumers,
        "messages", (json_int_t)snap->messages, "api", "total",
        (json_int_t)snap->api_total, "errors", (json_int_t)snap->api_errors,
        "meta", "role", snap->meta.role, "leader",
        (json_int_t)snap->meta.leader, "term", (json_int_t)snap->meta.term);
    srv_mon_domain_add(o, snap);
    return o;
}

static char *varz_json(struct srv_monitor *m, const struct srv_mon_snap *snap)
{
    struct srv_server *srv = m->srv;
    const struct srv_config *cfg = srv->cfg;
    const struct srv_stats *st = &snap->stats;
    char now[64];
    char uptime[64];

    srv_mon_rfc3339(snap->taken_ms, now, sizeof now);
    srv_mon_duration(snap->taken_ms - snap->start_ms, uptime, sizeof uptime);
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:I, s:I}",
        "server_id", srv->server_id, "server_name",
        cfg->name[0] != '\0' ? cfg->name : srv->server_id, "version",
        SRV_VERSION_ADVERTISED, "now", now, "uptime", uptime, "port", srv->port,
        "max_payload", (json_int_t)cfg->max_payload, "connections",
        (json_int_t)st->connections, "total_connections",
        (json_int_t)st->total_connections, "in_msgs", (json_int_t)st->in_msgs,
        "out_msgs", (json_int_t)st->out_msgs, "in_bytes",
        (json_int_t)st->in_bytes, "out_bytes", (json_int_t)st->out_bytes,
        "subscriptions", (json_int_t)st->subscriptions, "slow_consumers",
        (json_int_t)st->slow_consumers);
    if (o == NULL) {
        return NULL;
    }
    if (cfg->server_tags.n > 0) {
        json_object_set_new(o, "tags", srv_tags_json(&cfg->server_tags));
    }
    char *cj = srv_server_cluster_json(srv, false);
    if (cj != NULL) {
        json_t *c = json_loads(cj, 0, NULL);
        if (c != NULL) {
            json_object_set_new(o, "cluster", c);
        }
        free(cj);
    }
    json_t *js = varz_jetstream(snap);
    if (js != NULL) {
        json_object_set_new(o, "jetstream", js);
    }
    char *s = json_dumps(o, JSON_PRESERVE_ORDER | JSON_INDENT(2));
    json_decref(o);
    return s;
}

/* Queue body (malloc'ed, consumed; NULL means out of memory: 500). */
static enum MHD_Result reply_typed(struct MHD_Connection *conn, unsigned code,
                                   char *body, const char *type)
{
    static char oom[] = "{\"error\":\"out of memory\"}";
    struct MHD_Response *r;
    enum MHD_Result ret;

    if (body == NULL) {
        r = MHD_create_response_from_buffer(strlen(oom), oom,
                                            MHD_RESPMEM_PERSISTENT);
        code = 500;
        type = "application/json";
    } else {
        r = MHD_create_response_from_buffer(strlen(body), body,
                                            MHD_RESPMEM_MUST_FREE);
    }
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code,
                             char *body)
{
    return reply_typed(conn, code, body, "application/json");
}

/* A query flag: present with no value, "true" or "1". */
static bool query_flag(struct MHD_Connection *conn, const char *key)
{
    const char *v =
        MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
    if (v == NULL) {
        return false;
    }
    return v[0] == '\0' || strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
}

static uint64_t query_uint(struct MHD_Connection *conn, const char *key,
                           uint64_t dflt)
{
    const char *v =
        MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
    if (v == NULL || v[0] < '0' || v[0] > '9') {
        return dflt;
    }
    return strtoull(v, NULL, 10);
}

static enum MHD_Result healthz(struct MHD_Connection *conn,
                               const struct srv_mon_snap *snap)
{
    char why[256] = "";
    bool ok = true;
    /* nats-server's options: js-enabled-only asks only whether the
     * process runs, js-server-only adds the meta group (a leader known),
     * and the default adds every stream. */
    if (query_flag(conn, "js-server-only")) {
        ok = srv_mon_healthy_meta(snap, why, sizeof why);
    } else if (!query_flag(conn, "js-enabled-only")) {
        ok = srv_mon_healthy(snap, why, sizeof why);
    }
    json_t *o = ok ? json_pack("{s:s}", "status", "ok")
                   : json_pack("{s:s, s:s}", "status",
                               snap->meta_joining ? "joining" : "unavailable",
                               "error", why);
    json_t *w = srv_mon_warnings_json(snap);
    if (o != NULL && w != NULL && json_array_size(w) > 0) {
        json_object_set_new(o, "warnings", w);
        w = NULL;
    }
    json_decref(w);
    char *body = NULL;
    if (o != NULL) {
        body = json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT);
        json_decref(o);
    }
    return reply(conn, ok ? 200 : 503, body);
}

/* Endpoints served from a stats snapshot; NULL snap: 503. */
static enum MHD_Result serve_snap(struct srv_monitor *m,
                                  struct MHD_Connection *conn, const char *url,
                                  const struct srv_mon_snap *snap)
{
    const char *id = m->srv->server_id;
    if (snap == NULL) {
        return reply(conn, 503,
                     strdup("{\"error\":\"no stats yet: retry shortly\"}"));
    }
    if (strcmp(url, "/healthz") == 0) {
        return healthz(conn, snap);
    }
    if (strcmp(url, "/varz") == 0) {
        return reply(conn, 200, varz_json(m, snap));
    }
    if (strcmp(url, "/connz") == 0) {
        uint64_t limit = query_uint(conn, "limit", SRV_MON_CONNZ_LIMIT_DEFAULT);
        return reply(conn, 200,
                     srv_mon_connz_json(snap, id, query_uint(conn, "offset", 0),
                                        limit > SRV_MON_CONNS_MAX
                                            ? SRV_MON_CONNS_MAX
                                            : limit));
    }
    if (strcmp(url, "/jsz") == 0) {
        bool detail =
            query_flag(conn, "streams") || query_flag(conn, "consumers");
        return reply(conn, 200, srv_mon_jsz_json(snap, id, detail));
    }
    char why[8];
    return reply_typed(
        conn, 200,
        srv_mon_metrics_text(snap, srv_mon_healthy(snap, why, sizeof why)),
        "text/plain; version=0.0.4; charset=utf-8");
}

static bool snap_endpoint(const char *url)
{
    static const char *const urls[] = {"/healthz", "/varz", "/connz", "/jsz",
                                       "/metrics"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        if (strcmp(url, urls[i]) == 0) {
            return true;
        }
    }
    return false;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_len, void **req_cls)
{
    struct srv_monitor *m = cls;
    (void)version;
    (void)upload;
    (void)upload_len;
    (void)req_cls;

    if (strcmp(method, "GET") != 0) {
        return reply(conn, 405, strdup("{\"error\":\"use GET\"}"));
    }
    if (snap_endpoint(url)) {
        struct srv_mon_snap *snap = srv_metrics_acquire(m->srv->metrics);
        enum MHD_Result ret = serve_snap(m, conn, url, snap);
        srv_metrics_release(m->srv->metrics, snap);
        return ret;
    }
    if (strcmp(url, "/routez") == 0) {
        char *s = srv_server_cluster_json(m->srv, true);
        return reply(conn, 200,
                     s != NULL ? s
                               : strdup("{\"num_routes\":0,\"routes\":[]}"));
    }
    return reply(conn, 404,
                 strdup("{\"error\":\"not found: try /healthz, /varz, "
                        "/connz, /jsz, /routez or /metrics\"}"));
}

int srv_monitor_start(struct srv_server *srv, const char *addr, int port,
                      struct srv_monitor **out, int *port_out, char *errmsg)
{
    struct srv_monitor *m = calloc(1, sizeof *m);
    struct sockaddr_in sa;

    ASSERT(srv->metrics != NULL);
    if (m == NULL) {
        return KEEL_ENOMEM;
    }
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        free(m);
        return keel_err(KEEL_EUSAGE, errmsg,
                        "monitoring needs an IPv4 address, got '%s'", addr);
    }
    m->srv = srv;
    unsigned tls_flags = 0; /* https: srv_monitor_tls.c */
    const struct MHD_OptionItem *tls_opts = NULL;
    int rv = srv_monitor_tls_options(srv->cfg, &tls_flags, &tls_opts, errmsg);
    if (rv != 0) {
        free(m);
        return rv;
    }
    m->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | tls_flags,
        (uint16_t)port, NULL, NULL, handle, m, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
        MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
    if (m->daemon == NULL) {
        free(m);
        return keel_err(KEEL_EIO, errmsg,
                        "cannot start monitoring on %s:%d (port in use?)", addr,
                        port);
    }
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = info != NULL ? info->port : port;
    *out = m;
    return 0;
}

void srv_monitor_stop(struct srv_monitor *m)
{
    if (m == NULL) {
        return;
    }
    MHD_stop_daemon(m->daemon);
    free(m);
}
