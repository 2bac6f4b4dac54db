/* srv_consumer_state: the replicated consumer state machine — entry codec,
 * apply (create / delete / ack batch with the retention effect) and the
 * snapshot bytes of a stream's consumers. Deterministic: positions come
 * from the entries and from the applied stream only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/bytebuf.h"
#include "keel/error.h"
#include "keel/grow.h"
#include "keel/sorted.h"
#include "srv_consumer_sm.h"

#define CSM_VERSION 1

/* ---- byte writer / reader (keel/bytebuf.h) ---- */

static void w_str(struct keel_wbuf *w, const char *s)
{
    keel_wbuf_str(w, s, strlen(s));
}

/* A string of at most max bytes, copied NUL-terminated into dst. */
static void r_str(struct keel_rbuf *r, char *dst, size_t max)
{
    size_t n = 0;
    const char *s = keel_rbuf_str(r, &n);
    if (s == NULL || n > max) {
        r->bad = true;
        dst[0] = '\0';
        return;
    }
    memcpy(dst, s, n);
    dst[n] = '\0';
}

/* A JSON text (bounded by the payload) parsed into a new object. */
static json_t *r_json(struct keel_rbuf *r)
{
    size_t n = 0;
    const char *s = keel_rbuf_str(r, &n);
    if (s == NULL) {
        return NULL;
    }
    json_error_t e;
    json_t *j = json_loadb(s, n, 0, &e);
    if (j == NULL) {
        r->bad = true;
    }
    return j;
}

static int w_finish(struct keel_wbuf *w, uint8_t **out, uint32_t *len,
                    char *errmsg)
{
    if (w->oom || w->len > UINT32_MAX) {
        free(w->p);
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory encoding entry");
    }
    *out = w->p;
    *len = (uint32_t)w->len;
    return 0;
}

static void w_config(struct keel_wbuf *w, const struct srv_consumer_config *cfg)
{
    json_t *j = NULL;
    if (srv_consumer_config_encode(cfg, &j, NULL) != 0) {
        w->oom = true;
        return;
    }
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (text == NULL) {
        w->oom = true;
        return;
    }
    w_str(w, text);
    free(text);
}

/* ---- entries ---- */

int srv_csm_encode_create(const struct srv_consumer_config *cfg,
                          enum srv_csm_action action, int64_t ts_ns,
                          uint8_t **out, uint32_t *len, char *errmsg)
{
    ASSERT(cfg->name[0] != '\0');
    ASSERT(action <= SRV_CSM_UPDATE);
    struct keel_wbuf w = {0};
    keel_wbuf_u8(&w, CSM_VERSION);
    keel_wbuf_u8(&w, (uint8_t)action);
    keel_wbuf_u64(&w, (uint64_t)ts_ns);
    w_str(&w, cfg->name);
    w_config(&w, cfg);
    return w_finish(&w, out, len, errmsg);
}

int srv_csm_encode_delete(const char *name, uint8_t **out, uint32_t *len,
                          char *errmsg)
{
    ASSERT(name[0] != '\0');
    struct keel_wbuf w = {0};
    keel_wbuf_u8(&w, CSM_VERSION);
    w_str(&w, name);
    return w_finish(&w, out, len, errmsg);
}

int srv_csm_encode_acks(const char *name, struct srv_csm_pos delivered,
                        const struct srv_csm_ack *acks, uint32_t n,
                        uint8_t **out, uint32_t *len, char *errmsg)
{
    ASSERT(name[0] != '\0');
    ASSERT(n <= SRV_CONSUMER_ENTRY_ACKS_MAX);
    struct keel_wbuf w = {0};
    keel_wbuf_u8(&w, CSM_VERSION);
    w_str(&w, name);
    keel_wbuf_u64(&w, delivered.cseq);
    keel_wbuf_u64(&w, delivered.sseq);
    keel_wbuf_u64(&w, n);
    for (uint32_t i = 0; i < n; i++) {
        keel_wbuf_u64(&w, acks[i].sseq);
        keel_wbuf_u64(&w, acks[i].cseq);
        keel_wbuf_u8(&w, acks[i].kind);
    }
    return w_finish(&w, out, len, errmsg);
}

