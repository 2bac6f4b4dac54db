#include "srv_server.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/error.h"
#include "keel/grow.h"
#include "srv_conn.h"
#include "srv_log.h"
#include "srv_route.h"
#include "srv_tls.h"

uint64_t srv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void srv_server_mark_dirty(struct srv_server *srv, struct srv_conn *c)
{
    if (keel_grow(&srv->dirty, &srv->dirty_cap, srv->ndirty, sizeof *srv->dirty,
                  64) != 0) {
        /* Cannot track it: write now instead of at the iteration end. */
        c->dirty = false;
        srv_conn_flush(c);
        return;
    }
    ASSERT(srv->ndirty < SRV_CONNS_MAX * 2);
    srv->dirty[srv->ndirty++] = c;
}

void srv_server_conn_gone(struct srv_server *srv, struct srv_conn *c)
{
    if (c->dirty) {
        for (size_t i = 0; i < srv->ndirty; i++) {
            if (srv->dirty[i] == c) {
                srv->dirty[i] = srv->dirty[--srv->ndirty];
                break;
            }
        }
    }
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        srv->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    if (c->stalled) {
        struct srv_conn **pp = &srv->stalled;
        while (*pp != NULL && *pp != c) {
            pp = &(*pp)->stall_next;
        }
        ASSERT(*pp == c);
        *pp = c->stall_next;
    }
    ASSERT(srv->nconns > 0);
    srv->nconns--;
}

void srv_server_bury_sub(struct srv_server *srv, struct srv_sub *sub)
{
    ASSERT(sub->removed);
    if (srv->fwd_hooks != NULL && (sub->conn != NULL || sub->fn != NULL)) {
        srv->fwd_hooks->interest_remove(srv->fwd_arg, sub);
    }
    sub->next_free = srv->graveyard;
    srv->graveyard = sub;
}

static void free_graveyard(struct srv_server *srv)
{
    while (srv->graveyard != NULL) {
        struct srv_sub *s = srv->graveyard;
        srv->graveyard = s->next_free;
        free(s);
    }
}

/* Runs once per loop iteration after I/O: write every conn that got
 * output, free removed subs, publish stats for the monitoring thread. */
static void flush_check_cb(uv_check_t *h)
{
    struct srv_server *srv = h->data;

    /* Flushing may mark more conns dirty (write errors close conns); the
     * index walk picks those up too. */
    for (size_t i = 0; i < srv->ndirty; i++) {
        struct srv_conn *c = srv->dirty[i];
        c->dirty = false;
        srv_conn_flush(c);
        srv_conn_check_drained(c);
    }
    srv->ndirty = 0;
    free_graveyard(srv);
    srv->stats.subscriptions = srv->sublist.count;
    pthread_mutex_lock(&srv->stats_mu);
    srv->snapshot = srv->stats;
    pthread_mutex_unlock(&srv->stats_mu);
}

void srv_server_stats(struct srv_server *srv, struct srv_stats *out)
{
    pthread_mutex_lock(&srv->stats_mu);
    *out = srv->snapshot;
    pthread_mutex_unlock(&srv->stats_mu);
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct srv_server *srv = listener->data;

    if (status < 0) {
        SRV_WARN("server", "accept failed: %s", uv_strerror(status));
        return;
    }
    int rv = srv_conn_accept(srv, listener);
    if (rv != 0) {
        SRV_WARN("server", "connection refused: %s", keel_strerror(rv));
    }
}

/* SIGHUP: load the TLS certificate and key again; conns already open
 * keep the context they started with. */
static void sighup_cb(uv_signal_t *s, int signum)
{
    struct srv_server *srv = s->data;
    char errmsg[KEEL_ERRMSG_MAX] = "";

    (void)signum;
    if (srv_log_reload(srv->cfg->config_file, errmsg) != 0) {
        SRV_ERROR("server", "log level not reloaded: %s", errmsg);
    }
    if (srv->tls == NULL) {
        SRV_INFO("server", "received SIGHUP: no TLS files to reload");
        return;
    }
    if (srv_tls_reload(srv->tls, errmsg) != 0) {
        SRV_ERROR("tls", "reload failed, keeping the old certificate: %s",
                  errmsg);
        return;
    }
    SRV_INFO("tls", "received SIGHUP: TLS certificate and key reloaded");
}

