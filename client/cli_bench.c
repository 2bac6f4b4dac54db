/* keel bench: throughput and latency against a NATS server.
 *
 * The bench must measure the server, not itself: publishers call
 * natsConnection_Publish in a tight loop into a large I/O buffer, each
 * subscriber counts in its delivery callback with atomics, pending limits are
 * lifted so the client library never drops, and every connection is its own
 * socket (P publishers and S subscribers, one thread each). The waiter sleeps
 * on a condition variable that the last callback signals; its timed wake-ups
 * only draw progress and detect a stall.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keel/assert.h"
#include "cli_bench.h"
#include "cli_fmt.h"

#define BENCH_QUEUE "keel-bench"
#define BENCH_CLOSE_WAIT_MS 5000

/* Slow-consumer reports arrive on a libnats thread that may outlive any one
 * bench object, so the counter is static.
 */
static _Atomic int64_t slow_consumers;

static void bench_err_cb(natsConnection *nc, natsSubscription *sub,
                         natsStatus err, void *closure)
{
    (void)nc;
    (void)sub;
    (void)closure;
    if (err == NATS_SLOW_CONSUMER) {
        atomic_fetch_add(&slow_consumers, 1);
    }
}

static int bench_connect(struct bench *b, natsConnection **nc, char *errmsg)
{
    natsOptions *opts = NULL;
    int rv = cli_options_create(&b->cfg.conn, &opts, errmsg);
    if (rv != 0) {
        return rv;
    }
    natsStatus s = natsOptions_SetIOBufSize(opts, CLI_BENCH_IO_BUF_BYTES);
    if (s == NATS_OK) {
        s = natsOptions_SetMaxPendingMsgs(opts, CLI_BENCH_PENDING_MSGS);
    }
    if (s == NATS_OK) {
        /* A lost connection must show as lost messages, not be hidden. */
        s = natsOptions_SetAllowReconnect(opts, false);
    }
    if (s == NATS_OK) {
        s = natsOptions_SetErrorHandler(opts, bench_err_cb, NULL);
    }
    if (s == NATS_OK && b->cfg.mode == BENCH_REQ) {
        /* Latency: write each request and reply now, not via the flusher. */
        s = natsOptions_SetSendAsap(opts, true);
    }
    if (s != NATS_OK) {
        rv = cli_nats_err(s, errmsg, "cannot set bench options");
    } else {
        rv = cli_connect(&b->cfg.conn, opts, nc, errmsg);
    }
    natsOptions_Destroy(opts);
    return rv;
}

static void mark_done(struct bench *b, int64_t *counter)
{
    pthread_mutex_lock(&b->mu);
    (*counter)++;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->mu);
}

/* Delivery thread of one subscription: count, check the size, and signal
 * the waiter when this subscriber has every message.
 */
static void sub_msg_cb(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
                       void *closure)
{
    struct bench_sub *s = closure;
    struct bench *b = s->b;
    (void)nc;
    (void)sub;
    int64_t n = atomic_load_explicit(&s->received, memory_order_relaxed) + 1;
    if (n == 1) {
        atomic_store(&s->first_ns, cli_mono_ns());
    }
    if (natsMsg_GetDataLength(msg) != b->cfg.size) {
        atomic_fetch_add(&s->bad_size, 1);
    }
    natsMsg_Destroy(msg);
    atomic_store_explicit(&s->received, n, memory_order_release);
    if (n == b->cfg.msgs) {
        atomic_store(&s->last_ns, cli_mono_ns());
        mark_done(b, &b->subs_done);
    }
}

/* Responder of req mode: echo the request body to its reply subject. */
static void resp_msg_cb(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
                        void *closure)
{
    struct bench_sub *s = closure;
    (void)sub;
    const char *reply = natsMsg_GetReply(msg);
    if (reply != NULL &&
        natsConnection_Publish(nc, reply, natsMsg_GetData(msg),
                               natsMsg_GetDataLength(msg)) == NATS_OK) {
        atomic_fetch_add_explicit(&s->received, 1, memory_order_relaxed);
    }
    natsMsg_Destroy(msg);
}