/* ---- the set ---- */

void srv_csm_set_init(struct srv_csm_set *s)
{
    memset(s, 0, sizeof *s);
}

static void csm_free(struct srv_csm *c)
{
    if (c == NULL) {
        return;
    }
    srv_consumer_config_free(&c->cfg);
    free(c->acked);
    free(c->pend);
    free(c);
}

void srv_csm_set_close(struct srv_csm_set *s)
{
    for (uint32_t i = 0; i < s->n; i++) {
        csm_free(s->v[i]);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Index of name in s, or where it would go (*found false). */
static uint32_t set_pos(const struct srv_csm_set *s, const char *name,
                        bool *found)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int cmp = strcmp(s->v[mid]->name, name);
        if (cmp == 0) {
            *found = true;
            return mid;
        }
        if (cmp < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *found = false;
    return lo;
}

struct srv_csm *srv_csm_find(const struct srv_csm_set *s, const char *name)
{
    bool found = false;
    uint32_t i = set_pos(s, name, &found);
    return found ? s->v[i] : NULL;
}

static int set_insert(struct srv_csm_set *s, struct srv_csm *c)
{
    bool found = false;
    uint32_t i = set_pos(s, c->name, &found);
    ASSERT(!found);
    if (keel_grow_u32(&s->v, &s->cap, s->n, sizeof *s->v, 8) != 0) {
        return KEEL_ENOMEM;
    }
    memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
    s->v[i] = c;
    s->n++;
    return 0;
}

static void set_remove(struct srv_csm_set *s, const char *name)
{
    bool found = false;
    uint32_t i = set_pos(s, name, &found);
    ASSERT(found);
    csm_free(s->v[i]);
    memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
    s->n--;
}

/* ---- wanted / acked ---- */

bool srv_csm_wants(const struct srv_csm *c, const struct srv_csm_stream *st,
                   uint64_t seq)
{
    char subj[SRV_JS_SUBJECT_BYTES_MAX + 1];
    if (st->subject(st->ctx, seq, subj) != 0) {
        return false;
    }
    if (!srv_consumer_config_matches(&c->cfg, subj)) {
        return false;
    }
    if (seq <= c->lps_end) {
        uint64_t last = 0;
        return st->last_for_subject(st->ctx, subj, &last) == 0 && last == seq;
    }
    return true;
}

int srv_csm_next_wanted(const struct srv_csm *c,
                        const struct srv_csm_stream *st, uint64_t from,
                        uint64_t *seq)
{
    char *const *filters = NULL;
    uint32_t n = 0;
    srv_consumer_config_filters(&c->cfg, &filters, &n);
    uint64_t first = 0, last = 0;
    st->bounds(st->ctx, &first, &last);
    /* Each round moves from forward; bounded by the stream's seq range. */
    for (uint64_t i = 0; from <= last && i <= last - first + 1; i++) {
        uint64_t s = 0;
        if (st->next_seq(st->ctx, from, filters, n, &s) != 0) {
            return KEEL_ENOENT;
        }
        if (s > c->lps_end || srv_csm_wants(c, st, s)) {
            *seq = s;
            return 0;
        }
        from = s + 1;
    }
    return KEEL_ENOENT;
}

uint64_t srv_csm_num_pending(const struct srv_csm *c,
                             const struct srv_csm_stream *st, uint64_t after,
                             uint64_t limit)
{
    uint64_t n = 0, s = 0, from = after + 1;
    while (n < limit && srv_csm_next_wanted(c, st, from, &s) == 0) {
        n++;
        from = s + 1;
    }
    return n;
}

static uint32_t acked_pos(const struct srv_csm *c, uint64_t sseq, bool *found)
{
    return (uint32_t)keel_sorted_find(c->acked, c->nacked, sizeof *c->acked,
                                      offsetof(struct srv_csm_pos, sseq), sseq,
                                      found);
}

bool srv_csm_is_acked(const struct srv_csm *c, uint64_t seq)
{
    bool found = false;
    if (seq <= c->ack_floor.sseq) {
        return true;
    }
    (void)acked_pos(c, seq, &found);
    return found;
}

/* Add pos above the floor to the acked set (no-op when already acked).
 * Returns 0, KEEL_ELIMIT or KEEL_ENOMEM. */
static int acked_add(struct srv_csm *c, struct srv_csm_pos pos, bool *added)
{
    bool found = false;
    *added = false;
    if (pos.sseq <= c->ack_floor.sseq) {
        return 0;
    }
    uint32_t i = acked_pos(c, pos.sseq, &found);
    if (found) {
        return 0;
    }
    if (c->nacked >= SRV_CONSUMER_ACKED_MAX) {
        return KEEL_ELIMIT;
    }
    if (keel_grow_u32(&c->acked, &c->acked_cap, c->nacked, sizeof *c->acked,
                      16) != 0) {
        return KEEL_ENOMEM;
    }
    memmove(c->acked + i + 1, c->acked + i, (c->nacked - i) * sizeof *c->acked);
    c->acked[i] = pos;
    c->nacked++;
    *added = true;
    return 0;
}

/* Move the floor to pos and drop acked entries at or below it. */
static void floor_set(struct srv_csm *c, struct srv_csm_pos pos)
{
    if (pos.sseq <= c->ack_floor.sseq) {
        return;
    }
    c->ack_floor = pos;
    uint32_t k = 0;
    while (k < c->nacked && c->acked[k].sseq <= pos.sseq) {
        k++;
    }
    if (k > 0) {
        memmove(c->acked, c->acked + k, (c->nacked - k) * sizeof *c->acked);
        c->nacked -= k;
    }
}

/* Advance the floor over acked seqs that are the next wanted ones: a seq
 * the consumer does not want (filtered out, deleted) never blocks it. */
static void floor_advance(struct srv_csm *c, const struct srv_csm_stream *st)
{
    /* Each round removes one acked entry. */
    for (uint32_t i = 0; c->nacked > 0 && i <= SRV_CONSUMER_ACKED_MAX; i++) {
        uint64_t next = 0;
        int rv = srv_csm_next_wanted(c, st, c->ack_floor.sseq + 1, &next);
        if (rv == 0 && next < c->acked[0].sseq) {
            return; /* a wanted seq below the first ack is unacked */
        }
        floor_set(c, c->acked[0]);
    }
}

/* ---- retention ---- */

/* Interest: seq goes once every consumer that wants it has acked it.
 * Workqueue: it goes on the first ack (filters may not overlap). */
static void retention_check(struct srv_csm_set *s,
                            const struct srv_csm_stream *st, uint64_t seq,
                            struct srv_csm_result *res)
{
    if (st->retention == SRV_JS_RETENTION_LIMITS) {
        return;
    }
    if (st->retention == SRV_JS_RETENTION_INTEREST) {
        for (uint32_t i = 0; i < s->n; i++) {
            if (!srv_csm_is_acked(s->v[i], seq) &&
                srv_csm_wants(s->v[i], st, seq)) {
                return;
            }
        }
    }
    st->remove(st->ctx, seq);
    res->removed_msgs++;
}

/* Every stored seq >= from: drop those no remaining consumer holds. */
static void retention_sweep(struct srv_csm_set *s,
                            const struct srv_csm_stream *st, uint64_t from,
                            struct srv_csm_result *res)
{
    uint64_t first = 0, last = 0, seq = 0;
    st->bounds(st->ctx, &first, &last);
    for (uint64_t i = 0; from <= last && i <= last - first + 1; i++) {
        if (st->next_seq(st->ctx, from, NULL, 0, &seq) != 0) {
            return;
        }
        retention_check(s, st, seq, res);
        from = seq + 1;
    }
}

void srv_csm_on_stored(struct srv_csm_set *s, const struct srv_csm_stream *st,
                       uint64_t seq)
{
    struct srv_csm_result res;
    memset(&res, 0, sizeof res);
    if (st->retention == SRV_JS_RETENTION_INTEREST) {
        retention_check(s, st, seq, &res);
    }
}

/* ---- apply ---- */

static void result_err(struct srv_csm_result *res, enum srv_js_err e,
                       const char *detail)
{
    res->jerr = e;
    snprintf(res->detail, sizeof res->detail, "%s",
             detail != NULL ? detail : "");
}

/* The floor of a new consumer from its deliver policy, against the stream
 * as applied at the CREATE entry (so every replica computes the same). */
static void initial_floor(struct srv_csm *c, const struct srv_csm_stream *st)
{
    uint64_t first = 0, last = 0, seq = 0;
    st->bounds(st->ctx, &first, &last);
    uint64_t floor = first > 0 ? first - 1 : last;
    switch (c->cfg.deliver_policy) {
    case SRV_DELIVER_NEW:
        floor = last;
        break;
    case SRV_DELIVER_LAST: {
        uint64_t s = 0, from = first, found = 0;
        while (srv_csm_next_wanted(c, st, from, &s) == 0) {
            found = s;
            from = s + 1;
        }
        floor = found > 0 ? found - 1 : last;
        break;
    }
    case SRV_DELIVER_BY_START_SEQ:
        floor = c->cfg.opt_start_seq - 1;
        break;
    case SRV_DELIVER_BY_START_TIME:
        floor = st->seq_at_time(st->ctx, c->cfg.opt_start_time_ns, &seq) == 0
                    ? seq - 1
                    : last;
        break;
    case SRV_DELIVER_LAST_PER_SUBJECT:
        c->lps_end = last;
        break;
    case SRV_DELIVER_ALL:
    default:
        break;
    }
    c->ack_floor = (struct srv_csm_pos){0, floor};
    c->delivered = c->ack_floor;
    c->live = c->ack_floor;
}

/* Workqueue streams: pull consumers ack explicitly, and no two consumers
 * may want the same subject (a message goes on its first ack). */
static bool workqueue_ok(const struct srv_csm_set *s,
                         const struct srv_csm_stream *st,
                         const struct srv_consumer_config *cfg,
                         struct srv_csm_result *res)
{
    if (st->retention != SRV_JS_RETENTION_WORKQUEUE) {
        return true;
    }
    if (cfg->deliver_subject == NULL && cfg->ack_policy != SRV_ACKP_EXPLICIT) {
        result_err(res, SRV_JS_EWORKQUEUE_ACK, NULL);
        return false;
    }
    char *const *a = NULL, *const *b = NULL;
    uint32_t na = 0, nb = 0;
    srv_consumer_config_filters(cfg, &a, &na);
    for (uint32_t i = 0; i < s->n; i++) {
        if (strcmp(s->v[i]->name, cfg->name) == 0) {
            continue;
        }
        srv_consumer_config_filters(&s->v[i]->cfg, &b, &nb);
        /* nats-server's two answers: an unfiltered consumer beside any
         * other (10099), or two filters that overlap (10100). */
        if (na == 0 || nb == 0) {
            result_err(res, SRV_JS_EWQ_MULTIPLE_UNFILTERED, NULL);
            return false;
        }
        if (srv_js_subject_lists_overlap(a, na, b, nb)) {
            result_err(res, SRV_JS_EWQ_NOT_UNIQUE, NULL);
            return false;
        }
    }
    return true;
}

static int apply_new(struct srv_csm_set *s, const struct srv_csm_stream *st,
                     struct srv_consumer_config *cfg, int64_t ts,
                     struct srv_csm_result *res)
{
    if (s->n >= SRV_CONSUMERS_PER_STREAM_MAX) {
        result_err(res, SRV_JS_EMAX_CONSUMERS, NULL);
        return 0;
    }
    if (!workqueue_ok(s, st, cfg, res)) {
        return 0;
    }
    struct srv_csm *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return KEEL_ENOMEM;
    }
    c->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg); /* moved */
    memcpy(c->name, c->cfg.name, sizeof c->name);
    c->created_ns = ts;
    initial_floor(c, st);
    if (set_insert(s, c) != 0) {
        csm_free(c);
        return KEEL_ENOMEM;
    }
    res->c = c;
    res->created = true;
    return 0;
}