/* Set by quiet_cb: a stop signal came while keeld was stopping already. */
static volatile sig_atomic_t stop_signal_again;

static void quiet_cb(int signum)
{
    (void)signum;
    stop_signal_again = 1;
}

static void stop_sigset(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGUSR2);
}

void srv_server_signals_block(void)
{
    sigset_t set;
    stop_sigset(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void srv_server_signals_unblock(void)
{
    sigset_t set;
    stop_sigset(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

bool srv_server_stop_pending(void)
{
    sigset_t set;
    if (sigpending(&set) != 0) {
        return false;
    }
    return sigismember(&set, SIGTERM) == 1 || sigismember(&set, SIGINT) == 1;
}

bool srv_server_stop_signal_again(void)
{
    return stop_signal_again != 0;
}

static void sigusr2_cb(uv_signal_t *s, int signum)
{
    (void)signum;
    SRV_INFO("server", "received SIGUSR2: entering lame duck mode");
    srv_server_lame_duck(s->data);
}

static void signal_cb(uv_signal_t *s, int signum)
{
    struct srv_server *srv = s->data;
    SRV_INFO("server", "received %s, shutting down",
             signum == SIGTERM ? "SIGTERM" : "SIGINT");
    srv_server_stop(srv);
}

static void make_server_id(char *id, size_t len)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    unsigned char raw[32];

    ASSERT(len > 1);
    if (uv_random(NULL, NULL, raw, sizeof raw, 0, NULL) != 0) {
        for (size_t i = 0; i < sizeof raw; i++) {
            raw[i] = (unsigned char)(rand() ^ (int)time(NULL));
        }
    }
    /* nats-server ids start with 'N'; clients only need uniqueness. */
    id[0] = 'N';
    size_t n = len - 1 < 22 ? len - 1 : 22;
    for (size_t i = 1; i < n; i++) {
        id[i] = alphabet[raw[i] % 32];
    }
    id[n] = '\0';
}

/* INFO fields of the security settings (docs/protocol.md §1.2). */
static int add_security_info(struct srv_server *srv, json_t *o)
{
    int rv = 0;

    if (srv->auth.required) {
        rv |= json_object_set_new(o, "auth_required", json_true());
    }
    if (srv->tls != NULL) {
        rv |= json_object_set_new(o, "tls_required", json_true());
        if (srv->cfg->tls_verify) {
            rv |= json_object_set_new(o, "tls_verify", json_true());
        }
    }
    return rv == 0 ? 0 : KEEL_ENOMEM;
}

static int build_info(struct srv_server *srv)
{
    const struct srv_config *cfg = srv->cfg;
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:i, s:b, s:I, s:s, s:i, s:b, s:s, s:s}", "server_id",
        srv->server_id, "server_name",
        cfg->name[0] != '\0' ? cfg->name : srv->server_id, "version",
        SRV_VERSION_ADVERTISED, "proto", 1, "headers", 1, "max_payload",
        (json_int_t)cfg->max_payload, "host", srv->host, "port", srv->port,
        "jetstream", 0, "go", "keel " KEEL_VERSION, "git_commit", "");
    char *s;

    if (o != NULL) {
        /* JetStream runs whenever keeld has a store dir (srv_js). */
        json_object_set_new(o, "jetstream",
                            json_boolean(cfg->store_dir[0] != '\0'));
        if (cfg->js_domain[0] != '\0') { /* nats-server 2.9.10's INFO */
            json_object_set_new(o, "domain", json_string(cfg->js_domain));
        }
    }
    if (o == NULL || add_security_info(srv, o) != 0) {
        json_decref(o);
        return KEEL_ENOMEM;
    }
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (s == NULL) {
        return KEEL_ENOMEM;
    }
    /* Drop the closing brace: each conn appends its client_id. */
    srv->info_json_len = strlen(s) - 1;
    ASSERT(s[srv->info_json_len] == '}');
    srv->info_json = s;
    return 0;
}

/* Auth from the config (users, token) and the TLS context; warns about
 * secrets kept in plain text. */
static int security_init(struct srv_server *srv, char *errmsg)
{
    const struct srv_config *cfg = srv->cfg;
    const char *tok = cfg->auth_token[0] != '\0' ? cfg->auth_token : NULL;
    const char *user = cfg->auth_user[0] != '\0' ? cfg->auth_user : NULL;
    int rv;

    rv = srv_auth_init(&srv->auth, tok, user, cfg->auth_pass, cfg->auth_users,
                       errmsg);
    if (rv != 0) {
        return rv;
    }
    if (srv->auth.nplain > 0) {
        SRV_WARN("auth",
                 "%zu password(s)/token(s) are stored in plain text: "
                 "replace them with hashes from keel-passwd",
                 srv->auth.nplain);
    }
    srv->auth_timeout_ms = cfg->auth_timeout_ms;
    if (srv->auth_timeout_ms == 0) {
        srv->auth_timeout_ms = srv->auth.required
                                   ? SRV_AUTH_TIMEOUT_MS_DEFAULT
                                   : SRV_CONNECT_TIMEOUT_MS_DEFAULT;
    }
    if (cfg->tls) {
        rv = srv_tls_init(&srv->tls, cfg, errmsg);
    }
    return rv;
}

static int bind_on(struct srv_server *srv, char *errmsg)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    int rv;

    rv = uv_ip4_addr(srv->cfg->addr, srv->cfg->port, (struct sockaddr_in *)&ss);
    if (rv != 0) {
        rv = uv_ip6_addr(srv->cfg->addr, srv->cfg->port,
                         (struct sockaddr_in6 *)&ss);
    }
    if (rv != 0) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "invalid listen address '%s': use an IP address",
                        srv->cfg->addr);
    }
    uv_tcp_init(srv->loop, &srv->listener);
    srv->listener.data = srv;
    rv = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
    if (rv == 0) {
        rv = uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len);
    }
    if (rv != 0) {
        return keel_err(KEEL_EIO, errmsg, "cannot listen on %s:%d: %s",
                        srv->cfg->addr, srv->cfg->port, uv_strerror(rv));
    }
    srv->port = ntohs(ss.ss_family == AF_INET
                          ? ((struct sockaddr_in *)&ss)->sin_port
                          : ((struct sockaddr_in6 *)&ss)->sin6_port);
    bool any = strcmp(srv->cfg->addr, "0.0.0.0") == 0 ||
               strcmp(srv->cfg->addr, "::") == 0;
    snprintf(srv->host, sizeof srv->host, "%s",
             any ? "127.0.0.1" : srv->cfg->addr);
    return 0;
}

