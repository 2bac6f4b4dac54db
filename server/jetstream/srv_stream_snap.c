/* A stream group's snapshots and retention cuts (docs/design.md §5): see
 * srv_stream_snap.h. */
#include "srv_stream_snap.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "keel/bytes.h"
#include "keel/error.h"
#include "srv_js_int.h"
#include "srv_log.h"

#define BODY_MAGIC 0x3153534bu /* "KSS1" */
#define BODY_HEADER_BYTES 4u

/* Body: magic u32, stream state length u64, stream state, consumers
 * length u64, consumers (their own encoding), all little-endian. */
int srv_stream_snap_encode(struct replica *r, uint64_t index, uint8_t **out,
                           size_t *len, void *arg)
{
    struct srv_stream *st = arg;
    const struct srv_consumer_ops *ops = st->js->cops;
    uint8_t *sm = NULL, *cons = NULL;
    size_t sm_len = 0, cons_len = 0;
    (void)r;
    (void)index;
    int rv = srv_stream_sm_snapshot(&st->sm, &sm, &sm_len);
    if (rv == 0 && ops != NULL && ops->snapshot != NULL) {
        rv = ops->snapshot(st, &cons, &cons_len);
    }
    uint8_t *b = NULL;
    size_t n = BODY_HEADER_BYTES + 8 + sm_len + 8 + cons_len;
    if (rv == 0) {
        b = malloc(n);
        rv = b == NULL ? KEEL_ENOMEM : 0;
    }
    if (rv == 0) {
        uint8_t *p = b;
        keel_put_le32(p, BODY_MAGIC);
        p += BODY_HEADER_BYTES;
        keel_put_le64(p, sm_len);
        memcpy(p + 8, sm, sm_len);
        p += 8 + sm_len;
        keel_put_le64(p, cons_len);
        if (cons_len > 0) {
            memcpy(p + 8, cons, cons_len);
        }
        *out = b;
        *len = n;
    }
    free(sm);
    free(cons);
    return rv;
}

int srv_stream_snap_restore(struct replica *r, uint64_t index,
                            const uint8_t *body, size_t len, void *arg)
{
    struct srv_stream *st = arg;
    const struct srv_consumer_ops *ops = st->js->cops;
    char err[KEEL_ERRMSG_MAX];
    if (len < BODY_HEADER_BYTES + 8 || keel_get_le32(body) != BODY_MAGIC) {
        return KEEL_ECORRUPT;
    }
    const uint8_t *p = body + BODY_HEADER_BYTES;
    size_t left = len - BODY_HEADER_BYTES;
    uint64_t sm_len = keel_get_le64(p);
    if (sm_len > left - 8 || left - 8 - sm_len < 8) {
        return KEEL_ECORRUPT;
    }
    const uint8_t *cons = p + 8 + sm_len + 8;
    uint64_t cons_len = keel_get_le64(p + 8 + sm_len);
    if (cons_len != left - 8 - sm_len - 8) {
        return KEEL_ECORRUPT;
    }
    struct replica_install_info ii = {0};
    if (r != NULL) {
        replica_install_info(r, &ii);
    }
    if (ii.receiving) {
        /* A running follower: the leader compacted past its log. */
        SRV_INFO("js",
                 "stream %s: installed snapshot %" PRIu64 " from the leader",
                 st->cfg.name, index);
    }
    /* restore fills an initialised empty state machine */
    srv_stream_sm_close(&st->sm);
    int rv = srv_stream_sm_init(&st->sm, st->cfg.name);
    if (rv == 0) {
        rv = srv_stream_sm_restore(&st->sm, p + 8, (size_t)sm_len, err);
        if (rv != 0) {
            SRV_ERROR("js", "stream %s snapshot %" PRIu64 ": %s", st->cfg.name,
                      index, err);
        }
    }
    if (rv == 0 && ops != NULL && ops->restore != NULL) {
        rv = ops->restore(st, cons, (size_t)cons_len);
    }
    return rv;
}

/* The log index below which the state no longer needs the log: the first
 * live message's index - 1, or limit when the stream holds none. */
static uint64_t cut_point(const struct srv_stream *st, uint64_t limit)
{
    const struct srv_stream_sm *sm = &st->sm;
    if (sm->msgs == 0) {
        return limit;
    }
    const struct srv_stream_slot *s =
        srv_stream_sm_get(sm, srv_stream_sm_first_seq(sm));
    if (s == NULL || s->index == 0) {
        return 0;
    }
    return s->index - 1 < limit ? s->index - 1 : limit;
}

void srv_stream_cut_apply(struct srv_stream *st, uint64_t index,
                          const uint8_t *payload, uint32_t len)
{
    char err[KEEL_ERRMSG_MAX];
    if (len != SRV_STREAM_CUT_BYTES || st->r == NULL) {
        return; /* the same bytes on every replica: skipped everywhere */
    }
    /* The apply-time check is authoritative (docs/design.md §6): never past a
     * message this replica still holds, never at or past this entry. */
    uint64_t p = keel_get_le64(payload + 1);
    uint64_t most = cut_point(st, index - 1);
    p = p < most ? p : most;
    if (p > 0 && replica_compact(st->r, p, err) != 0) {
        SRV_WARN("js", "stream %s: cut %" PRIu64 " not applied: %s",
                 st->cfg.name, p, err);
    }
}

void srv_stream_cut_maybe(struct srv_stream *st)
{
    struct replica_snap_info si;
    struct replica_info ri;
    char err[KEEL_ERRMSG_MAX];
    if (!srv_stream_is_leader(st) || st->r == NULL) {
        return;
    }
    replica_snap_info(st->r, &si);
    if (!si.enabled) {
        return;
    }
    replica_info(st->r, &ri);
    uint64_t p = cut_point(st, ri.applied);
    if (p < si.cut + SRV_STREAM_CUT_ENTRIES_MIN) {
        return;
    }
    uint8_t buf[SRV_STREAM_CUT_BYTES];
    buf[0] = SRV_STREAM_KIND_CUT;
    keel_put_le64(buf + 1, p);
    if (replica_propose(st->r, RAFT_ENTRY_NORMAL, buf, sizeof buf, 0, err) !=
        0) {
        SRV_DEBUG("js", "stream %s: cut not proposed: %s", st->cfg.name, err);
    }
}
