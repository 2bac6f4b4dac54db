/* Store lifecycle, groups, appends, truncation and completions (see
 * store.h). The loop thread owns each group's in-memory log (segs, ents);
 * s->mu guards what the sync threads share with it (ops, flags, events).
 */
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "keel/fsync.h"

#define BOOT_ID_DEFAULT "/proc/sys/kernel/random/boot_id"
#define BOOT_ID_TEXT_MAX 128

uint64_t store__now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void store__fatal(struct store *s, const char *what, const char *errmsg)
{
    char msg[2 * KEEL_ERRMSG_MAX];

    store_fmt_str(msg, sizeof msg,
                  "store: %s failed: %s; aborting (an fsync is never retried; "
                  "recovery runs from disk on restart)",
                  what, errmsg == NULL ? "?" : errmsg);
    if (s != NULL && s->cfg.fatal_cb != NULL) {
        s->cfg.fatal_cb(s->cfg.fatal_arg, msg);
    }
    abort();
}

uint64_t store__rand(struct store *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);

    ASSERT(s != NULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    ASSERT(s->rng != 0 || z != 0 || true);
    return z;
}

struct op *store__op_new(enum op_kind kind)
{
    struct op *op = calloc(1, sizeof *op);

    ASSERT(kind >= OP_CREATE_SEG && kind <= OP_MARK);
    if (op == NULL) {
        store__fatal(NULL, "allocate store operation", "out of memory");
    }
    op->kind = kind;
    ASSERT(op->next == NULL);
    return op;
}

void store__op_free(struct op *op)
{
    if (op == NULL) {
        return;
    }
    ASSERT(op->kind >= OP_CREATE_SEG);
    free(op->buf);
    free(op);
}

/* Free g's pending ops without running them; a delete op owns its
 * segment. Caller holds s->mu (or owns g alone). */
void store__ops_drop(struct store_group *g)
{
    size_t n = 0;

    ASSERT(g != NULL && g->s != NULL);
    ASSERT(!g->busy);
    while (g->ops_head != NULL) {
        struct op *op = g->ops_head;
        ASSERT(++n <= STORE_GROUP_OPS_MAX * 1024);
        g->ops_head = op->next;
        if (op->kind == OP_DELETE_SEG && op->seg != NULL) {
            if (op->seg->f != NULL) {
                g->s->fs->close(g->s->fs, op->seg->f);
            }
            free(op->seg);
        }
        store__op_free(op);
    }
    g->ops_tail = NULL;
    g->nops = 0;
}

/* Let the sync side make progress: one manual step (cfg.manual_sync) or
 * a wait for the idle signal. Caller holds s->mu, and holds it again on
 * return. */
void store__wait_step(struct store *s)
{
    ASSERT(s != NULL);
    if (s->cfg.manual_sync) {
        pthread_mutex_unlock(&s->mu);
        store_debug_step(s);
        pthread_mutex_lock(&s->mu);
    } else {
        pthread_cond_wait(&s->idle_cv, &s->mu);
    }
}

/* Append op to g's pending list. Caller holds s->mu (or owns g alone). */
void store__op_push(struct store_group *g, struct op *op)
{
    ASSERT(op->next == NULL);
    ASSERT(g->nops <= STORE_GROUP_OPS_MAX * 1024);
    if (g->ops_tail == NULL) {
        g->ops_head = op;
    } else {
        g->ops_tail->next = op;
    }
    g->ops_tail = op;
    g->nops++;
}

/* Append g to queue q. Caller holds s->mu; g is not on q. */
void store__gq_push(struct store *s, enum store__queue q, struct store_group *g)
{
    struct store__gq *l = &s->q[q];

    ASSERT(q < STORE__Q_COUNT);
    ASSERT(g != NULL);
    g->qnext[q] = NULL;
    if (l->tail == NULL) {
        l->head = g;
    } else {
        l->tail->qnext[q] = g;
    }
    l->tail = g;
}

/* Take the first group of queue q, NULL when it is empty. Caller holds
 * s->mu. */
struct store_group *store__gq_pop(struct store *s, enum store__queue q)
{
    struct store__gq *l = &s->q[q];
    struct store_group *g = l->head;