int srv_server_init(struct srv_server *srv, uv_loop_t *loop,
                    const struct srv_config *cfg, char *errmsg)
{
    int rv;

    memset(srv, 0, sizeof *srv);
    srv->loop = loop;
    srv->cfg = cfg;
    srv->start_ms = srv_now_ms();
    pthread_mutex_init(&srv->stats_mu, NULL);
    make_server_id(srv->server_id, sizeof srv->server_id);
    srv_outpool_init(&srv->outpool);
    rv = srv_sublist_init(&srv->sublist);
    if (rv != 0) {
        return keel_err(rv, errmsg, "out of memory creating the sublist");
    }
    rv = security_init(srv, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = bind_on(srv, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = build_info(srv);
    if (rv != 0) {
        return keel_err(rv, errmsg, "out of memory building INFO");
    }
    if (srv->info_json_len + 64 >= SRV_INFO_LINE_BYTES_MAX) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "server name and address make INFO longer than %d "
                        "bytes: use a shorter --name",
                        SRV_INFO_LINE_BYTES_MAX);
    }
    srv->stall_bytes = cfg->max_pending / 2 < SRV_CONN_STALL_BYTES
                           ? (size_t)(cfg->max_pending / 2)
                           : SRV_CONN_STALL_BYTES;
    uv_timer_init(loop, &srv->stall_timer);
    srv->stall_timer.data = srv;
    uv_check_init(loop, &srv->flush_check);
    srv->flush_check.data = srv;
    uv_check_start(&srv->flush_check, flush_check_cb);
    uv_signal_init(loop, &srv->sigterm);
    uv_signal_init(loop, &srv->sigint);
    srv->sigterm.data = srv;
    srv->sigint.data = srv;
    uv_signal_start(&srv->sigterm, signal_cb, SIGTERM);
    uv_signal_start(&srv->sigint, signal_cb, SIGINT);
    uv_signal_init(loop, &srv->sighup);
    srv->sighup.data = srv;
    uv_signal_start(&srv->sighup, sighup_cb, SIGHUP);
    uv_signal_init(loop, &srv->sigusr2);
    srv->sigusr2.data = srv;
    uv_signal_start(&srv->sigusr2, sigusr2_cb, SIGUSR2);
    uv_timer_init(loop, &srv->ldm_timer);
    srv->ldm_timer.data = srv;
    return 0;
}

