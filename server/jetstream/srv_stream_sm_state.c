/* srv_stream_sm_state: the stream state machine proper (apply of publish,
 * purge, delete, config and tick entries; limits; removal). Everything is
 * computed from entry contents; no clock is read here. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/bytebuf.h"
#include "keel/error.h"
#include "keel/limits.h"
#include "keel_stream_entry.h"
#include "srv_stream_sm_int.h"

/* A stream tracks up to SRV_STREAM_MSGS_MAX slots: the TTL fits in
 * them without growing them (decision 0034). */
_Static_assert(sizeof(struct srv_stream_slot) == 32,
               "a stream slot is 32 bytes");

void srv_stream_limits_from_config(const struct srv_stream_config *cfg,
                                   struct srv_stream_limits *out)
{
    *out = (struct srv_stream_limits){
        .retention = cfg->retention,
        .discard = cfg->discard,
        .max_msgs = cfg->max_msgs,
        .max_bytes = cfg->max_bytes,
        .max_msgs_per_subject = cfg->max_msgs_per_subject,
        .max_msg_size = cfg->max_msg_size,
        .max_age_ns = cfg->max_age_ns,
        .duplicate_window_ns = cfg->duplicate_window_ns,
        .deny_delete = cfg->deny_delete,
        .deny_purge = cfg->deny_purge,
        .sealed = cfg->sealed,
        .discard_new_per_subject = cfg->discard_new_per_subject,
        .allow_msg_ttl = cfg->allow_msg_ttl,
        .marker_ttl_ns = cfg->subject_delete_marker_ttl_ns,
    };
}

int srv_stream_sm_init(struct srv_stream_sm *sm, const char *name)
{
    memset(sm, 0, sizeof *sm);
    if (strlen(name) > SRV_JS_NAME_BYTES_MAX) {
        return KEEL_EINVAL;
    }
    strcpy(sm->name, name);
    sm->lim = (struct srv_stream_limits){
        .max_msgs = -1,
        .max_bytes = -1,
        .max_msgs_per_subject = -1,
        .max_msg_size = -1,
        .duplicate_window_ns = SRV_JS_DUPLICATE_WINDOW_NS_DEFAULT,
    };
    sm->base_seq = 1;
    srv_hmap_init(&sm->subjects);
    srv_dedupe_init(&sm->dedupe);
    return 0;
}

void srv_stream_sm_close(struct srv_stream_sm *sm)
{
    srv_hmap_close_free(&sm->subjects);
    srv_dedupe_close(&sm->dedupe);
    free(sm->ring);
    free(sm->last_msg_id);
    free(sm->ttl_heap);
    free(sm->src);
    memset(sm, 0, sizeof *sm);
}

struct srv_stream_slot *srv_stream_sm__slot(const struct srv_stream_sm *sm,
                                            uint64_t seq)
{
    if (seq < sm->base_seq || seq - sm->base_seq >= sm->count) {
        return NULL;
    }
    return &sm->ring[(sm->head + (size_t)(seq - sm->base_seq)) & (sm->cap - 1)];
}

#define slot_at srv_stream_sm__slot

const struct srv_stream_slot *srv_stream_sm_get(const struct srv_stream_sm *sm,
                                                uint64_t seq)
{
    const struct srv_stream_slot *s = slot_at(sm, seq);
    return s != NULL && s->subj != NULL ? s : NULL;
}

uint64_t srv_stream_sm_first_seq(const struct srv_stream_sm *sm)
{
    return sm->count > 0 ? sm->base_seq : sm->last_seq + 1;
}

/* Drop deleted slots at the front so base_seq is the first live seq. */
static void trim_front(struct srv_stream_sm *sm)
{
    /* Bounded by count <= SRV_STREAM_MSGS_MAX. */
    while (sm->count > 0 && sm->ring[sm->head].subj == NULL) {
        sm->head = (sm->head + 1) & (sm->cap - 1);
        sm->count--;
        sm->base_seq++;
        ASSERT(sm->deleted > 0);
        sm->deleted--;
    }
    if (sm->count == 0) {
        sm->base_seq = sm->last_seq + 1;
        sm->head = 0;
    }
}

/* The live seq of subject sj before seq (sj has one: its msgs count it).
 * Exact, not a hint: Nats-Expected-Last-Subject-Sequence and last_by_subj
 * answer from it, and a restored snapshot recomputes it from the live slots
 * (srv_stream_sm_restore), so a replayed replica must hold the same value
 * (docs/design.md §6). */
static uint64_t subj_last_before(const struct srv_stream_sm *sm,
                                 const struct srv_stream_subj *sj, uint64_t seq)
{
    uint64_t low = sj->first_seq < sm->base_seq ? sm->base_seq : sj->first_seq;
    uint64_t q = seq;
    const struct srv_stream_slot *s;
    /* Bounded by count <= SRV_STREAM_MSGS_MAX. */
    do {
        ASSERT(q > low);
        q--;
        s = slot_at(sm, q);
    } while (s == NULL || s->subj != sj);
    return q;
}