static int apply_create(struct srv_csm_set *s, const struct srv_csm_stream *st,
                        struct keel_rbuf *r, struct srv_csm_result *res,
                        char *errmsg)
{
    uint8_t action = keel_rbuf_u8(r);
    int64_t ts = (int64_t)keel_rbuf_u64(r);
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    r_str(r, name, SRV_JS_NAME_BYTES_MAX);
    json_t *j = r_json(r);
    struct srv_consumer_config cfg;
    memset(&cfg, 0, sizeof cfg);
    enum srv_js_err jerr = SRV_JS_OK;
    if (r->bad || action > SRV_CSM_UPDATE ||
        srv_consumer_config_parse(j, &cfg, &jerr, NULL) != 0 ||
        strcmp(cfg.name, name) != 0) {
        json_decref(j);
        srv_consumer_config_free(&cfg);
        return keel_err(KEEL_ECORRUPT, errmsg, "bad consumer create entry");
    }
    json_decref(j);
    memcpy(res->name, name, sizeof res->name);
    int rv = 0;
    struct srv_csm *c = srv_csm_find(s, name);
    if (c == NULL && action == SRV_CSM_UPDATE) {
        result_err(res, SRV_JS_ECONSUMER_DOES_NOT_EXIST, NULL);
    } else if (c == NULL) {
        rv = apply_new(s, st, &cfg, ts, res);
    } else if (srv_consumer_config_equal(&c->cfg, &cfg)) {
        res->c = c;
    } else if (action == SRV_CSM_CREATE) {
        result_err(res, SRV_JS_ECONSUMER_EXISTS, NULL);
    } else if (srv_consumer_config_update_check(&c->cfg, &cfg, &jerr,
                                                res->detail) != 0) {
        res->jerr = jerr;
    } else if (workqueue_ok(s, st, &cfg, res)) {
        srv_consumer_config_free(&c->cfg);
        c->cfg = cfg;
        memset(&cfg, 0, sizeof cfg);
        res->c = c;
    }
    srv_consumer_config_free(&cfg);
    return rv;
}

