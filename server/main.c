/* keeld: flags and config file -> srv_config, data directory lock, client
 * JetStream, optional monitoring, the client port, ports file, then the
 * libuv loop until SIGTERM/SIGINT.
 *
 * main.c is the top of the layers: it alone knows them all, and plugs each
 * layer into the ones below through their hooks (srv_server_set_*_hooks,
 * srv_metrics_set_gather).
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "keel/error.h"
#include "replica.h"
#include "srv_cluster.h"
#include "srv_config.h"
#include "srv_js.h"
#include "srv_js_mon.h"
#include "srv_log.h"
#include "srv_metrics.h"
#include "srv_monitor.h"
#include "srv_ports.h"
#include "srv_server.h"
#include "srv_turn.h"

#define EXIT_USAGE 2

/* 1,000+ conns need more descriptors than the usual soft limit of 1024. */
static void raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) {
        return;
    }
    rlim_t old = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        SRV_WARN("server", "cannot raise the open file limit from %llu",
                 (unsigned long long)old);
        return;
    }
    SRV_DEBUG("server", "open file limit raised from %llu to %llu",
              (unsigned long long)old, (unsigned long long)rl.rlim_max);
}

/* --signal CMD=PID|PIDFILE: the pid, read from the file unless digits. */
static int signal_target(const char *spec, pid_t *pid)
{
    char buf[32] = "";
    const char *s = spec;
    char *end = NULL;

    if (spec[strspn(spec, "0123456789")] != '\0') {
        FILE *f = fopen(spec, "r");
        if (f == NULL) {
            fprintf(stderr, "keeld: --signal: cannot read pid file %s: %s\n",
                    spec, strerror(errno));
            return 1;
        }
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        s = buf;
    }
    long v = strtol(s, &end, 10);
    if (end == s || v <= 0 || v > INT_MAX) {
        fprintf(stderr, "keeld: --signal: '%s' is not a process id\n", spec);
        return 1;
    }
    *pid = (pid_t)v;
    return 0;
}

/* nats-server's `--signal CMD=PID`: send it and exit 0, or say why not. */
static int send_signal(const struct srv_config *cfg)
{
    pid_t pid = 0;
    if (signal_target(cfg->signal_pid, &pid) != 0) {
        return 1;
    }
    if (kill(pid, cfg->signal_num) != 0) {
        fprintf(stderr, "keeld: --signal: cannot signal process %d: %s\n",
                (int)pid, strerror(errno));
        return 1;
    }
    return 0;
}

static int parse_args(struct srv_config *cfg, int argc, char **argv)
{
    char errmsg[KEEL_ERRMSG_MAX] = "";
    int rv = srv_config_from_args(cfg, argc, argv, errmsg);

    if (rv != 0) {
        fprintf(stderr, "keeld: %s\n", errmsg);
        return EXIT_USAGE;
    }
    if (cfg->help) {
        fputs(srv_config_usage(), stdout);
        return 0;
    }
    if (cfg->version) {
        printf("keeld %s (NATS protocol %s)\n", KEEL_VERSION,
               SRV_VERSION_ADVERTISED);
        return 0;
    }
    if (cfg->signal_num != 0) {
        return send_signal(cfg);
    }
    return -1;
}

struct runtime {
    struct srv_server srv;
    struct srv_js *js; /* NULL without a store dir */
    struct srv_cluster cluster;
    bool cluster_started;
    struct srv_monitor *mon;
    int lock_fd;
    bool srv_inited;
    char ports_path[PATH_MAX];
};

/* Links to the other nodes (--cluster, --cluster_name, --routes). */
static int start_cluster(struct runtime *rt, const struct srv_config *cfg,
                         char *errmsg)
{
    char client_url[300];
    struct srv_cluster_settings s = {
        .listen = cfg->cluster_listen,
        .name = cfg->cluster_name,
        .routes = cfg->routes,
        .node_name = cfg->name,
        .node_id = rt->srv.server_id,
        .client_url = client_url,
        .auth_user = cfg->cluster_user,
        .auth_pass = cfg->cluster_pass,
        .tls_cert = cfg->cluster_tls_cert,
        .tls_key = cfg->cluster_tls_key,
        .tls_ca = cfg->cluster_tls_ca,
    };

    snprintf(client_url, sizeof client_url, "%s:%d", rt->srv.host,
             rt->srv.port);
    int rv = srv_cluster_start(&rt->cluster, uv_default_loop(), &rt->srv, &s,
                               errmsg);
    rt->cluster_started = true; /* closable after a failed start too */
    if (rv == 0) {
        rt->srv.cluster = &rt->cluster;
        srv_server_set_fwd_hooks(&rt->srv, &srv_cluster_fwd_hooks,
                                 &rt->cluster);
        const char *self[] = {client_url};
        srv_server_set_connect_urls(&rt->srv, self, 1);
    }
    return rv;
}