static int start_subs(struct bench *b, char *errmsg)
{
    natsStatus st = NATS_OK;
    ASSERT(b->nsubs <= CLI_BENCH_CONNS_MAX);
    for (int64_t i = 0; i < b->nsubs; i++) {
        struct bench_sub *s = &b->subs[i];
        s->b = b;
        int rv = bench_connect(b, &s->nc, errmsg);
        if (rv != 0) {
            return rv;
        }
        if (b->cfg.mode == BENCH_REQ) {
            st = natsConnection_QueueSubscribe(&s->sub, s->nc, b->cfg.subject,
                                               BENCH_QUEUE, resp_msg_cb, s);
        } else {
            st = natsConnection_Subscribe(&s->sub, s->nc, b->cfg.subject,
                                          sub_msg_cb, s);
        }
        if (st == NATS_OK) {
            /* The largest limits: never drop inside the client library. */
            st = natsSubscription_SetPendingLimits(s->sub, INT_MAX, INT_MAX);
        }
        if (st == NATS_OK) {
            /* The round trip proves the server has the interest. */
            st = natsConnection_FlushTimeout(s->nc, b->cfg.conn.timeout_ms);
        }
        if (st != NATS_OK) {
            return cli_nats_err(st, errmsg, "bench subscribe failed");
        }
    }
    return 0;
}

static void publish_loop(struct bench_pub *p)
{
    struct bench *b = p->b;
    int64_t reported = 0;
    natsStatus s = NATS_OK;
    for (p->sent = 0; p->sent < p->msgs; p->sent++) {
        s = natsConnection_Publish(p->nc, b->cfg.subject, b->payload,
                                   (int)b->cfg.size);
        if (s != NATS_OK) {
            break;
        }
        if ((p->sent & 1023) == 1023) {
            atomic_fetch_add_explicit(&b->progress, p->sent + 1 - reported,
                                      memory_order_relaxed);
            reported = p->sent + 1;
        }
    }
    if (s == NATS_OK) {
        s = natsConnection_FlushTimeout(p->nc, b->cfg.stall_ms);
    }
    atomic_fetch_add_explicit(&b->progress, p->sent - reported,
                              memory_order_relaxed);
    if (s != NATS_OK) {
        p->rv = cli_nats_err(s, p->errmsg, "bench publish failed");
    }
}

static void request_loop(struct bench_pub *p)
{
    struct bench *b = p->b;
    for (p->sent = 0; p->sent < p->msgs; p->sent++) {
        natsMsg *reply = NULL;
        int64_t t0 = cli_mono_ns();
        natsStatus s =
            natsConnection_Request(&reply, p->nc, b->cfg.subject, b->payload,
                                   (int)b->cfg.size, b->cfg.stall_ms);
        p->lat_ns[p->sent] = cli_mono_ns() - t0;
        if (s != NATS_OK) {
            p->rv = cli_nats_err(s, p->errmsg, "bench request failed");
            break;
        }
        natsMsg_Destroy(reply);
        atomic_fetch_add_explicit(&b->progress, 1, memory_order_relaxed);
    }
}

/* Block until the driver releases every publisher at once. */
static bool wait_go(struct bench *b)
{
    pthread_mutex_lock(&b->mu);
    while (!b->go) {
        pthread_cond_wait(&b->cond, &b->mu);
    }
    bool aborted = b->aborted;
    pthread_mutex_unlock(&b->mu);
    return !aborted;
}

static void release(struct bench *b, bool aborted)
{
    pthread_mutex_lock(&b->mu);
    b->go = true;
    b->aborted = aborted;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->mu);
}

static void *pub_thread(void *arg)
{
    struct bench_pub *p = arg;
    struct bench *b = p->b;
    if (!wait_go(b)) {
        return NULL;
    }
    p->start_ns = cli_mono_ns();
    if (b->cfg.mode == BENCH_REQ) {
        request_loop(p);
    } else {
        publish_loop(p);
    }
    p->end_ns = cli_mono_ns();
    mark_done(b, &b->pubs_done);
    return NULL;
}

