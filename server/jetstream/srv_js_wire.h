/* srv_js_wire: Raft messages encoded for the cluster links, with the
 * entries of an AppendEntries encoded once for every follower it goes to.
 *
 * A leader sends the same range of entries to each follower in the same
 * loop turn; only the head (receiver, commit, prev) differs. The entries
 * part of the last AppendEntries is kept (at most
 * SRV_JS_WIRE_CACHE_BYTES_MAX) and reused when the next one carries the
 * same range of the same group: same prev index, count, first and last
 * term and payload bytes. By Raft's Log Matching property an (index,
 * term) pair names one entry, so the same last (index, term) means the
 * same entries (docs/raft.md). */
#ifndef KEEL_SRV_JS_WIRE_H
#define KEEL_SRV_JS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "srv_js_cluster.h"

/* Entries parts larger than this are encoded per message, not kept. */
#define SRV_JS_WIRE_CACHE_BYTES_MAX (1024 * 1024)

struct srv_js_wire {
    uint8_t gid[SRV_JSC_GID_BYTES];
    uint64_t prev_index;
    uint64_t first_term;
    uint64_t last_term;
    uint64_t payload_bytes;
    uint32_t n;
    void *body; /* the kept entries part, NULL when none */
    size_t body_len;
    uint64_t hits; /* encodes saved (tests, docs/bench.md) */
};

/* One encoded message: head then body, sent as one payload. */
struct srv_js_wire_msg {
    uint8_t head[RAFT_APPEND_HEAD_BYTES_MAX];
    size_t head_len;
    const void *body;
    size_t body_len;
    void *owned; /* freed by srv_js_wire_msg_done; NULL when kept */
};

/* Encode m for the group gid. 0, or raft_msg_encode's errors. */
int srv_js_wire_encode(struct srv_js_wire *w, const uint8_t *gid,
                       const struct raft_msg *m, struct srv_js_wire_msg *out,
                       char *errmsg);
void srv_js_wire_msg_done(struct srv_js_wire_msg *out);
/* Drop the kept entries part. */
void srv_js_wire_free(struct srv_js_wire *w);

#endif