static int gather_js(void *arg, struct srv_mon_snap *snap)
{
    return srv_js_mon_gather(arg, snap);
}

/* Say why start-up ended early when a stop signal is pending; the signal
 * itself reaches its handler (and the usual stop) once main unblocks it. */
static bool stop_asked(const char *step)
{
    if (!srv_server_stop_pending()) {
        return false;
    }
    SRV_INFO("server", "stop signal during start-up (%s): stopping", step);
    return true;
}

/* Open everything in order and open the client port last, once JetStream
 * answers. A pending stop signal ends start-up after the current step with
 * 0: main then runs the ordinary stop, which closes what is open. */
static int start(struct runtime *rt, const struct srv_config *cfg)
{
    char errmsg[KEEL_ERRMSG_MAX] = "";
    int http_port = -1;
    int rv;

    rv = srv_datadir_lock(cfg->store_dir, &rt->lock_fd, errmsg);
    if (rv == 0) {
        rv = srv_server_init(&rt->srv, uv_default_loop(), cfg, errmsg);
        rt->srv_inited = true; /* init leaves srv closable on failure too */
    }
    if (rv == 0 && stop_asked("before the store opened")) {
        return 0;
    }
    if (rv == 0 && cfg->store_dir[0] != '\0') {
        rv = srv_js_open(&rt->srv, cfg->store_dir, &rt->js, errmsg);
    }
    if (rt->js != NULL) {
        srv_server_set_pub_hooks(&rt->srv, &srv_js_pub_hooks, rt->js);
    }
    if (rv == 0 && stop_asked("JetStream opened")) {
        return 0;
    }
    if (rv == 0 && cfg->http_port >= 0) {
        rv = srv_metrics_init(&rt->srv, uv_default_loop(), &rt->srv.metrics);
    }
    if (rv == 0 && rt->srv.metrics != NULL) {
        srv_server_set_mon_hooks(&rt->srv, &srv_metrics_mon_hooks,
                                 rt->srv.metrics);
        if (rt->js != NULL) {
            srv_metrics_set_gather(rt->srv.metrics, gather_js, rt->js);
        }
    }
    if (rv == 0 && cfg->http_port >= 0) {
        rv = srv_monitor_start(&rt->srv, cfg->addr, cfg->http_port, &rt->mon,
                               &http_port, errmsg);
    }
    if (rv == 0 && cfg->cluster_listen[0] != '\0') {
        rv = start_cluster(rt, cfg, errmsg);
    }
    if (rv == 0) {
        rv = srv_server_listen(&rt->srv, errmsg);
    }
    if (rv == 0 && cfg->ports_file_dir[0] != '\0') {
        rv = srv_ports_write(cfg->ports_file_dir, rt->srv.host, rt->srv.port,
                             http_port,
                             rt->cluster_started ? rt->cluster.port : -1,
                             rt->ports_path, errmsg);
    }
    if (rv != 0) {
        SRV_ERROR("server", "%s", errmsg);
        return rv;
    }
    SRV_INFO("server",
             "keeld %s (server_id %s) listening for clients on "
             "%s:%d",
             KEEL_VERSION, rt->srv.server_id, cfg->addr, rt->srv.port);
    if (http_port >= 0) {
        SRV_INFO("monitor", "monitoring on http://%s:%d", cfg->addr, http_port);
    }
    SRV_INFO("server", "data directory %s, max_payload %llu", cfg->store_dir,
             (unsigned long long)cfg->max_payload);
    return 0;
}

static int turn_enter(int phase)
{
    return (int)srv_turn_enter((enum srv_turn_phase)phase);
}