    ASSERT(q < STORE__Q_COUNT);
    if (g != NULL) {
        l->head = g->qnext[q];
        l->tail = l->head == NULL ? NULL : l->tail;
    }
    return g;
}

/* Take g off queue q wherever it stands (a group closing). Caller holds
 * s->mu; g is on q. */
void store__gq_unlink(struct store *s, enum store__queue q,
                      struct store_group *g)
{
    struct store__gq *l = &s->q[q];
    struct store_group *prev = NULL;
    size_t n = 0;

    ASSERT(q < STORE__Q_COUNT);
    for (struct store_group *e = l->head; e != NULL; e = e->qnext[q]) {
        ASSERT(++n <= STORE_GROUPS_MAX);
        if (e == g) {
            if (prev == NULL) {
                l->head = e->qnext[q];
            } else {
                prev->qnext[q] = e->qnext[q];
            }
            l->tail = l->tail == g ? prev : l->tail;
            return;
        }
        prev = e;
    }
}

/* Put g on the run queue if it has work and no sync thread owns it.
 * Caller holds s->mu. */
void store__schedule(struct store *s, struct store_group *g)
{
    ASSERT(s != NULL);
    ASSERT(g != NULL);
    if (g->busy || g->queued || g->ops_head == NULL) {
        return;
    }
    g->queued = true;
    struct store__gq *l = &s->q[STORE__Q_RUN];
    if (g->first && l->head != NULL) {
        /* Ahead of every other group's batch (store_group_set_first). */
        g->qnext[STORE__Q_RUN] = l->head;
        l->head = g;
    } else {
        store__gq_push(s, STORE__Q_RUN, g);
    }
    pthread_cond_signal(&s->cv);
}

void store_group_set_first(struct store_group *g)
{
    ASSERT(g != NULL);
    pthread_mutex_lock(&g->s->mu);
    g->first = true;
    pthread_mutex_unlock(&g->s->mu);
}

/* Caller holds s->mu; the caller calls the wakeup callback after unlock. */
void store__queue_event(struct store *s, struct store_group *g)
{
    ASSERT(s != NULL);
    ASSERT(g != NULL);
    if (g->ev_queued) {
        return;
    }
    g->ev_queued = true;
    store__gq_push(s, STORE__Q_EVENT, g);
}

int store_fsync_parse(const char *text, struct store_fsync *out, char *errmsg)
{
    static const enum store_fsync_policy policies[] = {
        [KEEL_FSYNC_GROUP] = STORE_FSYNC_GROUP,
        [KEEL_FSYNC_ALWAYS] = STORE_FSYNC_ALWAYS,
        [KEEL_FSYNC_INTERVAL] = STORE_FSYNC_INTERVAL};
    enum keel_fsync_policy p = KEEL_FSYNC_GROUP;

    ASSERT(text != NULL);
    ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    if (keel_fsync_parse(text, STORE_INTERVAL_MS_MAX, &p, &out->interval_ms)) {
        out->policy = policies[p];
        return 0;
    }
    return keel_err(KEEL_ECONFIG, errmsg,
                    "fsync policy '%s': use group, always or interval:<ms> "
                    "(1..%d)",
                    text, STORE_INTERVAL_MS_MAX);
}

static int read_boot_id(const char *path, uint8_t out[16], char *errmsg)
{
    char text[BOOT_ID_TEXT_MAX];
    unsigned n = 0;
    ssize_t got;
    int fd;

    ASSERT(path != NULL);
    ASSERT(out != NULL);
    memset(out, 0, 16);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return keel_err(KEEL_ECONFIG, errmsg, "cannot read boot id from %s",
                        path);
    }
    got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0) {
        return keel_err(KEEL_ECONFIG, errmsg, "empty boot id file %s", path);
    }
    for (ssize_t i = 0; i < got && n < 32; i++) {
        int c = tolower((unsigned char)text[i]);
        int v = isdigit(c)               ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                         : -1;
        if (v >= 0) {
            out[n / 2] = (uint8_t)(out[n / 2] | (v << (n % 2 == 0 ? 4 : 0)));
            n++;
        }
    }
    return 0;
}