/* The consumer an entry names, with its name in res; NULL (and res's
 * error "consumer not found") when there is none: the entry then changes
 * nothing. */
static struct srv_csm *entry_consumer(struct srv_csm_set *s, const char *name,
                                      struct srv_csm_result *res)
{
    struct srv_csm *c = srv_csm_find(s, name);

    memcpy(res->name, name, sizeof res->name);
    if (c == NULL) {
        result_err(res, SRV_JS_ECONSUMER_NOT_FOUND, NULL);
    }
    return c;
}

static int apply_delete(struct srv_csm_set *s, const struct srv_csm_stream *st,
                        struct keel_rbuf *r, struct srv_csm_result *res,
                        char *errmsg)
{
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    r_str(r, name, SRV_JS_NAME_BYTES_MAX);
    if (r->bad) {
        return keel_err(KEEL_ECORRUPT, errmsg, "bad consumer delete entry");
    }
    struct srv_csm *c = entry_consumer(s, name, res);
    if (c == NULL) {
        return 0;
    }
    uint64_t from = c->ack_floor.sseq + 1;
    set_remove(s, name);
    res->deleted = true;
    if (st->retention == SRV_JS_RETENTION_INTEREST) {
        retention_sweep(s, st, from, res);
    }
    return 0;
}

/* Ack every wanted seq in (floor, pos] (ack policy all). */
static void ack_upto(struct srv_csm_set *s, struct srv_csm *c,
                     const struct srv_csm_stream *st, struct srv_csm_pos pos,
                     struct srv_csm_result *res)
{
    if (pos.sseq <= c->ack_floor.sseq) {
        return;
    }
    uint64_t from = c->ack_floor.sseq + 1, seq = 0;
    floor_set(c, pos);
    for (uint32_t i = 0; i < c->pend_len; i++) {
        if (c->pend[i].sseq != 0 && c->pend[i].sseq <= pos.sseq) {
            srv_csm_pending_del(c, c->pend[i].sseq);
        }
    }
    if (st->retention == SRV_JS_RETENTION_LIMITS) {
        return;
    }
    while (srv_csm_next_wanted(c, st, from, &seq) == 0 && seq <= pos.sseq) {
        retention_check(s, st, seq, res);
        from = seq + 1;
    }
}

