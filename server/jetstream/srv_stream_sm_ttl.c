/* srv_stream_sm_ttl: per-message TTLs, max_age with messages that never
 * expire, and subject delete markers, in the stream state machine
 * (docs/decisions/0034-per-message-ttl-in-the-state-machine.md). Every
 * decision is made from entry contents and entry timestamps (the leader's
 * clock, written into the entry), never from a local clock, so every
 * replica, a replay and a restored snapshot remove the same messages and
 * store the same markers. */
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_stream_sm_int.h"

#define NS_PER_S 1000000000LL

/* How far srv_stream_sm_next_expiry walks before it answers "now". */
#define AGE_WALK_MAX 4096u

static bool ent_less(const struct srv_stream_ttl_ent *a,
                     const struct srv_stream_ttl_ent *b)
{
    return a->expire_ns < b->expire_ns ||
           (a->expire_ns == b->expire_ns && a->seq < b->seq);
}

static void heap_up(struct srv_stream_ttl_ent *h, size_t i)
{
    while (i > 0 && ent_less(&h[i], &h[(i - 1) / 2])) {
        struct srv_stream_ttl_ent t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static void heap_down(struct srv_stream_ttl_ent *h, size_t n, size_t i)
{
    /* Each pass moves one level down: bounded by log2(n). */
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ent_less(&h[l], &h[m])) {
            m = l;
        }
        if (r < n && ent_less(&h[r], &h[m])) {
            m = r;
        }
        if (m == i) {
            return;
        }
        struct srv_stream_ttl_ent t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static struct srv_stream_ttl_ent heap_pop(struct srv_stream_sm *sm)
{
    ASSERT(sm->ttl_n > 0);
    struct srv_stream_ttl_ent top = sm->ttl_heap[0];
    sm->ttl_heap[0] = sm->ttl_heap[--sm->ttl_n];
    heap_down(sm->ttl_heap, sm->ttl_n, 0);
    return top;
}

static int heap_push(struct srv_stream_sm *sm, int64_t expire_ns, uint64_t seq)
{
    if (sm->ttl_n == sm->ttl_cap) {
        size_t ncap = sm->ttl_cap == 0 ? 64 : sm->ttl_cap * 2;
        struct srv_stream_ttl_ent *h = realloc(sm->ttl_heap, ncap * sizeof *h);
        if (h == NULL) {
            return KEEL_ENOMEM;
        }
        sm->ttl_heap = h;
        sm->ttl_cap = ncap;
    }
    sm->ttl_heap[sm->ttl_n] = (struct srv_stream_ttl_ent){expire_ns, seq};
    heap_up(sm->ttl_heap, sm->ttl_n++);
    return 0;
}

int srv_stream_sm__ttl_rebuild(struct srv_stream_sm *sm)
{
    sm->ttl_n = 0;
    sm->ttl_live = 0;
    /* Bounded by the ring's size (<= SRV_STREAM_MSGS_MAX), not by
     * last_seq: a restored state may name a last_seq far past the ring. */
    for (uint64_t seq = sm->base_seq;
         seq <= sm->last_seq && seq - sm->base_seq < sm->count; seq++) {
        const struct srv_stream_slot *s = srv_stream_sm__slot(sm, seq);
        if (s != NULL && s->subj != NULL && srv_stream_slot_expire(s) > 0) {
            sm->ttl_live++;
            if (heap_push(sm, srv_stream_slot_expire(s), seq) != 0) {
                return KEEL_ENOMEM;
            }
        }
    }
    return 0;
}

/* Push, first dropping the entries of removed messages when they are most
 * of the heap (a long TTL on messages max_msgs drops early). */
static int ttl_push(struct srv_stream_sm *sm, int64_t expire_ns, uint64_t seq)
{
    if (sm->ttl_n > 2 * sm->ttl_live + 64) {
        int rv = srv_stream_sm__ttl_rebuild(sm);
        if (rv != 0) {
            return rv;
        }
        /* seq is live with its TTL already: the rebuild pushed it. */
        return 0;
    }
    sm->ttl_live++;
    return heap_push(sm, expire_ns, seq);
}

void srv_stream_sm__ttl_forget(struct srv_stream_sm *sm,
                               const struct srv_stream_slot *s)
{
    if (srv_stream_slot_expire(s) > 0) {
        ASSERT(sm->ttl_live > 0);
        sm->ttl_live--;
    }
}

/* The TTL a message gets: nats-server 2.11 raises one shorter than the
 * marker TTL to it (unless max_msgs_per_subject is 1), so a marker is
 * never missed. */
static int64_t effective_secs(const struct srv_stream_limits *l, int64_t secs)
{
    int64_t min = l->marker_ttl_ns / NS_PER_S;
    if (secs > 0 && min > 0 && l->max_msgs_per_subject != 1 && secs < min) {
        return min;
    }
    return secs;
}

/* nats-server 2.11's test for a delete marker: a Nats-Marker-Reason, or a
 * Key/Value purge marker. */
static bool is_marker_hdr(const char *hdr, size_t len)
{
    const char *v = NULL;
    size_t vl = 0;
    if (hdr == NULL || len == 0) {
        return false;
    }
    if (srv_nats_hdr_get(hdr, len, SRV_MSG_MARKER_REASON_HDR, &v, &vl) == 0 &&
        vl > 0) {
        return true;
    }
    return srv_nats_hdr_get(hdr, len, "KV-Operation", &v, &vl) == 0 &&
           vl == 5 && memcmp(v, "PURGE", 5) == 0;
}

int srv_stream_sm__ttl_set(struct srv_stream_sm *sm, uint64_t seq,
                           const char *hdr, size_t hdr_len)
{
    struct srv_stream_slot *s = srv_stream_sm__slot(sm, seq);
    int64_t secs = 0;
    ASSERT(s != NULL && s->subj != NULL);
    if (!sm->lim.allow_msg_ttl) {
        return 0;
    }
    if (is_marker_hdr(hdr, hdr_len)) {
        srv_stream_slot_set_marker(s, SRV_STREAM_MARKER_HDR);
    }
    if (srv_msg_ttl_of(hdr, hdr_len, &secs) != 0 || secs == 0) {
        return 0; /* an unreadable TTL is none, as on nats-server */
    }
    if (secs == SRV_MSG_TTL_NEVER) {
        srv_stream_slot_set_ttl(s, SRV_MSG_TTL_NEVER);
        return 0;
    }
    srv_stream_slot_set_ttl(s, effective_secs(&sm->lim, secs));
    return ttl_push(sm, srv_stream_slot_expire(s), seq);
}

/* Remove live seq; when it is the last message of its subject and the
 * stream asks for markers (and it is no marker itself), store the
 * subject's delete marker in its place, at the next seq, stamped with
 * the entry's time and expiring marker_ttl after it. */
static int expire_one(struct srv_stream_sm *sm, uint64_t index, int64_t now,
                      uint64_t seq, struct srv_stream_result *res)
{
    struct srv_stream_slot *s = srv_stream_sm__slot(sm, seq);
    char subj[SRV_JS_SUBJECT_BYTES_MAX + 1];
    ASSERT(s != NULL && s->subj != NULL);
    const struct srv_stream_limits *l = &sm->lim;
    bool mark = l->marker_ttl_ns > 0 && s->subj->msgs == 1 &&
                srv_stream_slot_marker(s) == SRV_STREAM_MARKER_NONE &&
                s->subj->len <= SRV_JS_SUBJECT_BYTES_MAX;
    size_t slen = s->subj->len;
    if (mark) {
        memcpy(subj, s->subj->s, slen);
    }
    int rv = srv_stream_sm_remove(sm, seq);
    ASSERT(rv == 0);
    if (!mark) {
        return 0;
    }
    char hdr[SRV_MSG_MARKER_HDR_MAX];
    int64_t ttl_s = l->marker_ttl_ns / NS_PER_S;
    size_t hlen = srv_msg_marker_hdr(ttl_s, hdr, sizeof hdr);
    int64_t ts = now > sm->last_ts_ns ? now : sm->last_ts_ns;
    rv = srv_stream_sm__store(sm, index, ts, subj, slen, slen + hlen);
    if (rv != 0) {
        return rv;
    }
    struct srv_stream_slot *m = srv_stream_sm__slot(sm, sm->last_seq);
    srv_stream_slot_set_marker(m, SRV_STREAM_MARKER_STORED);
    srv_stream_slot_set_ttl(m, ttl_s);
    if (res->markers++ == 0) {
        res->marker_first = sm->last_seq;
    }
    return ttl_push(sm, srv_stream_slot_expire(m), sm->last_seq);
}

/* max_age: from age_from, every live message stored at or before
 * now - max_age goes, except those whose TTL is never. Seqs are in
 * timestamp order, so the walk ends at the first younger message. */
static int expire_age(struct srv_stream_sm *sm, uint64_t index, int64_t now,
                      struct srv_stream_result *res)
{
    int64_t cutoff = now - sm->lim.max_age_ns;
    uint64_t seq = sm->age_from > sm->base_seq ? sm->age_from : sm->base_seq;
    int rv = 0;
    /* Bounded by the ring's size: seq only grows; a marker stored here is
     * younger than cutoff and ends the walk. */
    for (; rv == 0 && seq <= sm->last_seq; seq++) {
        const struct srv_stream_slot *s = srv_stream_sm__slot(sm, seq);
        if (s == NULL) {
            break;
        }
        if (s->subj == NULL || srv_stream_slot_expire(s) == SRV_MSG_TTL_NEVER) {
            continue;
        }
        if (s->ts_ns > cutoff) {
            break;
        }
        rv = expire_one(sm, index, now, seq, res);
    }
    sm->age_from = seq;
    return rv;
}

static int seq_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* TTLs due at now, removed in seq order (as nats-server 2.11 sorts them):
 * the order decides the markers' seqs, so it must not depend on the
 * heap's layout. */
static int expire_ttls(struct srv_stream_sm *sm, uint64_t index, int64_t now,
                       struct srv_stream_result *res)
{
    uint64_t *due = NULL;
    size_t n = 0, cap = 0;
    int rv = 0;
    /* Each pass pops one entry: bounded by the heap's size. */
    while (sm->ttl_n > 0 && sm->ttl_heap[0].expire_ns <= now) {
        struct srv_stream_ttl_ent e = heap_pop(sm);
        const struct srv_stream_slot *s = srv_stream_sm__slot(sm, e.seq);
        if (s == NULL || s->subj == NULL ||
            srv_stream_slot_expire(s) != e.expire_ns) {
            continue; /* removed since */
        }
        if (n == cap) {
            size_t ncap = cap == 0 ? 16 : cap * 2;
            uint64_t *d = realloc(due, ncap * sizeof *d);
            if (d == NULL) {
                free(due);
                return KEEL_ENOMEM;
            }
            due = d;
            cap = ncap;
        }
        due[n++] = e.seq;
    }
    if (n > 1) {
        qsort(due, n, sizeof *due, seq_cmp);
    }
    for (size_t i = 0; rv == 0 && i < n; i++) {
        const struct srv_stream_slot *s = srv_stream_sm__slot(sm, due[i]);
        if (s != NULL && s->subj != NULL) {
            rv = expire_one(sm, index, now, due[i], res);
        }
    }
    free(due);
    return rv;
}

int srv_stream_sm__expire(struct srv_stream_sm *sm, uint64_t index,
                          int64_t now_ns, struct srv_stream_result *res)
{
    int rv = 0;
    if (sm->lim.max_age_ns > 0 && sm->count > 0) {
        rv = expire_age(sm, index, now_ns, res);
    }
    if (rv == 0 && sm->lim.allow_msg_ttl && sm->ttl_n > 0) {
        rv = expire_ttls(sm, index, now_ns, res);
    }
    return rv;
}

void srv_stream_sm_next_expiry(const struct srv_stream_sm *sm, int64_t *at_ns)
{
    int64_t at = INT64_MAX;
    if (sm->lim.max_age_ns > 0 && sm->count > 0) {
        uint64_t seq =
            sm->age_from > sm->base_seq ? sm->age_from : sm->base_seq;
        for (unsigned walked = 0; seq <= sm->last_seq; seq++, walked++) {
            const struct srv_stream_slot *s = srv_stream_sm__slot(sm, seq);
            if (s == NULL) {
                break;
            }
            if (walked == AGE_WALK_MAX) {
                at = sm->last_ts_ns; /* a tick moves age_from on */
                break;
            }
            if (s->subj != NULL &&
                srv_stream_slot_expire(s) != SRV_MSG_TTL_NEVER) {
                at = s->ts_ns > INT64_MAX - sm->lim.max_age_ns
                         ? INT64_MAX
                         : s->ts_ns + sm->lim.max_age_ns;
                break;
            }
        }
    }
    if (sm->lim.allow_msg_ttl && sm->ttl_n > 0 &&
        sm->ttl_heap[0].expire_ns < at) {
        at = sm->ttl_heap[0].expire_ns;
    }
    *at_ns = at;
}