static int config_check(struct store *s, const struct store_config *cfg,
                        char *errmsg)
{
    ASSERT(s != NULL);
    ASSERT(cfg != NULL);
    s->cfg = *cfg;
    s->fs = cfg->fs != NULL ? cfg->fs : store_fs_posix();
    if (s->cfg.segment_bytes == 0) {
        s->cfg.segment_bytes = STORE_SEGMENT_BYTES_DEFAULT;
    }
    if (s->cfg.sync_threads == 0) {
        s->cfg.sync_threads = STORE_SYNC_THREADS_DEFAULT;
    }
    if (s->cfg.boot_id_path == NULL) {
        s->cfg.boot_id_path = BOOT_ID_DEFAULT;
    }
    if (s->cfg.read_only) {
        /* No thread may ever write: queued work is dropped at group open. */
        s->cfg.manual_sync = true;
        s->cfg.no_prealloc = true;
    }
    if (cfg->data_dir == NULL ||
        strlen(cfg->data_dir) + 128 >= STORE_PATH_BYTES_MAX) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "data directory path missing "
                        "or too long");
    }
    if (s->cfg.segment_bytes < STORE_SEGMENT_BYTES_MIN ||
        s->cfg.segment_bytes > STORE_SEGMENT_BYTES_MAX ||
        s->cfg.segment_bytes % 4096 != 0) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "segment size %llu: use a multiple of 4096 in "
                        "[%u, %u]",
                        (unsigned long long)s->cfg.segment_bytes,
                        STORE_SEGMENT_BYTES_MIN, STORE_SEGMENT_BYTES_MAX);
    }
    if (s->cfg.sync_threads > STORE_SYNC_THREADS_MAX) {
        return keel_err(KEEL_ECONFIG, errmsg, "at most %d sync threads",
                        STORE_SYNC_THREADS_MAX);
    }
    store_fmt_str(s->data_dir, sizeof s->data_dir, "%s", cfg->data_dir);
    return 0;
}

/* Rule 4: an unclean previous run under a different boot id was an OS
 * crash; record this run as unclean until store_close(clean). */
static int node_record(struct store *s, struct store_node_report *rep,
                       char *errmsg)
{
    struct store_meta_node prev;
    struct store_meta_node now;
    int rv;

    ASSERT(s->meta != NULL);
    ASSERT(rep != NULL);
    rv = store_meta_node_get(s->meta, &prev);
    if (rv == 0 && !prev.clean &&
        memcmp(prev.boot_id, s->boot_id, STORE_BOOT_ID_BYTES) != 0) {
        s->os_crash = true;
    }
    rep->os_crash = s->os_crash;
    if (s->cfg.read_only) {
        rv = store_meta_incarnation(s->meta, rep->incarnation);
        rep->incarnation64 = store_incarnation64(rep->incarnation);
        return rv == KEEL_ENOENT ? 0 : rv;
    }
    memcpy(now.boot_id, s->boot_id, STORE_BOOT_ID_BYTES);
    now.clean = false;
    rv = store_meta_node_put(s->meta, &now, errmsg);
    if (rv != 0) {
        store__fatal(s, "write node record", errmsg);
    }
    rv = store_meta_incarnation(s->meta, rep->incarnation);
    rep->incarnation64 = store_incarnation64(rep->incarnation);
    return rv;
}

uint64_t store_incarnation64(const uint8_t inc[16])
{
    uint64_t v;

    ASSERT(inc != NULL);
    v = keel_get_le64(inc);
    ASSERT(sizeof v == 8);
    return v != 0 ? v : 1;
}

int store_incarnation_adopt(struct store *s, uint64_t inc64, char *errmsg)
{
    uint8_t inc[16];

    ASSERT(s != NULL);
    ASSERT(inc64 != 0);
    if (!s->cfg.sole_member || s->cfg.read_only) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "only a writable store of a node of one adopts an "
                        "incarnation");
    }
    keel_put_le64(inc, inc64);
    pthread_mutex_lock(&s->mu); /* the segment planner draws from it too */
    uint64_t r = store__rand(s);
    pthread_mutex_unlock(&s->mu);
    keel_put_le64(inc + 8, r);
    int rv = store_meta_incarnation_put(s->meta, inc, errmsg);
    if (rv != 0) {
        store__fatal(s, "write the incarnation", errmsg);
    }
    ASSERT(store_incarnation64(inc) == inc64 || inc64 == 1);
    return 0;
}