static int start_pubs(struct bench *b, char *errmsg)
{
    ASSERT(b->npubs <= CLI_BENCH_CONNS_MAX);
    for (int64_t i = 0; i < b->npubs; i++) {
        struct bench_pub *p = &b->pubs[i];
        p->b = b;
        p->msgs = b->cfg.msgs / b->npubs + (i < b->cfg.msgs % b->npubs);
        if (b->cfg.mode == BENCH_REQ) {
            p->lat_ns = calloc((size_t)p->msgs + 1, sizeof *p->lat_ns);
            if (p->lat_ns == NULL) {
                return keel_err(KEEL_ENOMEM, errmsg, "no memory for latencies");
            }
        }
        int rv = bench_connect(b, &p->nc, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    /* Connect everyone first, then release all publishers at once. */
    for (int64_t i = 0; i < b->npubs; i++) {
        if (pthread_create(&b->pubs[i].thread, NULL, pub_thread, &b->pubs[i]) !=
            0) {
            release(b, true);
            return keel_err(KEEL_ENOMEM, errmsg, "cannot start a thread");
        }
        b->pubs[i].started = true;
    }
    release(b, false);
    return 0;
}

static bool any_conn_closed(const struct bench *b)
{
    for (int64_t i = 0; i < b->nsubs; i++) {
        if (natsConnection_IsClosed(b->subs[i].nc)) {
            return true;
        }
    }
    return false;
}

/* Messages moved so far: sent by publishers plus received by subscribers
 * (each subscriber counts on its own cache line; summing is cheap).
 */
static int64_t moved(const struct bench *b)
{
    int64_t n = atomic_load_explicit(&b->progress, memory_order_relaxed);
    for (int64_t i = 0; b->cfg.mode != BENCH_REQ && i < b->nsubs; i++) {
        n += atomic_load_explicit(&b->subs[i].received, memory_order_relaxed);
    }
    return n;
}

/* Wait until every publisher finished and every subscriber has all
 * messages; fail when nothing moves for --stall (sub mode waits for the
 * first message without a stall limit, up to CLI_BENCH_WAIT_MS_MAX).
 */
static int wait_done(struct bench *b, int64_t total, char *errmsg)
{
    int64_t subs_target = b->cfg.mode == BENCH_REQ ? 0 : b->nsubs;
    int64_t last = -1;
    int64_t last_change_ns = cli_mono_ns();
    int rv = 0;

    pthread_mutex_lock(&b->mu);
    for (int64_t tick = 0;
         b->subs_done < subs_target || b->pubs_done < b->npubs; tick++) {
        if (tick > CLI_BENCH_WAIT_MS_MAX / CLI_BENCH_TICK_MS) {
            rv = keel_err(KEEL_ETIMEOUT, errmsg, "bench ran too long");
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += CLI_BENCH_TICK_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&b->cond, &b->mu, &ts);
        int64_t done = moved(b);
        cli_bench_progress(b, done, total);
        if (done != last) {
            last = done;
            last_change_ns = cli_mono_ns();
        } else if ((done > 0 || b->cfg.mode != BENCH_SUB) &&
                   cli_mono_ns() - last_change_ns > b->cfg.stall_ms * 1000000) {
            rv = keel_err(KEEL_ETIMEOUT, errmsg,
                          "no progress for %lld ms (%lld of %lld messages): "
                          "messages were lost or the server stalled",
                          (long long)b->cfg.stall_ms, (long long)done,
                          (long long)total);
            break;
        }
        if (any_conn_closed(b)) {
            rv = keel_err(KEEL_ECONN, errmsg,
                          "a subscriber connection closed (slow consumer "
                          "or server exit?)");
            break;
        }
    }
    pthread_mutex_unlock(&b->mu);
    cli_bench_progress(b, -1, total);
    return rv;
}

static void collect(struct bench *b, struct bench_result *r)
{
    int64_t pub_start = INT64_MAX, pub_end = 0, sub_start = INT64_MAX;
    int64_t sub_end = 0;
    memset(r, 0, sizeof *r);
    for (int64_t i = 0; i < b->npubs; i++) {
        struct bench_pub *p = &b->pubs[i];
        pub_start = p->start_ns < pub_start ? p->start_ns : pub_start;
        pub_end = p->end_ns > pub_end ? p->end_ns : pub_end;
        r->pub_msgs += p->sent;
        r->errors += p->rv != 0;
    }
    for (int64_t i = 0; b->cfg.mode != BENCH_REQ && i < b->nsubs; i++) {
        struct bench_sub *s = &b->subs[i];
        int64_t got = atomic_load(&s->received);
        int64_t first = atomic_load(&s->first_ns);
        int64_t lastn = atomic_load(&s->last_ns);
        int64_t dropped = 0;
        r->sub_msgs += got;
        r->lost += got < b->cfg.msgs ? b->cfg.msgs - got : 0;
        r->bad_size += atomic_load(&s->bad_size);
        if (natsSubscription_GetDropped(s->sub, &dropped) == NATS_OK) {
            r->dropped += dropped;
        }
        sub_start = got > 0 && first < sub_start ? first : sub_start;
        sub_end = lastn > sub_end ? lastn : sub_end;
    }
    r->slow_consumers = atomic_load(&slow_consumers);
    r->pub_s = pub_end > pub_start ? (double)(pub_end - pub_start) / 1e9 : 0;
    r->sub_s = sub_end > sub_start ? (double)(sub_end - sub_start) / 1e9 : 0;
    int64_t e2e_end = sub_end > pub_end ? sub_end : pub_end;
    r->e2e_s = e2e_end > pub_start ? (double)(e2e_end - pub_start) / 1e9 : 0;
}

static void teardown(struct bench *b)
{
    pthread_mutex_lock(&b->mu);
    bool pubs_running = b->pubs_done < b->npubs && b->go && !b->aborted;
    pthread_mutex_unlock(&b->mu);
    if (pubs_running) {
        /* A publisher blocked on a stalled server cannot be joined; the
         * process is about to exit with an error, which frees everything.
         */
        return;
    }
    for (int64_t i = 0; i < b->npubs; i++) {
        if (b->pubs[i].started) {
            pthread_join(b->pubs[i].thread, NULL);
        }
        natsConnection_Destroy(b->pubs[i].nc);
    }
    for (int64_t i = 0; i < b->nsubs; i++) {
        natsSubscription_Destroy(b->subs[i].sub);
        natsConnection_Destroy(b->subs[i].nc);
    }
    /* Callbacks point into b: wait for every libnats thread to end first. */
    (void)nats_CloseAndWait(BENCH_CLOSE_WAIT_MS);
    for (int64_t i = 0; i < b->npubs; i++) {
        free(b->pubs[i].lat_ns);
    }
    free(b->pubs);
    free(b->subs);
    free(b->payload);
    pthread_cond_destroy(&b->cond);
    pthread_mutex_destroy(&b->mu);
}

static int bench_init(struct bench *b, char *errmsg)
{
    enum bench_mode m = b->cfg.mode;
    b->npubs = m == BENCH_SUB ? 0 : b->cfg.pubs;
    b->nsubs = m == BENCH_PUB ? 0 : b->cfg.subs;
    b->tty = !b->cfg.json && isatty(STDERR_FILENO);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&b->mu, NULL);
    b->payload = malloc((size_t)b->cfg.size + 1);
    b->pubs = calloc((size_t)b->npubs + 1, sizeof *b->pubs);
    size_t subs_bytes = ((size_t)b->nsubs + 1) * sizeof *b->subs;
    b->subs = aligned_alloc(BENCH_CACHE_LINE, subs_bytes);
    if (b->subs != NULL) {
        memset(b->subs, 0, subs_bytes);
    }
    if (b->payload == NULL || b->pubs == NULL || b->subs == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "no memory for the bench");
    }
    for (int64_t i = 0; i < b->cfg.size; i++) {
        b->payload[i] = (char)('a' + i % 26);
    }
    atomic_store(&slow_consumers, 0);
    return 0;
}

