/* The consumers' part of a stream snapshot (docs/design.md §5): the
 * srv_consumer_ops snapshot/restore hooks over the stream's consumer set
 * (configs, delivered and ack state; deterministic bytes). The leader's
 * pending set is not in it: a new leader rebuilds it (srv_csm_leader_start,
 * docs/design.md §6: uncommitted delivery state means redelivery). */
#include <stdlib.h>

#include "keel/error.h"
#include "srv_consumer.h"
#include "srv_log.h"

int srv_consumer_snap_encode(const struct srv_stream *st, uint8_t **out,
                             size_t *len)
{
    char err[KEEL_ERRMSG_MAX];
    uint32_t n = 0;
    *out = NULL;
    *len = 0;
    /* The slot is created on open (stream_opened): a stream without one
     * has no consumers. */
    struct srv_cstream *cs =
        *srv_stream_consumers_slot((struct srv_stream *)st);
    if (cs == NULL) {
        return 0;
    }
    int rv = srv_csm_snapshot_encode(&cs->set, out, &n, err);
    if (rv != 0) {
        SRV_WARN("js", "stream %s: consumers not in the snapshot: %s",
                 srv_stream_name(st), err);
        return rv;
    }
    *len = n;
    return 0;
}

int srv_consumer_snap_restore(struct srv_stream *st, const uint8_t *buf,
                              size_t len)
{
    char err[KEEL_ERRMSG_MAX];
    struct srv_cstream *cs = srv_cstream_of(st);
    if (cs == NULL) {
        return KEEL_ENOMEM;
    }
    if (len > UINT32_MAX) {
        return KEEL_ECORRUPT;
    }
    if (len == 0) {
        /* No consumers when the snapshot was taken (an install on a
         * running follower replaces the ones it has). */
        srv_csm_set_close(&cs->set);
        return 0;
    }
    int rv = srv_csm_snapshot_decode(&cs->set, buf, (uint32_t)len, err);
    srv_cstream_wake(srv_cengine_get(), cs);
    if (rv != 0) {
        SRV_ERROR("js", "stream %s: consumers in its snapshot: %s",
                  srv_stream_name(st), err);
    }
    return rv;
}