static int apply_one_ack(struct srv_csm_set *s, struct srv_csm *c,
                         const struct srv_csm_stream *st,
                         const struct srv_csm_ack *a,
                         struct srv_csm_result *res)
{
    struct srv_csm_pos pos = {a->cseq, a->sseq};
    if (a->kind == SRV_CSM_ACK_UPTO) {
        ack_upto(s, c, st, pos, res);
        return 0;
    }
    bool added = false;
    int rv = acked_add(c, pos, &added);
    if (rv != 0) {
        return rv;
    }
    srv_csm_pending_del(c, a->sseq);
    if (added) {
        retention_check(s, st, a->sseq, res);
    }
    return 0;
}

static int apply_acks(struct srv_csm_set *s, const struct srv_csm_stream *st,
                      struct keel_rbuf *r, struct srv_csm_result *res,
                      char *errmsg)
{
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    r_str(r, name, SRV_JS_NAME_BYTES_MAX);
    struct srv_csm_pos d = {keel_rbuf_u64(r), keel_rbuf_u64(r)};
    uint64_t n = keel_rbuf_u64(r);
    if (r->bad || n > SRV_CONSUMER_ENTRY_ACKS_MAX) {
        return keel_err(KEEL_ECORRUPT, errmsg, "bad consumer ack entry");
    }
    struct srv_csm *c = entry_consumer(s, name, res);
    if (c == NULL) {
        return 0;
    }
    res->c = c;
    if (d.sseq > c->delivered.sseq || d.cseq > c->delivered.cseq) {
        c->delivered = d;
    }
    for (uint64_t i = 0; i < n; i++) {
        struct srv_csm_ack a = {keel_rbuf_u64(r), keel_rbuf_u64(r),
                                keel_rbuf_u8(r)};
        if (r->bad || a.kind > SRV_CSM_ACK_TERM || a.sseq == 0) {
            return keel_err(KEEL_ECORRUPT, errmsg, "bad ack in ack entry");
        }
        int rv = apply_one_ack(s, c, st, &a, res);
        if (rv == KEEL_ELIMIT) {
            result_err(res, SRV_JS_EUNAVAILABLE, "too many acks above floor");
            break;
        }
        if (rv != 0) {
            return keel_err(rv, errmsg, "applying an ack");
        }
    }
    if (c->cfg.ack_policy == SRV_ACKP_NONE) {
        floor_set(c, c->delivered);
    }
    floor_advance(c, st);
    return 0;
}

