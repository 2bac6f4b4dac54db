/* Group frame batching (docs/design.md §3: "the cluster link multiplexes
 * groups, batching the heartbeats of all groups between two nodes into one
 * frame per tick, each group keeping its own term, commit and response").
 *
 * srv_cluster_send queues a small Raft message (up to
 * SRV_CLUSTER_BATCH_ITEM_BYTES_MAX: heartbeats, responses, votes, small
 * appends) in its link's batch instead of framing it alone; the batch goes
 * out as one GROUP_BATCH frame, msgpack [gid, msg, gid, msg, ...], before
 * the loop blocks or writes (srv_cluster.c flushes it with the link), before
 * any other frame on that link (so frames keep their order) and when it is
 * full. Each item is a whole raft message of its own group: the batch only
 * saves frames, it never merges what groups say. Leaders of clustered groups
 * align their heartbeat timers (replica_options.align_heartbeats), so the
 * heartbeats of every group one node leads fire in the same loop iteration
 * and share one frame per peer, and so do the responses.
 */
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/grow.h"
#include "srv_cluster.h"

/* Room before the items for the array header, written at flush. */
#define BATCH_HDR 5

void srv_cluster_batch_flush(struct srv_cluster_link *l)
{
    if (l->batch_n == 0) {
        return;
    }
    uint8_t hdr[BATCH_HDR];
    size_t hn = (size_t)(srv_mp_put_array(hdr, 2 * l->batch_n) - hdr);
    ASSERT(hn <= BATCH_HDR);
    uint8_t *p = l->batch + BATCH_HDR - hn;
    memcpy(p, hdr, hn);
    size_t len = hn + l->batch_len;
    l->batch_n = 0;
    l->batch_len = 0;
    /* Failures drop the link (queue full) or mean it is gone: Raft
     * retries either way. */
    (void)srv_cluster_link_send(l, SRV_CLUSTER_GROUP_BATCH, NULL, 0, p, len);
}

int srv_cluster_batch_add(struct srv_cluster_link *l, const uint8_t *gid,
                          const void *data, size_t len)
{
    return srv_cluster_batch_add2(l, gid, NULL, 0, data, len);
}

int srv_cluster_batch_add2(struct srv_cluster_link *l, const uint8_t *gid,
                           const void *a, size_t alen, const void *b,
                           size_t blen)
{
    size_t len = alen + blen;
    size_t need =
        2 * SRV_MP_HEADER_BYTES_MAX + SRV_CLUSTER_GROUP_ID_BYTES + len;
    ASSERT(len <= SRV_CLUSTER_BATCH_ITEM_BYTES_MAX);
    if (l->closing || !l->connected) {
        return KEEL_ENOENT;
    }
    if (l->batch_len + need > SRV_CLUSTER_BATCH_BYTES_MAX) {
        srv_cluster_batch_flush(l);
    }
    if (keel_reserve(&l->batch, &l->batch_cap, BATCH_HDR + l->batch_len + need,
                     1, 4096) != 0) {
        return KEEL_ENOMEM; /* a lost message: Raft retries */
    }
    uint8_t *p = l->batch + BATCH_HDR + l->batch_len;
    p = srv_mp_put_bin_header(p, SRV_CLUSTER_GROUP_ID_BYTES);
    memcpy(p, gid, SRV_CLUSTER_GROUP_ID_BYTES);
    p = srv_mp_put_bin_header(p + SRV_CLUSTER_GROUP_ID_BYTES, len);
    if (alen > 0) {
        memcpy(p, a, alen);
    }
    if (blen > 0) {
        memcpy(p + alen, b, blen);
    }
    p += len;
    l->batch_len = (size_t)(p - (l->batch + BATCH_HDR));
    l->batch_n++;
    l->batch_items_out++;
    return 0;
}

int srv_cluster_on_group_batch(struct srv_cluster *cl,
                               struct srv_cluster_link *l, const uint8_t *p,
                               size_t len)
{
    struct srv_mp_reader r = {p, p + len};
    uint32_t n = 0;
    if (srv_mp_get_array(&r, &n) != 0 || n % 2 != 0) {
        return KEEL_EPROTO;
    }
    /* Bounded by the frame: every item takes bytes. */
    for (uint32_t i = 0; i < n && !l->closing; i += 2) {
        const uint8_t *gid = NULL, *msg = NULL;
        size_t glen = 0, mlen = 0;
        if (srv_mp_get_bytes(&r, &gid, &glen) != 0 ||
            srv_mp_get_bytes(&r, &msg, &mlen) != 0 ||
            glen != SRV_CLUSTER_GROUP_ID_BYTES) {
            return KEEL_EPROTO;
        }
        srv_cluster_on_group(cl, l, gid, glen, msg, mlen);
    }
    return 0;
}