int srv_stream_sm_remove(struct srv_stream_sm *sm, uint64_t seq)
{
    struct srv_stream_slot *s = slot_at(sm, seq);
    if (s == NULL || s->subj == NULL) {
        return KEEL_ENOENT;
    }
    struct srv_stream_subj *sj = s->subj;
    ASSERT(sj->msgs > 0 && sm->msgs > 0 && sm->bytes >= s->size);
    if (--sj->msgs == 0) {
        (void)srv_hmap_del(&sm->subjects, sj->s, sj->len);
        free(sj);
    } else if (sj->last_seq == seq) {
        /* Its newest message went (a delete, an interest/workqueue ack):
         * the subject's last is the live one before it. */
        sj->last_seq = subj_last_before(sm, sj, seq);
    } else if (sj->first_seq == seq) {
        sj->first_seq = seq + 1;
    }
    sm->msgs--;
    sm->bytes -= s->size;
    srv_stream_sm__ttl_forget(sm, s);
    s->subj = NULL;
    sm->deleted++;
    trim_front(sm);
    return 0;
}

/* Remove a seq known to be live. */
static void remove_live(struct srv_stream_sm *sm, uint64_t seq)
{
    int rv = srv_stream_sm_remove(sm, seq);
    ASSERT(rv == 0);
}

static int ring_push(struct srv_stream_sm *sm, const struct srv_stream_slot *v)
{
    if (sm->count == sm->cap) {
        size_t ncap = sm->cap == 0 ? 64 : sm->cap * 2;
        if (ncap > SRV_STREAM_MSGS_MAX) {
            return KEEL_ELIMIT;
        }
        struct srv_stream_slot *r = malloc(ncap * sizeof *r);
        if (r == NULL) {
            return KEEL_ENOMEM;
        }
        for (size_t i = 0; i < sm->count; i++) {
            r[i] = sm->ring[(sm->head + i) & (sm->cap - 1)];
        }
        free(sm->ring);
        sm->ring = r;
        sm->cap = ncap;
        sm->head = 0;
    }
    sm->ring[(sm->head + sm->count) & (sm->cap - 1)] = *v;
    sm->count++;
    return 0;
}

/* Deleted slots up to seq - 1, so the ring's next slot is seq: the
 * seqs a purge or a mirror's gap passed after the last stored message
 * (a snapshot holds live slots only). Bounded by SRV_STREAM_MSGS_MAX. */
static int pad_to(struct srv_stream_sm *sm, uint64_t seq)
{
    while (sm->count > 0 && sm->base_seq + sm->count < seq) {
        struct srv_stream_slot d = {0};
        int rv = ring_push(sm, &d);
        if (rv != 0) {
            return rv;
        }
        sm->deleted++;
    }
    return 0;
}

static struct srv_stream_subj *subj_get(struct srv_stream_sm *sm, const char *s,
                                        size_t len)
{
    struct srv_stream_subj *sj = srv_hmap_get(&sm->subjects, s, len);
    if (sj != NULL) {
        return sj;
    }
    sj = calloc(1, sizeof *sj + len + 1);
    if (sj == NULL) {
        return NULL;
    }
    memcpy(sj->s, s, len);
    sj->len = len;
    if (srv_hmap_put(&sm->subjects, sj->s, len, sj) != 0) {
        free(sj);
        return NULL;
    }
    return sj;
}

int srv_stream_sm__store(struct srv_stream_sm *sm, uint64_t index, int64_t ts,
                         const char *subj, size_t slen, uint64_t size)
{
    /* Parts of one log entry, which is under 4 GiB (replica_propose). */
    ASSERT(size <= UINT32_MAX);
    struct srv_stream_subj *sj = subj_get(sm, subj, slen);
    if (sj == NULL) {
        return KEEL_ENOMEM;
    }
    uint64_t seq = sm->last_seq + 1;
    struct srv_stream_slot v = {index, ts, sj, (uint32_t)size, 0};
    if (sm->count == 0) {
        sm->base_seq = seq;
    }
    int rv = pad_to(sm, seq);
    if (rv == 0) {
        rv = ring_push(sm, &v);
    }
    if (rv != 0) {
        if (sj->msgs == 0) {
            (void)srv_hmap_del(&sm->subjects, sj->s, sj->len);
            free(sj);
        }
        return rv;
    }
    if (sj->msgs++ == 0) {
        sj->first_seq = seq;
    }
    sj->last_seq = seq;
    sm->last_seq = seq;
    sm->last_ts_ns = ts;
    sm->msgs++;
    sm->bytes += size;
    return 0;
}

/* First live seq of subject sj at or after its first_seq hint. */
static uint64_t subj_first(struct srv_stream_sm *sm, struct srv_stream_subj *sj)
{
    uint64_t seq = sj->first_seq < sm->base_seq ? sm->base_seq : sj->first_seq;
    /* Bounded by count <= SRV_STREAM_MSGS_MAX. */
    for (; seq <= sj->last_seq; seq++) {
        struct srv_stream_slot *s = slot_at(sm, seq);
        if (s != NULL && s->subj == sj) {
            sj->first_seq = seq;
            return seq;
        }
    }
    return 0;
}

/* Discard old: age and TTLs (srv_stream_sm_ttl.c, which may store
 * subject delete markers), then count, bytes and the subject's count. The
 * subject is looked up after the expiry, which may have removed it. */
static int enforce_limits(struct srv_stream_sm *sm, uint64_t index,
                          int64_t now_ns, const char *subj, size_t slen,
                          struct srv_stream_result *res)
{
    const struct srv_stream_limits *l = &sm->lim;
    int rv = srv_stream_sm__expire(sm, index, now_ns, res);
    if (rv != 0) {
        return rv;
    }
    struct srv_stream_subj *sj =
        subj != NULL ? srv_hmap_get(&sm->subjects, subj, slen) : NULL;
    /* Each loop removes one message per pass: bounded by msgs. */
    while (l->max_msgs > 0 && sm->msgs > (uint64_t)l->max_msgs) {
        remove_live(sm, sm->base_seq);
    }
    while (l->max_bytes > 0 && sm->bytes > (uint64_t)l->max_bytes &&
           sm->count > 0) {
        remove_live(sm, sm->base_seq);
    }
    while (sj != NULL && l->max_msgs_per_subject > 0 &&
           sj->msgs > (uint64_t)l->max_msgs_per_subject) {
        uint64_t first = subj_first(sm, sj);
        ASSERT(first != 0);
        remove_live(sm, first);
    }
    return 0;
}

