/* srv_metrics: loop-thread stats gathered into immutable snapshots for the
 * monitoring thread (see srv_metrics.h for the threading rule).
 *
 * Each query from the HTTP thread asks the loop for a new snapshot
 * (uv_async_send) and waits on a condition variable, at most
 * SRV_MON_REFRESH_WAIT_MS; a busy or stopped loop leaves it the previous
 * snapshot. Snapshots are reference counted so
 * the loop can publish a new one while a response is still being written
 * from the old.
 */
#include "srv_metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/error.h"
#include "srv_conn.h"
#include "srv_log.h"

const uint64_t srv_mon_hist_bounds_us[SRV_MON_HIST_BUCKETS] = {
    100,   250,    500,    1000,   2500,    5000,    10000,    25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 10000000, UINT64_MAX,
};

struct srv_metrics {
    struct srv_server *srv;
    uv_async_t async;
    bool async_open;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct srv_mon_snap *cur; /* under mu */
    uint64_t gen;             /* generation of cur, under mu */
    bool stopped;             /* under mu: the loop answers no more */
    /* Loop thread only. */
    struct srv_mon_hist puback;
    uint64_t elections;
    uint64_t consumer_visits;
    srv_metrics_gather_fn gather_up; /* the layer above's part; NULL: none */
    void *gather_arg;
};

void srv_mon_hist_add(struct srv_mon_hist *h, uint64_t us)
{
    size_t i = 0;
    while (i + 1 < SRV_MON_HIST_BUCKETS && us > srv_mon_hist_bounds_us[i]) {
        i++;
    }
    h->counts[i]++;
    h->count++;
    h->sum_us += us;
}

uint64_t srv_metrics_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void srv_metrics_puback_observe(struct srv_server *srv, uint64_t us)
{
    if (srv != NULL && srv->metrics != NULL) {
        srv_mon_hist_add(&srv->metrics->puback, us);
    }
}

void srv_metrics_election(struct srv_server *srv)
{
    if (srv != NULL && srv->metrics != NULL) {
        srv->metrics->elections++;
    }
}

void srv_metrics_consumer_visits(struct srv_server *srv, uint64_t n)
{
    if (srv != NULL && srv->metrics != NULL) {
        srv->metrics->consumer_visits += n;
    }
}

static void snap_free(struct srv_mon_snap *s)
{
    if (s != NULL) {
        free(s->conns);
        free(s->streams);
        free(s);
    }
}

/* "ip:port" (the conn's peer text; IPv6 addresses hold colons too). */
static void split_peer(const char *peer, char *ip, size_t len, int *port)
{
    const char *colon = strrchr(peer, ':');
    size_t n = colon != NULL ? (size_t)(colon - peer) : strlen(peer);
    if (n >= len) {
        n = len - 1;
    }
    memcpy(ip, peer, n);
    ip[n] = '\0';
    *port = colon != NULL ? atoi(colon + 1) : 0;
}

static int gather_conns(struct srv_server *srv, struct srv_mon_snap *s)
{
    size_t n =
        srv->nconns < SRV_MON_CONNS_MAX ? srv->nconns : SRV_MON_CONNS_MAX;
    s->nconns_total = srv->nconns;
    if (n == 0) {
        return 0;
    }
    s->conns = calloc(n, sizeof *s->conns);
    if (s->conns == NULL) {
        return KEEL_ENOMEM;
    }
    /* The list is newest first; fill from the end so the array is in
     * accept (cid) order, as nats-server lists them. */
    size_t i = n;
    for (struct srv_conn *c = srv->conns; c != NULL && i > 0; c = c->next) {
        struct srv_mon_conn *mc = &s->conns[--i];
        mc->cid = c->cid;
        split_peer(c->peer, mc->ip, sizeof mc->ip, &mc->port);
        mc->mon = c->mon;
        mc->subscriptions = c->subs.count;
        mc->pending_bytes = srv_conn_pending_bytes(c);
    }
    if (i > 0) {
        /* nconns counted a conn the list no longer holds: compact. */
        memmove(s->conns, s->conns + i, (n - i) * sizeof *s->conns);
    }
    s->nconns = n - i;
    return 0;
}