static int check_result(const struct bench *b, const struct bench_result *r,
                        char *errmsg)
{
    if (r->errors > 0) {
        for (int64_t i = 0; i < b->npubs; i++) {
            if (b->pubs[i].rv != 0) {
                return keel_err(b->pubs[i].rv, errmsg, "%s", b->pubs[i].errmsg);
            }
        }
    }
    if (r->lost > 0 || r->dropped > 0 || r->slow_consumers > 0 ||
        r->bad_size > 0) {
        return keel_err(KEEL_ELOST, errmsg,
                        "%lld messages lost, %lld dropped, %lld slow-consumer "
                        "events, %lld of the wrong size",
                        (long long)r->lost, (long long)r->dropped,
                        (long long)r->slow_consumers, (long long)r->bad_size);
    }
    return 0;
}

static int bench_run(struct bench *b, char *errmsg)
{
    struct bench_result r;
    int rv = bench_init(b, errmsg);
    if (rv == 0) {
        rv = start_subs(b, errmsg);
    }
    if (rv == 0 && b->cfg.mode == BENCH_SUB) {
        /* On stderr even with --json: scripts wait for it before pub. */
        fprintf(stderr,
                "%lld subscriber(s) ready on \"%s\", waiting for "
                "%lld messages each\n",
                (long long)b->nsubs, b->cfg.subject, (long long)b->cfg.msgs);
        fflush(stderr);
    }
    int64_t total = b->cfg.msgs * ((b->cfg.mode == BENCH_REQ ? 0 : b->nsubs) +
                                   (b->npubs > 0 ? 1 : 0));
    if (rv == 0) {
        rv = start_pubs(b, errmsg);
    }
    if (rv == 0) {
        rv = wait_done(b, total, errmsg);
    }
    if (rv == 0) {
        collect(b, &r);
        if (b->cfg.mode == BENCH_REQ) {
            rv = cli_bench_latency(b, &r, errmsg);
        }
        if (rv == 0) {
            cli_bench_report(&b->cfg, &r);
            rv = check_result(b, &r, errmsg);
        }
    }
    teardown(b);
    return rv;
}