/* What store_open made and store_close (or a failed open) frees. */
static void store_free(struct store *s)
{
    ASSERT(s != NULL);
    store_meta_close(s->meta);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->idle_cv);
    pthread_cond_destroy(&s->pre_cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->dirs_mu);
    free(s);
}

int store_open(const struct store_config *cfg, struct store **out,
               struct store_node_report *rep, char *errmsg)
{
    struct store *s;
    int rv;

    ASSERT(cfg != NULL);
    ASSERT(out != NULL && rep != NULL);
    memset(rep, 0, sizeof *rep);
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->dirs_mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    pthread_cond_init(&s->pre_cv, NULL);
    rv = config_check(s, cfg, errmsg);
    rv = rv == 0 ? read_boot_id(s->cfg.boot_id_path, s->boot_id, errmsg) : rv;
    if (rv == 0 && s->cfg.read_only) {
        rv = store_meta_open_ro(s->data_dir, &s->meta, &s->meta_rep, errmsg);
    } else if (rv == 0) {
        rv = store_meta_open(s->data_dir, &s->meta, &s->meta_rep, errmsg);
    }
    if (rv != 0) {
        goto err;
    }
    rep->fresh = s->meta_rep.fresh;
    rep->meta_reset = s->meta_rep.reset;
    rep->meta_migrated = s->meta_rep.n_migrated;
    rep->meta_v1 = s->meta_rep.n_v1 - s->meta_rep.n_migrated;
    s->meta_reset = s->meta_rep.reset;
    memcpy(rep->meta_reset_reason, s->meta_rep.reset_reason,
           sizeof rep->meta_reset_reason);
    if (getrandom(&s->rng, sizeof s->rng, 0) != sizeof s->rng) {
        s->rng = store__now_ms();
    }
    rv = node_record(s, rep, errmsg);
    rv = rv == 0 ? store__sync_start(s, errmsg) : rv;
    if (rv != 0) {
        goto err;
    }
    *out = s;
    return 0;
err:
    store_free(s);
    return rv;
}

void store__group_free(struct store *s, struct store_group *g)
{
    ASSERT(g != NULL);
    ASSERT(g->inflight == NULL);
    for (size_t i = 0; i < g->nsegs; i++) {
        if (g->segs[i]->f != NULL) {
            s->fs->close(s->fs, g->segs[i]->f);
        }
        free(g->segs[i]);
    }
    while (g->ops_head != NULL) {
        struct op *op = g->ops_head;
        g->ops_head = op->next;
        store__op_free(op);
    }
    free(g->segs);
    free(g->ents);
    free(g);
}

void store_close(struct store *s, bool clean)
{
    if (s == NULL) {
        return;
    }
    ASSERT(s->meta != NULL);
    clean = clean && !s->cfg.read_only; /* a read-only open records nothing */
    if (clean) {
        /* A clean shutdown leaves interval groups synced too. */
        pthread_mutex_lock(&s->mu);
        for (struct store_group *g = s->groups; g != NULL; g = g->next) {
            if (g->policy.policy == STORE_FSYNC_INTERVAL) {
                store__op_push(g, store__op_new(OP_INTERVAL_SYNC));
                store__schedule(s, g);
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    store__sync_stop(s);
    while (s->groups != NULL) {
        struct store_group *g = s->groups;
        s->groups = g->next;
        store__group_free(s, g);
    }
    if (clean) {
        struct store_meta_node n;
        char errmsg[KEEL_ERRMSG_MAX];
        memcpy(n.boot_id, s->boot_id, STORE_BOOT_ID_BYTES);
        n.clean = true;
        if (store_meta_node_put(s->meta, &n, errmsg) != 0) {
            store__fatal(s, "write clean node record", errmsg);
        }
    }
    store_free(s);
}

void store_group_id_hex(const struct store_group_id *id, char out[33])
{
    static const char digits[] = "0123456789abcdef";

    ASSERT(id != NULL);
    ASSERT(out != NULL);
    for (unsigned i = 0; i < 16; i++) {
        out[2 * i] = digits[id->b[i] >> 4];
        out[2 * i + 1] = digits[id->b[i] & 15];
    }
    out[32] = '\0';
}

const struct store_group_id *store_group_get_id(struct store_group *g)
{
    ASSERT(g != NULL);
    ASSERT(g->s != NULL);
    return &g->id;
}