int srv_csm_apply(struct srv_csm_set *s, const struct srv_csm_stream *st,
                  uint8_t kind, const uint8_t *p, uint32_t len,
                  struct srv_csm_result *res, char *errmsg)
{
    memset(res, 0, sizeof *res);
    struct keel_rbuf r = {.p = p, .len = len};
    if (keel_rbuf_u8(&r) != CSM_VERSION) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "consumer entry of an unknown version");
    }
    switch (kind) {
    case SRV_CSM_KIND_CREATE:
        return apply_create(s, st, &r, res, errmsg);
    case SRV_CSM_KIND_DELETE:
        return apply_delete(s, st, &r, res, errmsg);
    case SRV_CSM_KIND_ACKS:
        return apply_acks(s, st, &r, res, errmsg);
    default:
        /* A kind a newer Keel wrote: skip it on every replica alike. */
        return 0;
    }
}

/* ---- snapshot ---- */

static void w_pos(struct keel_wbuf *w, struct srv_csm_pos p)
{
    keel_wbuf_u64(w, p.cseq);
    keel_wbuf_u64(w, p.sseq);
}

int srv_csm_snapshot_encode(const struct srv_csm_set *s, uint8_t **out,
                            uint32_t *len, char *errmsg)
{
    ASSERT(s->n <= SRV_CONSUMERS_PER_STREAM_MAX);
    struct keel_wbuf w = {0};
    keel_wbuf_u8(&w, CSM_VERSION);
    keel_wbuf_u64(&w, s->n);
    for (uint32_t i = 0; i < s->n; i++) {
        const struct srv_csm *c = s->v[i];
        ASSERT(i == 0 || strcmp(s->v[i - 1]->name, c->name) < 0);
        w_str(&w, c->name);
        keel_wbuf_u64(&w, (uint64_t)c->created_ns);
        w_config(&w, &c->cfg);
        w_pos(&w, c->delivered);
        w_pos(&w, c->ack_floor);
        keel_wbuf_u64(&w, c->lps_end);
        keel_wbuf_u64(&w, c->nacked);
        for (uint32_t k = 0; k < c->nacked; k++) {
            w_pos(&w, c->acked[k]);
        }
    }
    if (!w.oom && w.len > SRV_CONSUMER_SNAP_BYTES_MAX) {
        free(w.p);
        return keel_err(KEEL_ETOOBIG, errmsg,
                        "consumer state passes SRV_CONSUMER_SNAP_BYTES_MAX");
    }
    return w_finish(&w, out, len, errmsg);
}

