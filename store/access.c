/* Reads (rule 5), hard state, snapshots, prefix drop, amnesia and the
 * completion queue.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Copy bytes of a record not yet on disk from a pending or in-flight op.
 * Newest data wins: a truncation may have rewritten the same offset.
 * Caller holds s->mu. */
static bool copy_from_ops(struct store_group *g, const struct ient *e,
                          uint8_t *buf)
{
    const struct op *hit = NULL;

    ASSERT(e != NULL);
    ASSERT(buf != NULL);
    for (int pass = 0; pass < 2 && hit == NULL; pass++) {
        const struct op *op = pass == 0 ? g->ops_head : g->inflight;
        for (; op != NULL; op = op->next) {
            if ((op->kind == OP_WRITE || op->kind == OP_REPAIR) &&
                op->seg == e->seg && e->off >= op->off &&
                e->off + e->bytes <= op->off + op->len) {
                hit = op;
            }
        }
    }
    if (hit != NULL) {
        memcpy(buf, hit->buf + (e->off - hit->off), e->bytes);
    }
    return hit != NULL;
}

static int fetch(struct store_group *g, const struct ient *e, uint8_t *buf,
                 char *errmsg)
{
    struct store *s = g->s;
    struct fs_file *f;
    size_t got = 0;
    bool done;
    int rv;

    ASSERT(e->bytes >= STORE_REC_OVERHEAD);
    ASSERT(!e->faulty);
    pthread_mutex_lock(&s->mu);
    done = copy_from_ops(g, e, buf);
    f = e->seg->f;
    pthread_mutex_unlock(&s->mu);
    if (done) {
        return 0;
    }
    if (f == NULL) {
        return keel_err(KEEL_EIO, errmsg, "segment not open");
    }
    rv = s->fs->pread(s->fs, f, buf, e->bytes, e->off, &got, errmsg);
    if (rv == 0 && got != e->bytes) {
        rv = keel_err(KEEL_ECORRUPT, errmsg, "record cut short");
    }
    return rv;
}

int store_read(struct store_group *g, uint64_t index, struct store_entry *out,
               char *errmsg)
{
    struct store_fmt_rec r;
    struct ient *e;
    uint8_t *buf;
    int rv;

    ASSERT(g != NULL);
    ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    if (g->nents == 0 || index < g->first_index ||
        index > store__last_index(g)) {
        return keel_err(KEEL_ENOENT, errmsg, "index %llu not in the log",
                        (unsigned long long)index);
    }
    e = store__ent(g, index);
    if (e->faulty) {
        return keel_err(KEEL_EFAULTY, errmsg, "index %llu is faulty",
                        (unsigned long long)index);
    }
    buf = malloc(e->bytes);
    if (buf == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    rv = fetch(g, e, buf, errmsg);
    if (rv == 0 &&
        (store_fmt_rec_decode(buf, e->bytes, e->seg->salt, &r) != 0 ||
         r.index != index || r.term != e->term || r.checksum != e->checksum)) {
        /* Rule 5: never serve it, never truncate: it becomes faulty and
         * waits for repair. */
        e->faulty = 1;
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "index %llu failed its checksum; marked faulty",
                      (unsigned long long)index);
    }
    if (rv == 0) {
        memmove(buf, r.payload, r.len);
        *out = (struct store_entry){index, r.term, r.type, r.flags, r.len, buf};
        return 0;
    }
    free(buf);
    return rv;
}

void store_entry_free(struct store_entry *e)
{
    if (e == NULL) {
        return;
    }
    free(e->payload);
    e->payload = NULL;
}

int store_iterate(struct store_group *g, uint64_t from, uint64_t to,
                  store_iter_cb cb, void *arg, char *errmsg)
{
    ASSERT(cb != NULL);
    ASSERT(from <= to);
    return store_read_range(g, from, to, cb, arg, errmsg);
}

int store_term_at(struct store_group *g, uint64_t index, uint64_t *term)
{
    ASSERT(g != NULL);
    ASSERT(term != NULL);
    if (index + 1 == g->first_index && index == g->snap.index) {
        *term = g->snap.term;
        return 0;
    }
    if (g->nents == 0 || index < g->first_index ||
        index > store__last_index(g)) {
        return KEEL_ENOENT;
    }
    struct ient *e = store__ent(g, index);
    if (e->faulty && e->term == 0) {
        return KEEL_EFAULTY;
    }
    *term = e->term;
    return 0;
}

uint64_t store_next_index(const struct store_group *g)
{
    ASSERT(g != NULL);
    return store__last_index(g) + 1;
}

