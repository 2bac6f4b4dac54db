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
#include "srv_monitor_tls.h"

struct srv_monitor {
    struct MHD_Daemon *daemon;
    struct srv_server *srv;
};

static void rfc3339_now(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    char base[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%09ldZ", base, ts.tv_nsec);
}

static char *varz_json(struct srv_monitor *m)
{
    struct srv_server *srv = m->srv;
    const struct srv_config *cfg = srv->cfg;
    struct srv_stats st;
    char now[64];
    char uptime[64];

    srv_server_stats(srv, &st);
    rfc3339_now(now, sizeof now);
    uint64_t up_s = (srv_now_ms() - srv->start_ms) / 1000;
    snprintf(uptime, sizeof uptime, "%llus", (unsigned long long)up_s);
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:I, s:I}",
        "server_id", srv->server_id, "server_name",
        cfg->name[0] != '\0' ? cfg->name : srv->server_id, "version",
        SRV_VERSION_ADVERTISED, "now", now, "uptime", uptime, "port", srv->port,
        "max_payload", (json_int_t)cfg->max_payload, "connections",
        (json_int_t)st.connections, "total_connections",
        (json_int_t)st.total_connections, "in_msgs", (json_int_t)st.in_msgs,
        "out_msgs", (json_int_t)st.out_msgs, "in_bytes",
        (json_int_t)st.in_bytes, "out_bytes", (json_int_t)st.out_bytes,
        "subscriptions", (json_int_t)st.subscriptions, "slow_consumers",
        (json_int_t)st.slow_consumers);
    if (o == NULL) {
        return NULL;
    }
    char *cj = srv_server_cluster_json(srv, false);
    if (cj != NULL) {
        json_t *c = json_loads(cj, 0, NULL);
        if (c != NULL) {
            json_object_set_new(o, "cluster", c);
        }
        free(cj);
    }
    char *s = json_dumps(o, JSON_PRESERVE_ORDER | JSON_INDENT(2));
    json_decref(o);
    return s;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code,
                             char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), body, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result ret;

    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
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
    if (strcmp(url, "/healthz") == 0) {
        return reply(conn, 200, strdup("{\"status\":\"ok\"}"));
    }
    if (strcmp(url, "/varz") == 0) {
        char *s = varz_json(m);
        if (s == NULL) {
            return reply(conn, 500, strdup("{\"error\":\"out of memory\"}"));
        }
        return reply(conn, 200, s);
    }
    if (strcmp(url, "/routez") == 0) {
        char *s = srv_server_cluster_json(m->srv, true);
        return reply(conn, 200,
                     s != NULL ? s
                               : strdup("{\"num_routes\":0,\"routes\":[]}"));
    }
    return reply(conn, 404, strdup("{\"error\":\"not found\"}"));
}

int srv_monitor_start(struct srv_server *srv, const char *addr, int port,
                      struct srv_monitor **out, int *port_out, char *errmsg)
{
    struct srv_monitor *m = calloc(1, sizeof *m);
    struct sockaddr_in sa;

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