static void turn_leave(int prev)
{
    srv_turn_leave((enum srv_turn_phase)prev);
}

/* The Raft driver's phases, charged through srv_turn. */
static const struct replica_turn_hooks turn_hooks = {
    .enter = turn_enter,
    .leave = turn_leave,
    .phase = {[REPLICA_TURN_TIMER] = SRV_TURN_RAFT_TIMER,
              [REPLICA_TURN_PROPOSE] = SRV_TURN_PROPOSE,
              [REPLICA_TURN_EVENT] = SRV_TURN_STORE_EVENT},
};

int main(int argc, char **argv)
{
    static struct srv_config cfg;
    static struct runtime rt;
    char errmsg[KEEL_ERRMSG_MAX] = "";

    /* First thing: a stop signal from here on waits for the handlers
     * instead of killing keeld halfway through opening its store. */
    srv_server_signals_block();
    int code = parse_args(&cfg, argc, argv);

    if (code >= 0) {
        return code;
    }
    if (srv_log_open(cfg.log_file, cfg.debug, cfg.trace, errmsg) != 0) {
        fprintf(stderr, "keeld: %s\n", errmsg);
        return EXIT_USAGE;
    }
    if (cfg.log_level[0] != '\0') {
        enum srv_log_level lvl = SRV_LOG_INFO;
        if (srv_log_level_parse(cfg.log_level, &lvl, errmsg) == 0) {
            srv_log_set_level(lvl, false);
        }
    }
    signal(SIGPIPE, SIG_IGN);
    /* Conn buffers of a few MB are freed and reallocated as traffic comes
     * and goes; keeping them on the heap (no mmap, no trim) reuses pages
     * instead of faulting fresh zeroed ones in on every burst. */
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
    raise_nofile();
    if (cfg.cluster_listen[0] == '\0' &&
        (cfg.routes[0] != '\0' || cfg.cluster_name[0] != '\0')) {
        SRV_WARN("server", "--routes and --cluster_name need --cluster "
                           "nats://IP:PORT to listen on; running standalone");
    }
    rt.lock_fd = -1;
    if (srv_turn_start(uv_default_loop(), errmsg) != 0) {
        SRV_WARN("server", "%s: loop turns are not measured", errmsg);
    }
    replica_set_turn_hooks(&turn_hooks);
    if (start(&rt, &cfg) != 0) {
        code = 1;
    } else {
        /* A signal that came during start-up is delivered here. */
        srv_server_signals_unblock();
        srv_server_run(&rt.srv);
        code = 0;
    }
    if (rt.ports_path[0] != '\0') {
        unlink(rt.ports_path);
    }
    srv_monitor_stop(rt.mon);
    /* Closed by srv_server_stop after a run; after a failed start the
     * close runs in the next uv_run round. */
    srv_metrics_stop(rt.srv.metrics);
    srv_turn_stop();
    uv_run(uv_default_loop(), UV_RUN_NOWAIT);
    if (rt.cluster_started) {
        if (code != 0) {
            /* The loop never ran: close the handles start opened. */
            srv_cluster_stop(&rt.cluster);
            uv_run(uv_default_loop(), UV_RUN_NOWAIT);
        }
        srv_cluster_close(&rt.cluster);
    }
    if (rt.js != NULL) {
        /* After a failed start the loop never ran: stop here and let a few
         * non-blocking rounds run the handle closes. */
        srv_js_stop(rt.js);
        for (int i = 0; i < 4; i++) {
            uv_run(uv_default_loop(), UV_RUN_NOWAIT);
        }
        srv_server_set_pub_hooks(&rt.srv, NULL, NULL);
        srv_js_close(rt.js);
        rt.js = NULL;
    }
    if (rt.srv_inited) {
        srv_server_close(&rt.srv);
    }
    if (code == 0) {
        uv_loop_close(uv_default_loop());
        if (srv_server_stop_signal_again()) {
            SRV_INFO("server", "a second stop signal came while stopping: "
                               "the stop under way finished first");
        }
        SRV_INFO("server", "keeld stopped");
    }
    if (rt.lock_fd >= 0) {
        close(rt.lock_fd);
    }
    srv_metrics_free(rt.srv.metrics);
    srv_config_release(&cfg);
    srv_log_close();
    return code;
}