static int set_detail(struct srv_stream_result *res, enum srv_js_err jerr,
                      const char *detail)
{
    res->jerr = jerr;
    if (detail != NULL) {
        snprintf(res->detail, sizeof res->detail, "%s", detail);
    }
    return 0;
}

/* Refusals before storing: size, expectations, dedupe, discard new.
 * Returns true when the publish is answered without storing. */
static bool publish_refused(struct srv_stream_sm *sm,
                            const struct keel_stream_entry *e, uint64_t size,
                            const char *id, size_t id_len,
                            struct srv_stream_result *res)
{
    const struct srv_stream_limits *l = &sm->lim;
    if (l->sealed) {
        set_detail(res, SRV_JS_ESEALED, NULL);
        return true;
    }
    if (l->max_msg_size >= 0 &&
        e->hdr_len + e->data_len > (uint64_t)l->max_msg_size) {
        set_detail(res, SRV_JS_EMSG_SIZE, NULL);
        return true;
    }
    struct srv_stream_subj *sj =
        srv_hmap_get(&sm->subjects, e->subject, e->subject_len);
    struct srv_stream_expect_state st = {
        .stream = sm->name,
        .last_seq = sm->last_seq,
        .subject_last_seq = sj != NULL ? sj->last_seq : 0,
        .last_msg_id = sm->last_msg_id,
    };
    if (srv_stream_check_expect(&st, (const char *)e->hdr, e->hdr_len,
                                &res->jerr, res->detail) != 0) {
        return true;
    }
    /* Also here, not only on the leader: a publish checked against a
     * config that allows TTLs may apply before that config's entry. */
    int64_t ttl = 0;
    int tv = srv_msg_ttl_of((const char *)e->hdr, e->hdr_len, &ttl);
    if ((tv != 0 || ttl != 0) && !l->allow_msg_ttl) {
        set_detail(res, SRV_JS_ETTL_DISABLED, NULL);
        return true;
    }
    if (tv != 0) {
        set_detail(res, SRV_JS_ETTL_INVALID, NULL);
        return true;
    }
    srv_dedupe_expire(&sm->dedupe, e->ts_ns, l->duplicate_window_ns);
    uint64_t dup = id_len > 0 ? srv_dedupe_find(&sm->dedupe, id, id_len) : 0;
    if (dup != 0) {
        res->seq = dup;
        res->duplicate = true;
        return true;
    }
    if (l->discard == SRV_JS_DISCARD_NEW && l->max_msgs > 0 &&
        sm->msgs + 1 > (uint64_t)l->max_msgs) {
        set_detail(res, SRV_JS_EMAX_MSGS, NULL);
        return true;
    }
    if (l->discard == SRV_JS_DISCARD_NEW && l->discard_new_per_subject &&
        l->max_msgs_per_subject > 0 && sj != NULL &&
        sj->msgs >= (uint64_t)l->max_msgs_per_subject) {
        set_detail(res, SRV_JS_EMAX_MSGS_PER_SUBJECT, NULL);
        return true;
    }
    if (l->discard == SRV_JS_DISCARD_NEW && l->max_bytes > 0 &&
        sm->bytes + size > (uint64_t)l->max_bytes) {
        set_detail(res, SRV_JS_EMAX_BYTES, NULL);
        return true;
    }
    return false;
}

/* The last stored message's Nats-Msg-Id, copied by length (a header
 * value may hold a NUL byte); n == 0 clears it. */
static int set_last_msg_id(struct srv_stream_sm *sm, const char *id, size_t n)
{
    free(sm->last_msg_id);
    sm->last_msg_id = NULL;
    sm->last_msg_id_len = 0;
    if (n == 0) {
        return 0;
    }
    sm->last_msg_id = srv_hmap_memdupz(id, n);
    if (sm->last_msg_id == NULL) {
        return KEEL_ENOMEM;
    }
    sm->last_msg_id_len = n;
    return 0;
}

/* Store e's message at the next seq with timestamp ts and its
 * Nats-TTL: res says which seq it took. */
static int store_entry(struct srv_stream_sm *sm, uint64_t index, int64_t ts,
                       const struct keel_stream_entry *e,
                       struct srv_stream_result *res)
{
    uint64_t size = e->subject_len + e->hdr_len + e->data_len;
    int rv =
        srv_stream_sm__store(sm, index, ts, e->subject, e->subject_len, size);
    if (rv == 0) {
        rv = srv_stream_sm__ttl_set(sm, sm->last_seq, (const char *)e->hdr,
                                    e->hdr_len);
    }
    if (rv == 0) {
        res->seq = sm->last_seq;
        res->stored = true;
    }
    return rv;
}

