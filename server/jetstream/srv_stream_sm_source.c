/* srv_stream_sm_source: a sourcing stream's SOURCE entries and its
 * position in each origin (docs/decisions/0035-sources-share-the-mirror-
 * pump.md). A sourced message is stored like a publish, under the
 * stream's own next seq, with its dedupe, limits and discard rules; what
 * makes it exactly once is the position: an entry whose origin seq is not
 * above its source's position is skipped, so a new leader that sends
 * again what the log already holds never stores a message twice. The
 * positions are replicated state: the same on every replica, and in the
 * snapshot (srv_stream_sm_state.c writes the section).
 *
 * A message refused for a limit (discard new on a full stream) stalls its
 * source rather than being skipped: the position stays below it, entries
 * already in flight past it are skipped without moving the position, and
 * the leader's pump reads it again until it fits (nats-server 2.9.10 also
 * retries it; docs/decisions/0035-sources-share-the-mirror-pump.md). */
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel_stream_entry.h"
#include "srv_stream_sm_int.h"

static struct srv_stream_src_pos *find(const struct srv_stream_sm *sm,
                                       const char *name, size_t len)
{
    for (uint32_t i = 0; i < sm->nsrc; i++) {
        if (strlen(sm->src[i].name) == len &&
            memcmp(sm->src[i].name, name, len) == 0) {
            return &sm->src[i];
        }
    }
    return NULL;
}

uint64_t srv_stream_sm_source_pos(const struct srv_stream_sm *sm,
                                  const char *name, uint64_t *lost)
{
    const struct srv_stream_src_pos *p = find(sm, name, strlen(name));
    if (lost != NULL) {
        *lost = p != NULL ? p->lost : 0;
    }
    return p != NULL ? p->pos : 0;
}

uint64_t srv_stream_sm_source_stalled(const struct srv_stream_sm *sm,
                                      const char *name, enum srv_js_err *jerr)
{
    const struct srv_stream_src_pos *p = find(sm, name, strlen(name));
    *jerr = p != NULL ? p->stall_jerr : SRV_JS_OK;
    return p != NULL ? p->stalled : 0;
}

/* A refusal that a later retry may get past once the stream has room. */
static bool refused_for_room(enum srv_js_err jerr)
{
    return jerr == SRV_JS_EMAX_MSGS || jerr == SRV_JS_EMAX_BYTES ||
           jerr == SRV_JS_EMAX_MSGS_PER_SUBJECT;
}

int srv_stream_sm__source_add(struct srv_stream_sm *sm, const char *name,
                              size_t len, struct srv_stream_src_pos **out)
{
    if (len == 0 || len > SRV_JS_NAME_BYTES_MAX) {
        return KEEL_EINVAL;
    }
    if (sm->nsrc == SRV_STREAM_SOURCE_POS_MAX) {
        /* Forget the oldest: the same on every replica. */
        memmove(sm->src, sm->src + 1, (sm->nsrc - 1) * sizeof *sm->src);
        sm->nsrc--;
    }
    if (sm->src == NULL) {
        sm->src = calloc(SRV_STREAM_SOURCE_POS_MAX, sizeof *sm->src);
        if (sm->src == NULL) {
            return KEEL_ENOMEM;
        }
    }
    struct srv_stream_src_pos *p = &sm->src[sm->nsrc++];
    memset(p, 0, sizeof *p);
    memcpy(p->name, name, len);
    *out = p;
    return 0;
}

int srv_stream_sm__apply_source(struct srv_stream_sm *sm, uint64_t index,
                                const struct keel_stream_entry *e,
                                struct srv_stream_result *res)
{
    struct srv_stream_src_pos *p = find(sm, e->source, e->source_len);
    /* Stalled: what the pump sent past the refused message before it saw
     * the stall is read again later, so it is skipped and the position
     * stays. An entry with origin seqs lost before it says the origin no
     * longer holds the stalled message (read from a cursor past the
     * origin's first seq): it ends the stall. */
    bool stale =
        p != NULL && p->stalled != 0 && e->seq > p->stalled && e->lost == 0;
    if (p != NULL && (e->seq <= p->pos || stale)) {
        res->seq = e->seq;
        res->duplicate = true; /* sent again by a new leader: skipped */
        return 0;
    }
    if (p == NULL) {
        int rv = srv_stream_sm__source_add(sm, e->source, e->source_len, &p);
        if (rv == KEEL_EINVAL) {
            res->jerr = SRV_JS_EBAD_REQUEST; /* the decoder bounds it */
            return 0;
        }
        if (rv != 0) {
            return rv;
        }
    }
    if (e->subject_len > 0) {
        /* Stored as a publish: the stream's own seq, dedupe, limits and
         * discard. */
        int rv = srv_stream_sm__publish(sm, index, e, res);
        if (rv != 0) {
            return rv;
        }
        if (refused_for_room(res->jerr)) {
            /* Stalled: the position stays, the same on every replica. */
            p->stalled = e->seq;
            p->stall_jerr = res->jerr;
            return 0;
        }
    }
    /* Stored, a duplicate Nats-Msg-Id (dedupe: skipped), refused for
     * what no retry changes (an expectation header), or position only:
     * the source moves on. */
    p->pos = e->seq;
    p->lost += e->lost;
    p->stalled = 0;
    p->stall_jerr = SRV_JS_OK;
    return 0;
}