static int decode_one(struct keel_rbuf *r, struct srv_csm *c)
{
    r_str(r, c->name, SRV_JS_NAME_BYTES_MAX);
    c->created_ns = (int64_t)keel_rbuf_u64(r);
    json_t *j = r_json(r);
    enum srv_js_err jerr = SRV_JS_OK;
    if (r->bad || srv_consumer_config_parse(j, &c->cfg, &jerr, NULL) != 0) {
        json_decref(j);
        return KEEL_ECORRUPT;
    }
    json_decref(j);
    c->delivered = (struct srv_csm_pos){keel_rbuf_u64(r), keel_rbuf_u64(r)};
    c->ack_floor = (struct srv_csm_pos){keel_rbuf_u64(r), keel_rbuf_u64(r)};
    c->live = c->delivered;
    c->lps_end = keel_rbuf_u64(r);
    uint64_t n = keel_rbuf_u64(r);
    if (r->bad || n > SRV_CONSUMER_ACKED_MAX || n > (r->len - r->off) / 16) {
        return KEEL_ECORRUPT;
    }
    c->acked = calloc(n > 0 ? n : 1, sizeof *c->acked);
    if (c->acked == NULL) {
        return KEEL_ENOMEM;
    }
    c->acked_cap = n > 0 ? (uint32_t)n : 1;
    for (uint64_t k = 0; k < n; k++) {
        c->acked[k] = (struct srv_csm_pos){keel_rbuf_u64(r), keel_rbuf_u64(r)};
        if (c->acked[k].sseq <=
            (k > 0 ? c->acked[k - 1].sseq : c->ack_floor.sseq)) {
            return KEEL_ECORRUPT; /* must ascend above the floor */
        }
    }
    c->nacked = (uint32_t)n;
    return r->bad ? KEEL_ECORRUPT : 0;
}

int srv_csm_snapshot_decode(struct srv_csm_set *s, const uint8_t *p,
                            uint32_t len, char *errmsg)
{
    srv_csm_set_close(s);
    struct keel_rbuf r = {.p = p, .len = len};
    uint8_t version = keel_rbuf_u8(&r);
    uint64_t n = keel_rbuf_u64(&r);
    int rv = 0;
    if (r.bad || version != CSM_VERSION || n > SRV_CONSUMERS_PER_STREAM_MAX) {
        rv = KEEL_ECORRUPT;
    }
    for (uint64_t i = 0; rv == 0 && i < n; i++) {
        struct srv_csm *c = calloc(1, sizeof *c);
        if (c == NULL) {
            rv = KEEL_ENOMEM;
            break;
        }
        rv = decode_one(&r, c);
        if (rv == 0 &&
            (s->n > 0 && strcmp(s->v[s->n - 1]->name, c->name) >= 0)) {
            rv = KEEL_ECORRUPT; /* names must ascend */
        }
        if (rv == 0) {
            rv = set_insert(s, c);
        }
        if (rv != 0) {
            csm_free(c);
        }
    }
    if (rv == 0 && r.off != r.len) {
        rv = KEEL_ECORRUPT;
    }
    if (rv != 0) {
        srv_csm_set_close(s);
        return keel_err(rv, errmsg, "consumer snapshot does not decode");
    }
    return 0;
}