int cli_bench_main(const struct cli_cmd *cmd,
                   const struct cli_bench_modes *modes,
                   const struct cli_flag *flags, struct cli_conn_opts *conn,
                   int argc, char **argv, cli_bench_run_cb run_cb, void *cfg,
                   char *errmsg)
{
    struct cli_args args;
    bool help;

    ASSERT(cmd->args_min == 2);
    ASSERT(cmd->args_max == 2);
    cli_conn_opts_init(conn);
    int rv = cli_parse(cmd, flags, conn, argc, argv, &args, &help, errmsg);
    if (rv != 0 || help) {
        return rv;
    }
    for (int i = 0; i < CLI_BENCH_MODES_MAX && modes->words[i] != NULL; i++) {
        if (strcmp(modes->words[i], args.items[0]) == 0) {
            return run_cb(cfg, i, args.items[1], errmsg);
        }
    }
    return keel_err(KEEL_EUSAGE, errmsg, "unknown %s mode '%s' (%s)",
                    modes->kind, args.items[0], modes->hint);
}

int cli_bench_ranges(const struct cli_bench_range *r, size_t n, char *errmsg)
{
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        ok = ok && r[i].v >= r[i].min && r[i].v <= r[i].max;
    }
    if (ok) {
        return 0;
    }
    char text[KEEL_ERRMSG_MAX];
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof text; i++) {
        int w = snprintf(text + used, sizeof text - used, "%s%s %lld..%lld",
                         i > 0 ? ", " : "", r[i].flag, (long long)r[i].min,
                         (long long)r[i].max);
        used += w > 0 ? (size_t)w : 0;
    }
    return keel_err(KEEL_EUSAGE, errmsg, "%s", text);
}

static const struct cli_bench_modes bench_modes = {
    "bench", "pub, sub, pubsub or req", {"pub", "sub", "pubsub", "req"}};