int srv_stream_sm__publish(struct srv_stream_sm *sm, uint64_t index,
                           const struct keel_stream_entry *e,
                           struct srv_stream_result *res)
{
    const char *id = NULL;
    size_t id_len = 0;
    uint64_t size = e->subject_len + e->hdr_len + e->data_len;
    if (e->hdr_len > 0 && srv_nats_hdr_get((const char *)e->hdr, e->hdr_len,
                                           "Nats-Msg-Id", &id, &id_len) != 0) {
        id_len = 0;
    }
    if (publish_refused(sm, e, size, id, id_len, res)) {
        return 0;
    }
    int64_t ts = e->ts_ns > sm->last_ts_ns ? e->ts_ns : sm->last_ts_ns;
    int rv = store_entry(sm, index, ts, e, res);
    if (rv != 0) {
        return rv;
    }
    rv = set_last_msg_id(sm, id, id_len);
    if (rv == 0 && id_len > 0) {
        rv = srv_dedupe_add(&sm->dedupe, id, id_len, ts, res->seq);
    }
    if (rv != 0) {
        return rv;
    }
    return enforce_limits(sm, index, ts, e->subject, e->subject_len, res);
}

/* A mirrored message at its origin seq: idempotent by origin seq, so a
 * message a new leader's pump sends again is skipped, never stored twice
 * (docs/decisions/0032-mirrors-pull-into-the-log.md). Seqs between the
 * last one and origin_seq become deleted seqs; the origin's timestamp is
 * kept. */
static int apply_mirror(struct srv_stream_sm *sm, uint64_t index,
                        const struct keel_stream_entry *e,
                        struct srv_stream_result *res)
{
    if (sm->promoted) {
        /* Read before the promotion, committed after it: the stream's
         * seqs are its own now (docs/jetstream-config.md, "Mirrors"). */
        res->seq = e->seq;
        res->duplicate = true;
        return 0;
    }
    sm->mirror_cfg = true; /* also with no CONFIG entry applied yet */
    if (e->seq <= sm->mirror_pos) {
        res->seq = e->seq;
        res->duplicate = true;
        return 0;
    }
    sm->mirror_pos = e->seq;
    sm->mirror_lost += e->lost;
    if (e->seq <= sm->last_seq) {
        /* Passed by a purge to a later seq on the mirror: not stored. */
        res->seq = e->seq;
        res->duplicate = true;
        return 0;
    }
    if (e->subject_len == 0) {
        /* Position only: the origin holds nothing the mirror stores up to
         * here. */
        sm->last_seq = e->seq;
        trim_front(sm);
        return pad_to(sm, e->seq + 1);
    }
    sm->last_seq = e->seq - 1;
    trim_front(sm);
    int rv = store_entry(sm, index, e->ts_ns, e, res);
    if (rv != 0) {
        return rv;
    }
    ASSERT(res->seq == e->seq);
    /* Its own origin timestamp, not the entry's: an old origin message
     * ages as on the origin. */
    return enforce_limits(sm, index, e->ts_ns, e->subject, e->subject_len, res);
}

/* Is live slot s (at seq) chosen by the purge's filter? */
static bool purge_match(const struct keel_stream_entry *e,
                        const struct srv_stream_slot *s)
{
    if (e->subject_len == 0) {
        return true;
    }
    char f[SRV_JS_SUBJECT_BYTES_MAX + 1];
    if (e->subject_len > SRV_JS_SUBJECT_BYTES_MAX) {
        return false;
    }
    memcpy(f, e->subject, e->subject_len);
    f[e->subject_len] = '\0';
    return srv_js_subject_matches(f, s->subj->s);
}

static int apply_purge(struct srv_stream_sm *sm,
                       const struct keel_stream_entry *e,
                       struct srv_stream_result *res)
{
    if (sm->lim.deny_purge) {
        return set_detail(res, SRV_JS_EBAD_REQUEST,
                          "stream purge not "
                          "permitted");
    }
    uint64_t matching = 0, first = sm->base_seq, last = sm->last_seq;
    if (e->keep > 0) {
        for (uint64_t seq = first; seq <= last; seq++) {
            const struct srv_stream_slot *s = srv_stream_sm_get(sm, seq);
            matching += s != NULL && purge_match(e, s);
        }
    }
    uint64_t to_remove = e->keep > 0
                             ? (matching > e->keep ? matching - e->keep : 0)
                             : UINT64_MAX;
    /* Bounded by the ring's size (<= SRV_STREAM_MSGS_MAX). */
    for (uint64_t seq = first; seq <= last && res->purged < to_remove; seq++) {
        const struct srv_stream_slot *s = srv_stream_sm_get(sm, seq);
        if (s == NULL || (e->seq > 0 && seq >= e->seq) || !purge_match(e, s)) {
            continue;
        }
        remove_live(sm, seq);
        res->purged++;
    }
    if (e->subject_len == 0 && e->keep == 0 && e->seq > sm->last_seq + 1) {
        /* Purge up to a future seq: the next message gets that seq. */
        sm->last_seq = e->seq - 1;
        trim_front(sm);
    }
    return 0;
}