/* Loop thread: build a new snapshot and publish it. */
static void gather(struct srv_metrics *m)
{
    struct srv_server *srv = m->srv;
    struct srv_mon_snap *s = calloc(1, sizeof *s);
    int rv = s != NULL ? 0 : KEEL_ENOMEM;

    if (rv == 0) {
        s->refs = 1;
        s->taken_ms = srv_now_ms();
        s->loop_now_ms = uv_now(srv->loop);
        s->start_ms = srv->start_ms;
        s->stats = srv->stats;
        s->stats.subscriptions = srv->sublist.count;
        s->puback = m->puback;
        s->elections = m->elections;
        s->consumer_visits = m->consumer_visits;
        srv_turn_stats(&s->turn);
        rv = gather_conns(srv, s);
    }
    if (rv == 0 && m->gather_up != NULL) {
        rv = m->gather_up(m->gather_arg, s);
    }
    if (rv != 0) {
        SRV_WARN("monitor", "stats snapshot skipped: %s", keel_strerror(rv));
        snap_free(s);
        s = NULL;
    }
    pthread_mutex_lock(&m->mu);
    struct srv_mon_snap *old = NULL;
    if (s != NULL) {
        s->gen = ++m->gen;
        old = m->cur;
        m->cur = s;
        if (old != NULL && --old->refs > 0) {
            old = NULL; /* a reader still holds it; it frees it */
        }
    }
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
    snap_free(old);
}

static void async_cb(uv_async_t *h)
{
    gather(h->data);
}

int srv_metrics_init(struct srv_server *srv, uv_loop_t *loop,
                     struct srv_metrics **out)
{
    struct srv_metrics *m = calloc(1, sizeof *m);
    if (m == NULL) {
        return KEEL_ENOMEM;
    }
    m->srv = srv;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cond, NULL);
    uv_async_init(loop, &m->async, async_cb);
    m->async.data = m;
    m->async_open = true;
    /* Monitoring must never keep a stopping server's loop alive. */
    uv_unref((uv_handle_t *)&m->async);
    gather(m);
    *out = m;
    return 0;
}

void srv_metrics_set_gather(struct srv_metrics *m, srv_metrics_gather_fn fn,
                            void *arg)
{
    m->gather_up = fn;
    m->gather_arg = arg;
}

static void hook_stop(void *arg)
{
    srv_metrics_stop(arg);
}

const struct srv_mon_hooks srv_metrics_mon_hooks = {.stop = hook_stop};

void srv_metrics_stop(struct srv_metrics *m)
{
    if (m == NULL || !m->async_open) {
        return;
    }
    gather(m); /* the last counters, for queries during shutdown */
    pthread_mutex_lock(&m->mu);
    m->stopped = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
    uv_close((uv_handle_t *)&m->async, NULL);
    m->async_open = false;
}

void srv_metrics_free(struct srv_metrics *m)
{
    if (m == NULL) {
        return;
    }
    ASSERT(!m->async_open);
    snap_free(m->cur);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void deadline_after(struct timespec *ts, uint64_t ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

struct srv_mon_snap *srv_metrics_acquire(struct srv_metrics *m)
{
    struct timespec deadline;
    deadline_after(&deadline, SRV_MON_REFRESH_WAIT_MS);

    pthread_mutex_lock(&m->mu);
    /* Always ask the loop: a query right after a change must see it (the
     * HTTP thread serves one request at a time, so this stays bounded). */
    if (!m->stopped) {
        uint64_t want = m->gen + 1;
        uv_async_send(&m->async);
        /* Bounded: the wait ends at the deadline whatever the loop does. */
        while (m->gen < want && !m->stopped) {
            if (pthread_cond_timedwait(&m->cond, &m->mu, &deadline) ==
                ETIMEDOUT) {
                break;
            }
        }
    }
    struct srv_mon_snap *s = m->cur;
    if (s != NULL) {
        s->refs++;
    }
    pthread_mutex_unlock(&m->mu);
    return s;
}

void srv_metrics_release(struct srv_metrics *m, struct srv_mon_snap *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&m->mu);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&m->mu);
    if (last) {
        snap_free(s);
    }
}