/* cli_bench_main's run_cb: the ranges, then the bench. */
static int bench_start(void *arg, int mode, const char *subject, char *errmsg)
{
    struct bench *b = arg;
    struct bench_cfg *c = &b->cfg;
    c->mode = (enum bench_mode)mode;
    c->mode_name = bench_modes.words[mode];
    c->subject = subject;
    if (c->size < 0 || c->size > CLI_BENCH_SIZE_BYTES_MAX) {
        return keel_err(KEEL_EUSAGE, errmsg, "--size must be 0..%d bytes",
                        CLI_BENCH_SIZE_BYTES_MAX);
    }
    int64_t msgs_max =
        c->mode == BENCH_REQ ? CLI_BENCH_REQ_MSGS_MAX : CLI_BENCH_MSGS_MAX;
    if (c->msgs < 1 || c->msgs > msgs_max) {
        return keel_err(KEEL_EUSAGE, errmsg, "--msgs must be 1..%lld",
                        (long long)msgs_max);
    }
    if (c->pubs < 1 || c->pubs > CLI_BENCH_CONNS_MAX || c->subs < 1 ||
        c->subs > CLI_BENCH_CONNS_MAX) {
        return keel_err(KEEL_EUSAGE, errmsg, "--pub and --sub must be 1..%d",
                        CLI_BENCH_CONNS_MAX);
    }
    return bench_run(b, errmsg);
}

/* The benches below keel bench, their handlers given their row as cmd
 * (usage and help): keel bench js pub, keel bench js fetch|push|mirror
 * (other flags: their own parser; the mode must be the first argument
 * after "js") and keel bench kv. */
static const struct cli_cmd bench_js = {
    "bench js",
    NULL,
    "pub SUBJECT",
    "JetStream publish throughput with acks (also: fetch|push SUBJECT, "
    "mirror SUBJECT; see keel bench js fetch --help).",
    2,
    2};
static const struct cli_cmd bench_js_consume = {
    "bench js",
    NULL,
    "fetch|push|mirror SUBJECT",
    "JetStream consume throughput (preloaded stream, durable consumer); "
    "mirror: a new mirror's catch-up, then its lag under load.",
    2,
    2};
static const struct cli_cmd bench_kv = {
    "bench kv",
    NULL,
    "put|get BUCKET",
    "Key/Value put or get throughput and latency (kvStore API; the "
    "bench creates BUCKET and deletes it after).",
    2,
    2};

int cli_bench(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    struct bench b;

    int hoisted = 0; /* `keel bench -s URL js pub X` */
    int rv = cli_hoist_conn_flags(argc, argv, &hoisted, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (argc - hoisted > 1 && strcmp(argv[1], "js") == 0) {
        bool consume = argc > 2 && (strcmp(argv[2], "fetch") == 0 ||
                                    strcmp(argv[2], "push") == 0 ||
                                    strcmp(argv[2], "mirror") == 0);
        return consume ? cli_bench_js_consume(&bench_js_consume, argc - 1,
                                              argv + 1, errmsg)
                       : cli_bench_js(&bench_js, argc - 1, argv + 1, errmsg);
    }
    if (argc - hoisted > 1 && strcmp(argv[1], "kv") == 0) {
        return cli_bench_kv(&bench_kv, argc - 1, argv + 1, errmsg);
    }
    memset(&b, 0, sizeof b);
    struct bench_cfg *c = &b.cfg;
    c->size = 128;
    c->msgs = 100000;
    c->pubs = 1;
    c->subs = 1;
    c->stall_ms = CLI_BENCH_STALL_MS_DEFAULT;
    const struct cli_flag flags[] = {
        {"size", 0, CLI_FLAG_SIZE, &c->size, "BYTES",
         "message size, e.g. 16, 1KiB (default 128)"},
        {"msgs", 0, CLI_FLAG_INT, &c->msgs, "N",
         "messages to publish in total; each subscriber gets all N "
         "(default 100000)"},
        {"pub", 0, CLI_FLAG_INT, &c->pubs, "P",
         "publisher (req: requester) connections (default 1)"},
        {"sub", 0, CLI_FLAG_INT, &c->subs, "S",
         "subscriber (req: responder) connections (default 1)"},
        {"stall", 0, CLI_FLAG_DURATION, &c->stall_ms, "DURATION",
         "fail when no message moves for this long (default 10s)"},
        {"json", 0, CLI_FLAG_BOOL, &c->json, NULL,
         "print one JSON object instead of text"},
        CLI_FLAG_END,
    };
    return cli_bench_main(cmd, &bench_modes, flags, &c->conn, argc, argv,
                          bench_start, &b, errmsg);
}