static int apply_config(struct srv_stream_sm *sm, uint64_t index,
                        const struct keel_stream_entry *e,
                        struct srv_stream_result *res)
{
    json_error_t jerr;
    json_t *j = json_loadb(e->subject, e->subject_len, 0, &jerr);
    struct srv_stream_config cfg;
    char err[SRV_JS_ERR_DESC_BYTES_MAX];
    memset(&cfg, 0, sizeof cfg);
    if (j == NULL || srv_stream_config_parse(j, &cfg, &res->jerr, err) != 0) {
        json_decref(j);
        srv_stream_config_free(&cfg);
        return set_detail(res, SRV_JS_ESTREAM_CONFIG, "bad config entry");
    }
    json_decref(j);
    if (!sm->configured && sm->last_seq == 0 && cfg.first_seq > 1) {
        /* first_seq: the stream's first CONFIG entry comes before any
         * publish (a new leader proposes it first), so the first message
         * gets first_seq, on every replica alike. Later entries never
         * move it (an update cannot change it). */
        sm->last_seq = cfg.first_seq - 1;
        trim_front(sm);
    }
    if (!cfg.has_mirror && sm->mirror_cfg) {
        sm->promoted = true;
    }
    sm->mirror_cfg = cfg.has_mirror && !sm->promoted;
    srv_stream_limits_from_config(&cfg, &sm->lim);
    srv_stream_config_free(&cfg);
    sm->configured = true;
    return enforce_limits(sm, index, sm->last_ts_ns, NULL, 0, res);
}

int srv_stream_sm_apply(struct srv_stream_sm *sm, uint64_t index,
                        const struct keel_stream_entry *e,
                        struct srv_stream_result *res)
{
    ASSERT(sm != NULL && e != NULL && res != NULL);
    memset(res, 0, sizeof *res);
    switch (e->kind) {
    case KEEL_STREAM_E_PUBLISH:
        return srv_stream_sm__publish(sm, index, e, res);
    case KEEL_STREAM_E_PURGE:
        return apply_purge(sm, e, res);
    case KEEL_STREAM_E_DELETE:
        if (sm->lim.deny_delete) {
            return set_detail(res, SRV_JS_EBAD_REQUEST,
                              "message delete not permitted");
        }
        if (srv_stream_sm_remove(sm, e->seq) != 0) {
            /* nats-server's answer to deleting a missing message. */
            char d[48];
            snprintf(d, sizeof d, "sequence %llu not found",
                     (unsigned long long)e->seq);
            return set_detail(res, SRV_JS_ESEQUENCE_NOT_FOUND, d);
        }
        return 0;
    case KEEL_STREAM_E_CONFIG:
        return apply_config(sm, index, e, res);
    case KEEL_STREAM_E_MIRROR:
        return apply_mirror(sm, index, e, res);
    case KEEL_STREAM_E_SOURCE:
        return srv_stream_sm__apply_source(sm, index, e, res);
    case KEEL_STREAM_E_TICK:
        srv_dedupe_expire(&sm->dedupe, e->ts_ns, sm->lim.duplicate_window_ns);
        return enforce_limits(sm, index, e->ts_ns, NULL, 0, res);
    default:
        return set_detail(res, SRV_JS_EBAD_REQUEST, "unknown entry kind");
    }
}

/* ---- snapshot: little-endian fixed-width fields, subjects as a
 * dictionary in order of first appearance (so hash layout never leaks into
 * the bytes), live slots in seq order, dedupe ids in FIFO order. ---- */

#define SNAP_MAGIC 0x3153534bu /* "KSS1" */
/* "KSS2": KSS1 with a mirror's position and lost count after the header;
 * written only for a mirror, so other streams' snapshots keep their
 * bytes. */
#define SNAP_MAGIC_MIRROR 0x3253534bu

/* Does the snapshot carry the TTL section (bit 22)? Only a stream that
 * uses TTLs or markers, so other streams' snapshots keep their bytes. */
static bool snap_has_ttl(const struct srv_stream_sm *sm)
{
    if (sm->lim.allow_msg_ttl || sm->lim.marker_ttl_ns > 0) {
        return true;
    }
    /* Bounded by the ring, as srv_stream_sm__ttl_rebuild. */
    for (uint64_t seq = sm->base_seq;
         seq <= sm->last_seq && seq - sm->base_seq < sm->count; seq++) {
        const struct srv_stream_slot *s = srv_stream_sm_get(sm, seq);
        if (s != NULL && s->ttl != 0) {
            return true;
        }
    }
    return false;
}

/* The stall section names a refusal by its own small code, not the
 * enum's value (the error table may be reordered): 0 none. */
static const enum srv_js_err stall_codes[] = {SRV_JS_OK, SRV_JS_EMAX_MSGS,
                                              SRV_JS_EMAX_BYTES,
                                              SRV_JS_EMAX_MSGS_PER_SUBJECT};
#define STALL_CODES (sizeof stall_codes / sizeof stall_codes[0])

static uint64_t stall_code(enum srv_js_err jerr)
{
    for (uint64_t i = 0; i < STALL_CODES; i++) {
        if (stall_codes[i] == jerr) {
            return i;
        }
    }
    ASSERT(false); /* srv_stream_sm_source.c stalls for these only */
    return 0;
}

