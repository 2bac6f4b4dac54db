/* srv_stream_xform: a stream's subject_transform, applied by the leader
 * before it proposes a publish (the entry in the log holds the subject
 * every replica stores), and its republish, sent by the leader after a
 * publish is applied (docs/decisions/0029-republish-and-subject-transform.md).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_int.h"
#include "srv_js_xform.h"
#include "srv_log.h"

int srv_stream_subject_for(const struct srv_stream *st, const char **subj,
                           size_t *slen, char buf[SRV_JS_SUBJECT_BYTES_MAX + 1],
                           char *errmsg)
{
    size_t n = 0;
    if (st->cfg.transform == NULL) {
        return 0;
    }
    int rv = srv_js_xform_apply(st->cfg.transform, *subj, *slen, buf,
                                SRV_JS_SUBJECT_BYTES_MAX + 1, &n);
    if (rv == KEEL_ENOENT) {
        return 0; /* not the transform's source: stored as published */
    }
    if (rv != 0) {
        return keel_err(KEEL_ELIMIT, errmsg,
                        "subject transform of %.*s to %s gives a subject "
                        "over %d bytes: publish to a shorter subject",
                        (int)(*slen > 128 ? 128 : *slen), *subj,
                        st->cfg.transform->dest, SRV_JS_SUBJECT_BYTES_MAX);
    }
    *subj = buf;
    *slen = n;
    return 0;
}

uint64_t srv_stream_republish_prev(const struct srv_stream *st,
                                   const struct keel_stream_entry *e)
{
    if (st->cfg.republish == NULL || e->kind != KEEL_STREAM_E_PUBLISH) {
        return 0;
    }
    const struct srv_stream_subj *sj =
        srv_hmap_get(&st->sm.subjects, e->subject, e->subject_len);
    return sj != NULL ? sj->last_seq : 0;
}

/* Only the leader that proposed the entry, in the term it proposed it:
 * an entry of an earlier term is one a restarted or new leader replays,
 * and was republished (or lost, at most once) by the leader of its term. */
static bool republish_due(const struct srv_stream *st, uint64_t term)
{
    struct replica_info ri;
    if (!srv_stream_is_leader(st) || st->r == NULL) {
        return false;
    }
    replica_info(st->r, &ri);
    return ri.role == RAFT_LEADER && ri.term == term;
}

void srv_stream_republish(struct srv_stream *st, uint64_t term,
                          const struct keel_stream_entry *e, uint64_t seq,
                          uint64_t prev)
{
    const struct srv_js_xform *x = st->cfg.republish;
    char dest[SRV_JS_SUBJECT_BYTES_MAX + 1];
    char subj[SRV_JS_SUBJECT_BYTES_MAX + 1];
    char ts[SRV_JS_TIME_BYTES];
    size_t dlen = 0;
    if (x == NULL || !republish_due(st, term) ||
        e->subject_len > SRV_JS_SUBJECT_BYTES_MAX ||
        srv_js_xform_apply(x, e->subject, e->subject_len, dest, sizeof dest,
                           &dlen) != 0) {
        return;
    }
    memcpy(subj, e->subject, e->subject_len);
    subj[e->subject_len] = '\0';
    srv_js_time_format(st->sm.last_ts_ns, ts);
    /* An existing header block keeps its lines; ours go before its
     * closing blank line, as nats-server adds them. */
    size_t keep =
        e->hdr_len >= 12 && memcmp(e->hdr + e->hdr_len - 4, "\r\n\r\n", 4) == 0
            ? e->hdr_len - 2
            : 0;
    size_t cap = keep + e->subject_len + strlen(st->cfg.name) + 256;
    char *h = malloc(cap);
    if (h == NULL) {
        SRV_WARN("js", "stream %s: republish of seq %" PRIu64 " dropped",
                 st->cfg.name, seq);
        return;
    }
    size_t n = keep;
    if (keep > 0) {
        memcpy(h, e->hdr, keep);
    } else {
        memcpy(h, "NATS/1.0\r\n", 10);
        n = 10;
    }
    int w = snprintf(h + n, cap - n,
                     "Nats-Stream: %s\r\nNats-Subject: %s\r\nNats-Sequence: "
                     "%" PRIu64 "\r\nNats-Time-Stamp: %s\r\nNats-Last-"
                     "Sequence: %" PRIu64 "\r\n",
                     st->cfg.name, subj, seq, ts, prev);
    ASSERT(w > 0 && (size_t)w < cap - n);
    n += (size_t)w;
    if (st->cfg.republish_headers_only) {
        w = snprintf(h + n, cap - n, "Nats-Msg-Size: %" PRIu64 "\r\n",
                     e->data_len);
        ASSERT(w > 0 && (size_t)w < cap - n);
        n += (size_t)w;
    }
    ASSERT(n + 2 < cap);
    memcpy(h + n, "\r\n", 2);
    n += 2;
    bool ho = st->cfg.republish_headers_only;
    if (srv_js_send(st->js, dest, NULL, h, n, ho ? NULL : e->data,
                    ho ? 0 : e->data_len) != 0) {
        SRV_DEBUG("js",
                  "stream %s: republish of seq %" PRIu64 " to %s "
                  "not delivered",
                  st->cfg.name, seq, dest);
    }
    free(h);
}