void store_group_info(struct store_group *g, struct store_group_info *out)
{
    ASSERT(g != NULL);
    ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    out->first_index = g->first_index;
    out->last_index = g->nents > 0 ? store__last_index(g) : g->first_index - 1;
    out->last_term = g->nents > 0 ? g->ents[g->nents - 1].term : g->snap.term;
    for (size_t i = 0; i < g->nents; i++) {
        out->log_bytes += g->ents[i].bytes;
        if (g->ents[i].faulty && out->first_faulty == 0) {
            out->first_faulty = g->first_index + i;
        }
    }
    out->amnesia = g->amnesia;
    pthread_mutex_lock(&g->s->mu);
    out->persisted_index = g->persisted_index;
    out->enospc = g->enospc;
    pthread_mutex_unlock(&g->s->mu);
}

int store_hard_state_save(struct store_group *g, uint64_t term,
                          const void *vote, size_t vote_len, char *errmsg)
{
    struct op *op;

    ASSERT(g != NULL);
    ASSERT(vote != NULL || vote_len == 0);
    if (vote_len > STORE_VOTE_BYTES_MAX) {
        return keel_err(KEEL_EINVAL, errmsg, "vote too long");
    }
    op = store__op_new(OP_HARD_STATE);
    op->last_term = term;
    if (vote_len > 0) {
        memcpy(op->vote, vote, vote_len);
    }
    op->vote_len = vote_len;
    pthread_mutex_lock(&g->s->mu);
    store__op_push(g, op);
    store__schedule(g->s, g);
    pthread_mutex_unlock(&g->s->mu);
    return 0;
}

int store_snapshot_record(struct store_group *g, uint64_t index, uint64_t term,
                          char *errmsg)
{
    struct store_meta_snap sn = g->snap;
    int rv;

    ASSERT(g != NULL);
    ASSERT(index >= g->snap.index);
    if (index == g->snap.index) {
        return 0;
    }
    pthread_mutex_lock(&g->s->mu);
    bool persisted = index <= g->persisted_index;
    pthread_mutex_unlock(&g->s->mu);
    if (!persisted) {
        /* §5: a snapshot at X only after entries <= X are persisted. */
        return keel_err(KEEL_EAGAIN, errmsg,
                        "snapshot at %llu before its entries are persisted",
                        (unsigned long long)index);
    }
    sn.older_index = g->snap.index;
    sn.older_term = g->snap.term;
    sn.index = index;
    sn.term = term;
    rv = store_meta_snap_put(g->s->meta, g->id.b, &sn, errmsg);
    if (rv != 0) {
        store__fatal(g->s, "record snapshot", errmsg);
    }
    g->snap = sn;
    return 0;
}

int store_prefix_drop_check(uint64_t upto, uint64_t older_index,
                            const char *older_what, char *errmsg)
{
    ASSERT(older_what != NULL);
    if (older_index == 0 || upto > older_index) {
        return keel_err(KEEL_EPERM, errmsg,
                        "prefix drop to %llu refused: the older %s snapshot "
                        "is at %llu; take another snapshot first",
                        (unsigned long long)upto, older_what,
                        (unsigned long long)older_index);
    }
    return 0;
}

int store_drop_prefix(struct store_group *g, uint64_t upto, char *errmsg)
{
    size_t drop = 0;

    ASSERT(g != NULL);
    ASSERT(g->nsegs <= STORE_SEGMENTS_PER_GROUP_MAX);
    int rv = store_prefix_drop_check(upto, g->snap.older_index, "kept", errmsg);
    if (rv != 0) {
        return rv;
    }
    /* Whole segments only, never the last one. */
    while (drop + 1 < g->nsegs && g->segs[drop + 1]->base <= upto + 1 &&
           g->segs[drop]->state == SEG_LIVE) {
        drop++;
    }
    if (drop == 0) {
        return 0;
    }
    uint64_t new_first = g->segs[drop]->base;
    pthread_mutex_lock(&g->s->mu);
    for (size_t i = 0; i < drop; i++) {
        struct op *op = store__op_new(OP_DELETE_SEG);
        op->seg = g->segs[i];
        store__op_push(g, op);
    }
    memmove(g->segs, g->segs + drop, (g->nsegs - drop) * sizeof *g->segs);
    g->nsegs -= drop;
    size_t gone = (size_t)(new_first - g->first_index);
    gone = gone > g->nents ? g->nents : gone;
    memmove(g->ents, g->ents + gone, (g->nents - gone) * sizeof *g->ents);
    g->nents -= gone;
    g->first_index = new_first;
    store__schedule(g->s, g);
    pthread_mutex_unlock(&g->s->mu);
    return 0;
}