static void snap_header(struct keel_wbuf *b, const struct srv_stream_sm *sm,
                        bool ttl)
{
    const struct srv_stream_limits *l = &sm->lim;
    bool mirror = sm->mirror_pos > 0 || sm->mirror_lost > 0;
    /* Bit 23: the sources section follows the header; only a stream that
     * read a source, so other streams' snapshots keep their bytes. */
    bool src = sm->nsrc > 0;
    /* Bit 24: a source is stalled; its section follows the sources'. */
    bool stall = false;
    for (uint32_t i = 0; i < sm->nsrc; i++) {
        stall |= sm->src[i].stalled != 0;
    }
    keel_wbuf_u64(b, mirror ? SNAP_MAGIC_MIRROR : SNAP_MAGIC);
    keel_wbuf_u64(
        b, (uint64_t)l->retention | (uint64_t)l->discard << 8 |
               (uint64_t)l->deny_delete << 16 | (uint64_t)l->deny_purge << 17 |
               (uint64_t)l->sealed << 18 | (uint64_t)sm->configured << 19 |
               (uint64_t)l->discard_new_per_subject << 20 |
               (uint64_t)l->allow_msg_ttl << 21 | (uint64_t)ttl << 22 |
               (uint64_t)src << 23 | (uint64_t)stall << 24 |
               (uint64_t)sm->mirror_cfg << 25 | (uint64_t)sm->promoted << 26);
    int64_t v[6] = {l->max_msgs,     l->max_bytes,  l->max_msgs_per_subject,
                    l->max_msg_size, l->max_age_ns, l->duplicate_window_ns};
    for (int i = 0; i < 6; i++) {
        keel_wbuf_u64(b, (uint64_t)v[i]);
    }
    keel_wbuf_u64(b, sm->last_seq);
    keel_wbuf_u64(b, (uint64_t)sm->last_ts_ns);
    keel_wbuf_str(b, sm->last_msg_id, sm->last_msg_id_len);
    if (mirror) {
        keel_wbuf_u64(b, sm->mirror_pos);
        keel_wbuf_u64(b, sm->mirror_lost);
    }
    if (src) {
        keel_wbuf_u64(b, sm->nsrc);
        for (uint32_t i = 0; i < sm->nsrc; i++) {
            keel_wbuf_str(b, sm->src[i].name, strlen(sm->src[i].name));
            keel_wbuf_u64(b, sm->src[i].pos);
            keel_wbuf_u64(b, sm->src[i].lost);
        }
    }
    for (uint32_t i = 0; stall && i < sm->nsrc; i++) {
        keel_wbuf_u64(b, sm->src[i].stalled);
        keel_wbuf_u64(b, stall_code(sm->src[i].stall_jerr));
    }
}

/* Dictionary index of each subject, numbered by first appearance. */
static int snap_subjects(struct keel_wbuf *b, const struct srv_stream_sm *sm,
                         struct srv_hmap *idx)
{
    uintptr_t n = 0;
    for (uint64_t seq = sm->base_seq; seq <= sm->last_seq; seq++) {
        const struct srv_stream_slot *s = srv_stream_sm_get(sm, seq);
        if (s == NULL || srv_hmap_get(idx, s->subj->s, s->subj->len)) {
            continue;
        }
        if (srv_hmap_put(idx, s->subj->s, s->subj->len, (void *)++n) != 0) {
            return KEEL_ENOMEM;
        }
    }
    keel_wbuf_u64(b, n);
    uintptr_t emitted = 0;
    for (uint64_t seq = sm->base_seq; seq <= sm->last_seq; seq++) {
        const struct srv_stream_slot *s = srv_stream_sm_get(sm, seq);
        if (s != NULL && (uintptr_t)srv_hmap_get(idx, s->subj->s,
                                                 s->subj->len) == emitted + 1) {
            keel_wbuf_str(b, s->subj->s, s->subj->len);
            emitted++;
        }
    }
    return 0;
}