int srv_server_listen(struct srv_server *srv, char *errmsg)
{
    ASSERT(!srv->listening);
    if (srv->stopping) {
        return 0; /* a stop signal came first: never open the port */
    }
    int rv = uv_listen((uv_stream_t *)&srv->listener, SRV_LISTEN_BACKLOG,
                       on_connection);
    if (rv != 0) {
        return keel_err(KEEL_EIO, errmsg, "cannot listen on %s:%d: %s",
                        srv->cfg->addr, srv->port, uv_strerror(rv));
    }
    srv->listening = true;
    return 0;
}

int srv_server_run(struct srv_server *srv)
{
    return uv_run(srv->loop, UV_RUN_DEFAULT);
}

void srv_server_stop(struct srv_server *srv)
{
    struct srv_conn *c;
    size_t n = 0;

    if (srv->stopping) {
        return;
    }
    srv->stopping = true;
    if (srv->mon_hooks != NULL) {
        srv->mon_hooks->stop(srv->mon_arg);
    }
    if (srv->fwd_hooks != NULL) {
        srv->fwd_hooks->stop(srv->fwd_arg);
    }
    if (srv->pub_hooks != NULL) {
        srv->pub_hooks->stop(srv->pub_arg);
    }
    if (!uv_is_closing((uv_handle_t *)&srv->listener)) {
        uv_close((uv_handle_t *)&srv->listener, NULL);
    }
    uv_close((uv_handle_t *)&srv->ldm_timer, NULL);
    /* Closing the handles restores the default action, which would kill
     * keeld mid-sync on a second signal: note it and finish instead. The
     * signals stay blocked on this thread (the only one that takes them:
     * every other thread started with them blocked) until quiet_cb is in
     * place, so no second signal finds the default action. */
    srv_server_signals_block();
    uv_close((uv_handle_t *)&srv->sigterm, NULL);
    uv_close((uv_handle_t *)&srv->sigint, NULL);
    uv_close((uv_handle_t *)&srv->sighup, NULL);
    uv_close((uv_handle_t *)&srv->sigusr2, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = quiet_cb;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    srv_server_signals_unblock();
    srv_server_resume_stalled(srv);
    uv_close((uv_handle_t *)&srv->stall_timer, NULL);
    /* Each conn flushes what it has queued, bounded by its own
     * SRV_CLOSE_FLUSH_MS_MAX deadline, then closes. */
    for (c = srv->conns; c != NULL && n < SRV_CONNS_MAX; c = c->next, n++) {
        srv_conn_close(c, NULL, true);
    }
    /* From here write callbacks drive the remaining flushes; the loop
     * ends when the last handle is closed. */
    uv_close((uv_handle_t *)&srv->flush_check, NULL);
}

void srv_server_close(struct srv_server *srv)
{
    srv_auth_close(&srv->auth);
    srv_tls_close(srv->tls);
    srv->tls = NULL;
    free_graveyard(srv);
    srv_sublist_close(&srv->sublist);
    srv_outpool_close(&srv->outpool);
    free(srv->info_json);
    free(srv->cluster_json);
    free(srv->routez_json);
    free(srv->dirty);
    pthread_mutex_destroy(&srv->stats_mu);
}

static void send_async_info(struct srv_server *srv)
{
    char line[SRV_INFO_LINE_BYTES_MAX];
    size_t k = 0;

    ASSERT(srv->info_json_len + 64 < sizeof line);
    memcpy(line, "INFO ", 5);
    memcpy(line + 5, srv->info_json, srv->info_json_len);
    for (struct srv_conn *c = srv->conns; c != NULL && k < SRV_CONNS_MAX;
         c = c->next, k++) {
        if (!c->connected || c->closing) {
            continue;
        }
        size_t n = 5 + srv->info_json_len;
        n += (size_t)snprintf(line + n, sizeof line - n,
                              ",\"client_id\":%llu}\r\n",
                              (unsigned long long)c->cid);
        if (srv_route_append(c, line, n) != 0) {
            srv_conn_close(c, NULL, false);
        }
    }
}

/* Set key to value (consumed) in INFO and send the new INFO to every
 * client. Keeps the old INFO if the new one would not fit
 * SRV_INFO_LINE_BYTES_MAX; what says what changed, for the log. */
static void info_set(struct srv_server *srv, const char *key, json_t *value,
                     const char *what)
{
    json_t *o = NULL;
    char *s = NULL;

    /* info_json lacks its closing brace: parse it with one added. */
    char *full = malloc(srv->info_json_len + 2);
    if (full != NULL) {
        memcpy(full, srv->info_json, srv->info_json_len);
        memcpy(full + srv->info_json_len, "}", 2);
        o = json_loads(full, 0, NULL);
        free(full);
    }
    if (o != NULL && value != NULL && json_object_set(o, key, value) == 0) {
        s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(o);
    json_decref(value);
    if (s == NULL || strlen(s) + 64 >= SRV_INFO_LINE_BYTES_MAX) {
        SRV_WARN("server", "cannot update INFO %s", what);
        free(s);
        return;
    }
    free(srv->info_json);
    srv->info_json = s;
    srv->info_json_len = strlen(s) - 1; /* without the closing brace */
    send_async_info(srv);
}

void srv_server_set_connect_urls(struct srv_server *srv,
                                 const char *const *urls, size_t n)
{
    char what[64];
    json_t *a = json_array();

    for (size_t i = 0; i < n && a != NULL; i++) {
        json_array_append_new(a, json_string(urls[i]));
    }
    snprintf(what, sizeof what, "connect_urls (%zu urls)", n);
    info_set(srv, "connect_urls", a, what);
}

/* Every SRV_LDM_TICK_MS in lame duck mode: stop once no leadership is
 * left to hand over, or SRV_LDM_HANDOFF_MS_MAX after it began. */
static void ldm_tick_cb(uv_timer_t *t)
{
    struct srv_server *srv = t->data;
    uint64_t now = uv_now(srv->loop);
    bool retry = now >= srv->ldm_retry_ms;
    uint32_t led = srv->pub_hooks != NULL
                       ? srv->pub_hooks->hand_over(srv->pub_arg, retry)
                       : 0;

    if (retry) {
        srv->ldm_retry_ms = now + SRV_LDM_RETRY_MS;
    }
    if (led > 0 && now - srv->ldm_start_ms < SRV_LDM_HANDOFF_MS_MAX) {
        return;
    }
    if (led > 0) {
        SRV_WARN("server",
                 "lame duck: %u group(s) still led here after %d ms (no "
                 "caught-up peer took them): stopping anyway, they elect "
                 "a leader without this node",
                 led, SRV_LDM_HANDOFF_MS_MAX);
    } else {
        SRV_INFO("server",
                 "lame duck: every leadership handed over in %llu ms: "
                 "closing the client connections and stopping",
                 (unsigned long long)(now - srv->ldm_start_ms));
    }
    srv_server_stop(srv);
}

void srv_server_lame_duck(struct srv_server *srv)
{
    if (srv->stopping || srv->lame_duck) {
        return;
    }
    srv->lame_duck = true;
    if (srv->listening) {
        uv_close((uv_handle_t *)&srv->listener, NULL);
        srv->listening = false;
    }
    info_set(srv, "ldm", json_true(), "ldm");
    srv->ldm_start_ms = uv_now(srv->loop);
    srv->ldm_retry_ms = srv->ldm_start_ms;
    SRV_INFO("server",
             "lame duck mode: client port closed, %zu client(s) told to "
             "move (INFO ldm), handing leaderships over",
             srv->nconns);
    uv_timer_start(&srv->ldm_timer, ldm_tick_cb, 0, SRV_LDM_TICK_MS);
}

void srv_server_set_pub_hooks(struct srv_server *srv,
                              const struct srv_pub_hooks *h, void *arg)
{
    ASSERT(h == NULL || (h->take != NULL && h->park != NULL &&
                         h->hand_over != NULL && h->stop != NULL));
    srv->pub_hooks = h;
    srv->pub_arg = arg;
}

void srv_server_set_fwd_hooks(struct srv_server *srv,
                              const struct srv_fwd_hooks *h, void *arg)
{
    ASSERT(h == NULL || (h->begin != NULL && h->queue_remote != NULL &&
                         h->end != NULL && h->interest_add != NULL &&
                         h->interest_remove != NULL && h->stop != NULL));
    srv->fwd_hooks = h;
    srv->fwd_arg = arg;
}

void srv_server_set_mon_hooks(struct srv_server *srv,
                              const struct srv_mon_hooks *h, void *arg)
{
    ASSERT(h == NULL || h->stop != NULL);
    srv->mon_hooks = h;
    srv->mon_arg = arg;
}

void srv_server_cluster_snapshot(struct srv_server *srv, char *c, char *r)
{
    pthread_mutex_lock(&srv->stats_mu);
    char *oc = srv->cluster_json;
    char *old_r = srv->routez_json;
    srv->cluster_json = c;
    srv->routez_json = r;
    pthread_mutex_unlock(&srv->stats_mu);
    free(oc);
    free(old_r);
}

char *srv_server_cluster_json(struct srv_server *srv, bool routez)
{
    char *s = NULL;

    pthread_mutex_lock(&srv->stats_mu);
    const char *src = routez ? srv->routez_json : srv->cluster_json;
    if (src != NULL) {
        s = strdup(src);
    }
    pthread_mutex_unlock(&srv->stats_mu);
    return s;
}

void srv_server_resume_stalled(struct srv_server *srv)
{
    size_t n = 0;

    while (srv->stalled != NULL) {
        struct srv_conn *c = srv->stalled;
        ASSERT(n++ < SRV_CONNS_MAX);
        srv->stalled = c->stall_next;
        c->stall_next = NULL;
        c->stalled = false;
        c->stall_wanted = false;
        srv_conn_resume(c);
    }
    uv_timer_stop(&srv->stall_timer);
}

static void stall_timer_cb(uv_timer_t *t)
{
    srv_server_resume_stalled(t->data);
}

void srv_server_stall(struct srv_server *srv, struct srv_conn *c)
{
    ASSERT(!c->stalled);
    SRV_TRACE("conn", "cid %llu stalled: %zu receivers backed up",
              (unsigned long long)c->cid, srv->nbacked);
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->stalled = true;
    c->stall_next = srv->stalled;
    srv->stalled = c;
    if (!uv_is_active((uv_handle_t *)&srv->stall_timer)) {
        uv_timer_start(&srv->stall_timer, stall_timer_cb, SRV_STALL_MS, 0);
    }
}