int store_amnesia_enter(struct store_group *g, uint64_t t0, uint64_t target,
                        char *errmsg)
{
    struct store_meta_amnesia a = {STORE_AMNESIA_RECORDED, t0, target};
    int rv;

    ASSERT(g != NULL);
    ASSERT(g->s->meta != NULL);
    rv = store_meta_amnesia_put(g->s->meta, g->id.b, &a, errmsg);
    if (rv != 0) {
        store__fatal(g->s, "record amnesia", errmsg);
    }
    g->amnesia = true;
    return 0;
}

int store_amnesia_clear(struct store_group *g, char *errmsg)
{
    int rv;

    ASSERT(g != NULL);
    ASSERT(g->s->meta != NULL);
    rv = store_meta_amnesia_del(g->s->meta, g->id.b, errmsg);
    if (rv != 0) {
        store__fatal(g->s, "clear amnesia", errmsg);
    }
    g->amnesia = false;
    return 0;
}

int store_recover_wait_set(struct store_group *g, uint64_t term, char *errmsg)
{
    ASSERT(g != NULL);
    ASSERT(g->s->meta != NULL);
    int rv =
        term > 0
            ? store_meta_recover_wait_put(g->s->meta, g->id.b, term, errmsg)
            : store_meta_recover_wait_del(g->s->meta, g->id.b, errmsg);
    if (rv != 0) {
        store__fatal(g->s, "record the recover wait", errmsg);
    }
    return 0;
}

int store_recover_wait_get(struct store_group *g, uint64_t *term)
{
    ASSERT(g != NULL);
    ASSERT(g->s->meta != NULL);
    return store_meta_recover_wait_get(g->s->meta, g->id.b, term);
}

static size_t group_events(struct store_group *g, struct store_event *evs,
                           size_t max)
{
    size_t n = 0;

    ASSERT(g != NULL);
    ASSERT(max >= 4);
    if (g->ev_persisted) {
        evs[n++] = (struct store_event){STORE_EV_PERSISTED, g,
                                        g->persisted_index, g->persisted_term};
        g->ev_persisted = false;
    }
    if (g->ev_hard_state) {
        evs[n++] = (struct store_event){STORE_EV_HARD_STATE, g, g->hs_done,
                                        g->hs_event_term};
        g->ev_hard_state = false;
    }
    if (g->ev_repaired) {
        evs[n++] = (struct store_event){STORE_EV_REPAIRED, g, g->repaired_from,
                                        g->repaired_to};
        g->ev_repaired = false;
    }
    if (g->enospc && !g->enospc_reported) {
        evs[n++] = (struct store_event){STORE_EV_ENOSPC, g, 0, 0};
        g->enospc_reported = true;
    } else if (!g->enospc && !g->space_reported) {
        evs[n++] = (struct store_event){STORE_EV_SPACE, g, 0, 0};
        g->space_reported = true;
    }
    return n;
}

size_t store_poll(struct store *s, struct store_event *evs, size_t max)
{
    size_t n = 0;

    ASSERT(s != NULL);
    ASSERT(evs != NULL || max == 0);
    pthread_mutex_lock(&s->mu);
    while (s->q[STORE__Q_EVENT].head != NULL && max - n >= 4) {
        struct store_group *g = store__gq_pop(s, STORE__Q_EVENT);
        g->ev_queued = false;
        n += group_events(g, evs + n, max - n);
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

void store_stats(struct store *s, struct store_stats *out)
{
    ASSERT(s != NULL);
    ASSERT(out != NULL);
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}

void store_debug_kill(struct store *s)
{
    ASSERT(s != NULL);
    __atomic_store_n(&s->dead, 1, __ATOMIC_RELEASE);
    ASSERT(store__dead(s));
}

void store_debug_no_zeroing(struct store *s, bool on)
{
    ASSERT(s != NULL);
    s->no_zeroing = on;
    ASSERT(s->no_zeroing == on);
}

int store_debug_segment_path(struct store_group *g, uint64_t index, char *out,
                             size_t cap, uint64_t *off)
{
    ASSERT(g != NULL);
    ASSERT(out != NULL);
    if (g->nents == 0 || index < g->first_index ||
        index > store__last_index(g)) {
        return KEEL_ENOENT;
    }
    struct ient *e = store__ent(g, index);
    store__seg_path(g, e->seg->base, out, cap);
    if (off != NULL) {
        *off = e->off;
    }
    return 0;
}

struct store_meta *store_debug_meta(struct store *s)
{
    ASSERT(s != NULL);
    ASSERT(s->meta != NULL);
    return s->meta;
}