int srv_stream_sm_snapshot(const struct srv_stream_sm *sm, uint8_t **out,
                           size_t *len)
{
    struct keel_wbuf b = {0};
    struct srv_hmap idx;
    srv_hmap_init(&idx);
    *out = NULL;
    *len = 0;
    bool ttl = snap_has_ttl(sm);
    snap_header(&b, sm, ttl);
    int rv = snap_subjects(&b, sm, &idx);
    keel_wbuf_u64(&b, sm->msgs);
    for (uint64_t seq = sm->base_seq; rv == 0 && seq <= sm->last_seq; seq++) {
        const struct srv_stream_slot *s = srv_stream_sm_get(sm, seq);
        if (s != NULL) {
            keel_wbuf_u64(&b, seq);
            keel_wbuf_u64(&b, s->index);
            keel_wbuf_u64(&b, (uint64_t)s->ts_ns);
            keel_wbuf_u64(&b, s->size);
            keel_wbuf_u64(
                &b, (uintptr_t)srv_hmap_get(&idx, s->subj->s, s->subj->len));
        }
    }
    const struct srv_dedupe *d = &sm->dedupe;
    keel_wbuf_u64(&b, d->count);
    for (size_t i = 0; i < d->count; i++) {
        const struct srv_dedupe_ent *e = d->ring[(d->head + i) % d->cap];
        keel_wbuf_str(&b, e->id, e->id_len);
        keel_wbuf_u64(&b, (uint64_t)e->ts_ns);
        keel_wbuf_u64(&b, e->seq);
    }
    if (ttl) {
        /* The TTL section: the marker TTL, then every live slot with a
         * TTL or a marker, in seq order. */
        uint64_t n = 0;
        for (uint64_t seq = sm->base_seq; seq <= sm->last_seq; seq++) {
            const struct srv_stream_slot *s = srv_stream_sm_get(sm, seq);
            n += s != NULL && s->ttl != 0;
        }
        keel_wbuf_u64(&b, (uint64_t)sm->lim.marker_ttl_ns);
        keel_wbuf_u64(&b, n);
        for (uint64_t seq = sm->base_seq; seq <= sm->last_seq; seq++) {
            const struct srv_stream_slot *s = srv_stream_sm_get(sm, seq);
            if (s != NULL && s->ttl != 0) {
                keel_wbuf_u64(&b, seq);
                keel_wbuf_u64(&b, s->ttl);
            }
        }
    }
    srv_hmap_close(&idx);
    if (rv != 0 || b.oom) {
        free(b.p);
        return KEEL_ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

/* The sources section (bit 23): each name once, non-empty. */
static int restore_sources(struct srv_stream_sm *sm, struct keel_rbuf *r)
{
    uint64_t n = keel_rbuf_u64(r);
    if (r->bad || n == 0 || n > SRV_STREAM_SOURCE_POS_MAX) {
        return KEEL_ECORRUPT;
    }
    for (uint64_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *name = keel_rbuf_str(r, &len);
        uint64_t pos = keel_rbuf_u64(r), lost = keel_rbuf_u64(r);
        struct srv_stream_src_pos *p = NULL;
        if (r->bad || len == 0 || len > SRV_JS_NAME_BYTES_MAX ||
            memchr(name, '\0', len) != NULL) {
            return KEEL_ECORRUPT;
        }
        char s[SRV_JS_NAME_BYTES_MAX + 1];
        memcpy(s, name, len);
        s[len] = '\0';
        for (uint32_t k = 0; k < sm->nsrc; k++) {
            if (strcmp(sm->src[k].name, s) == 0) {
                return KEEL_ECORRUPT;
            }
        }
        int rv = srv_stream_sm__source_add(sm, name, len, &p);
        if (rv != 0) {
            return rv == KEEL_ENOMEM ? rv : KEEL_ECORRUPT;
        }
        p->pos = pos;
        p->lost = lost;
    }
    return 0;
}

/* The stall section (bit 24): per source, the stalled origin seq (above
 * its position, or 0) and the refusal (set exactly when stalled). */
static int restore_stalls(struct srv_stream_sm *sm, struct keel_rbuf *r)
{
    for (uint32_t i = 0; i < sm->nsrc; i++) {
        struct srv_stream_src_pos *p = &sm->src[i];
        uint64_t stalled = keel_rbuf_u64(r), jerr = keel_rbuf_u64(r);
        if (r->bad || (stalled != 0 && stalled <= p->pos) ||
            (stalled != 0) != (jerr != 0) || jerr >= STALL_CODES) {
            return KEEL_ECORRUPT;
        }
        p->stalled = stalled;
        p->stall_jerr = stall_codes[jerr];
    }
    return 0;
}

static int restore_header(struct srv_stream_sm *sm, struct keel_rbuf *r,
                          bool *ttl)
{
    struct srv_stream_limits *l = &sm->lim;
    uint64_t magic = keel_rbuf_u64(r);
    if (magic != SNAP_MAGIC && magic != SNAP_MAGIC_MIRROR) {
        return KEEL_ECORRUPT;
    }
    uint64_t f = keel_rbuf_u64(r);
    if ((f & 0xff) > SRV_JS_RETENTION_WORKQUEUE ||
        (f >> 8 & 0xff) > SRV_JS_DISCARD_NEW || f >> 27 != 0 ||
        (f >> 24 & 1 && !(f >> 23 & 1)) || (f >> 25 & f >> 26 & 1)) {
        return KEEL_ECORRUPT;
    }
    l->retention = (enum srv_js_retention)(f & 0xff);
    l->discard = (enum srv_js_discard)(f >> 8 & 0xff);
    l->deny_delete = f >> 16 & 1;
    l->deny_purge = f >> 17 & 1;
    l->sealed = f >> 18 & 1;
    sm->configured = f >> 19 & 1;
    l->discard_new_per_subject = f >> 20 & 1;
    l->allow_msg_ttl = f >> 21 & 1;
    *ttl = f >> 22 & 1;
    sm->promoted = f >> 26 & 1;
    /* A snapshot from before bit 25 marks a mirror by its position only. */
    sm->mirror_cfg =
        f >> 25 & 1 || (magic == SNAP_MAGIC_MIRROR && !sm->promoted);
    int64_t *v[6] = {&l->max_msgs,     &l->max_bytes,  &l->max_msgs_per_subject,
                     &l->max_msg_size, &l->max_age_ns, &l->duplicate_window_ns};
    for (int i = 0; i < 6; i++) {
        *v[i] = (int64_t)keel_rbuf_u64(r);
    }
    sm->last_seq = keel_rbuf_u64(r);
    sm->last_ts_ns = (int64_t)keel_rbuf_u64(r);
    size_t n = 0;
    const char *id = keel_rbuf_str(r, &n);
    if (r->bad || l->duplicate_window_ns < 0) {
        return KEEL_ECORRUPT;
    }
    if (set_last_msg_id(sm, id, n) != 0) {
        return KEEL_ENOMEM;
    }
    if (magic == SNAP_MAGIC_MIRROR) {
        sm->mirror_pos = keel_rbuf_u64(r);
        sm->mirror_lost = keel_rbuf_u64(r);
        if (r->bad || sm->mirror_pos == 0 || sm->mirror_pos > sm->last_seq) {
            return KEEL_ECORRUPT;
        }
    }
    int rv = f >> 23 & 1 ? restore_sources(sm, r) : 0;
    if (rv == 0 && f >> 24 & 1) {
        rv = restore_stalls(sm, r);
    }
    return rv;
}

/* Live slots in increasing seq order; gaps become deleted slots. */
static int restore_slots(struct srv_stream_sm *sm, struct keel_rbuf *r,
                         struct srv_stream_subj **dict, uint64_t nsubj)
{
    uint64_t n = keel_rbuf_u64(r), prev = 0;
    uint64_t last = sm->last_seq;
    if (r->bad || n > SRV_STREAM_MSGS_MAX || n > (r->len - r->off) / 40) {
        return KEEL_ECORRUPT;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seq = keel_rbuf_u64(r), index = keel_rbuf_u64(r),
                 ts = keel_rbuf_u64(r);
        uint64_t size = keel_rbuf_u64(r), si = keel_rbuf_u64(r);
        if (r->bad || seq <= prev || seq > last || si == 0 || si > nsubj ||
            size > UINT32_MAX ||
            (prev > 0 && seq - prev > SRV_STREAM_MSGS_MAX)) {
            return KEEL_ECORRUPT;
        }
        if (prev == 0) {
            sm->base_seq = seq;
        }
        for (uint64_t gap = prev + 1; prev > 0 && gap < seq; gap++) {
            struct srv_stream_slot d = {0};
            int rv = ring_push(sm, &d);
            if (rv != 0) {
                return rv;
            }
            sm->deleted++;
        }
        struct srv_stream_subj *sj = dict[si - 1];
        struct srv_stream_slot v = {index, (int64_t)ts, sj, (uint32_t)size, 0};
        int rv = ring_push(sm, &v);
        if (rv != 0) {
            return rv;
        }
        if (sj->msgs++ == 0) {
            sj->first_seq = seq;
        }
        sj->last_seq = seq;
        sm->msgs++;
        sm->bytes += size;
        prev = seq;
    }
    if (n == 0) {
        sm->base_seq = last + 1;
    }
    return 0;
}

static int restore_dedupe(struct srv_stream_sm *sm, struct keel_rbuf *r)
{
    uint64_t n = keel_rbuf_u64(r);
    if (r->bad || n > SRV_JS_DEDUPE_IDS_MAX) {
        return KEEL_ECORRUPT;
    }
    for (uint64_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *id = keel_rbuf_str(r, &len);
        int64_t ts = (int64_t)keel_rbuf_u64(r);
        uint64_t seq = keel_rbuf_u64(r);
        if (r->bad || srv_dedupe_add(&sm->dedupe, id, len, ts, seq) != 0) {
            return KEEL_ECORRUPT;
        }
    }
    return 0;
}

/* The TTL section (snap_has_ttl): each seq must be live, in increasing
 * order; then the heap is rebuilt from the slots. */
static int restore_ttl(struct srv_stream_sm *sm, struct keel_rbuf *r)
{
    int64_t mttl = (int64_t)keel_rbuf_u64(r);
    uint64_t n = keel_rbuf_u64(r), prev = 0;
    if (r->bad || mttl < 0 || (mttl > 0 && mttl < SRV_MSG_TTL_NS_MIN) ||
        n > sm->msgs) {
        return KEEL_ECORRUPT;
    }
    sm->lim.marker_ttl_ns = mttl;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seq = keel_rbuf_u64(r);
        uint64_t ttl = keel_rbuf_u64(r);
        struct srv_stream_slot *s = slot_at(sm, seq);
        if (r->bad || seq <= prev || s == NULL || s->subj == NULL || ttl == 0 ||
            ttl > UINT32_MAX || ttl >> 30 > SRV_STREAM_MARKER_HDR) {
            return KEEL_ECORRUPT;
        }
        s->ttl = (uint32_t)ttl;
        prev = seq;
    }
    return srv_stream_sm__ttl_rebuild(sm);
}

static int restore_dict(struct srv_stream_sm *sm, struct keel_rbuf *r,
                        struct srv_stream_subj ***dict, uint64_t *n)
{
    *n = keel_rbuf_u64(r);
    if (r->bad || *n > SRV_STREAM_MSGS_MAX || *n > (r->len - r->off) / 8) {
        return KEEL_ECORRUPT;
    }
    *dict = calloc(*n + 1, sizeof **dict);
    if (*dict == NULL) {
        return KEEL_ENOMEM;
    }
    for (uint64_t i = 0; i < *n; i++) {
        size_t len = 0;
        const char *s = keel_rbuf_str(r, &len);
        if (r->bad || len == 0 || srv_hmap_get(&sm->subjects, s, len)) {
            return KEEL_ECORRUPT;
        }
        if (((*dict)[i] = subj_get(sm, s, len)) == NULL) {
            return KEEL_ENOMEM;
        }
    }
    return 0;
}

int srv_stream_sm_restore(struct srv_stream_sm *sm, const uint8_t *buf,
                          size_t len, char *errmsg)
{
    ASSERT(sm->count == 0 && sm->msgs == 0);
    struct keel_rbuf r = {buf, len, 0, false};
    struct srv_stream_subj **dict = NULL;
    uint64_t nsubj = 0;
    bool ttl = false;
    int rv = restore_header(sm, &r, &ttl);
    if (rv == 0) {
        rv = restore_dict(sm, &r, &dict, &nsubj);
    }
    if (rv == 0) {
        rv = restore_slots(sm, &r, dict, nsubj);
    }
    for (uint64_t i = 0; rv == 0 && i < nsubj; i++) {
        if (dict[i]->msgs == 0) {
            rv = KEEL_ECORRUPT; /* a subject no live message uses */
        }
    }
    if (rv == 0) {
        rv = restore_dedupe(sm, &r);
    }
    if (rv == 0 && ttl) {
        rv = restore_ttl(sm, &r);
    }
    if (rv == 0 && r.off != len) {
        rv = KEEL_ECORRUPT;
    }
    free(dict);
    if (rv != 0) {
        return keel_err(rv, errmsg, "stream %s snapshot: %s at byte %zu",
                        sm->name, keel_strerror(rv), r.off);
    }
    return 0;
}
