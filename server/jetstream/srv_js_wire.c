/* srv_js_wire: Raft messages for the cluster links, the entries of an
 * AppendEntries encoded once for all followers (see srv_js_wire.h). */
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "srv_js_wire.h"

/* The key of m's entries: prev index, count, first and last term and the
 * payload bytes. */
static void key_of(const struct raft_msg *m, uint64_t *first, uint64_t *last,
                   uint64_t *bytes)
{
    const struct raft_msg_append *a = &m->append;
    uint64_t b = 0;

    ASSERT(a->n_entries > 0 && a->entries != NULL);
    for (uint32_t i = 0; i < a->n_entries; i++) {
        b += a->entries[i].len;
    }
    *first = a->entries[0].term;
    *last = a->entries[a->n_entries - 1].term;
    *bytes = b;
}

static bool kept(const struct srv_js_wire *w, const uint8_t *gid,
                 const struct raft_msg *m, uint64_t first, uint64_t last,
                 uint64_t bytes)
{
    return w->body != NULL && w->n == m->append.n_entries &&
           w->prev_index == m->append.prev_index && w->first_term == first &&
           w->last_term == last && w->payload_bytes == bytes &&
           memcmp(w->gid, gid, sizeof w->gid) == 0;
}

int srv_js_wire_encode(struct srv_js_wire *w, const uint8_t *gid,
                       const struct raft_msg *m, struct srv_js_wire_msg *out,
                       char *errmsg)
{
    void *buf = NULL;
    size_t len = 0;
    uint64_t first = 0, last = 0, bytes = 0;

    ASSERT(w != NULL && gid != NULL && m != NULL && out != NULL);
    out->head_len = 0;
    out->owned = NULL;
    if (m->type != RAFT_MSG_APPEND || m->append.n_entries == 0 ||
        m->append.entries == NULL) {
        int rv = raft_msg_encode(m, &buf, &len, errmsg);
        out->body = out->owned = buf;
        out->body_len = len;
        return rv;
    }
    int rv = raft_msg_encode_append_head(m, out->head, &out->head_len, errmsg);
    if (rv != 0) {
        return rv;
    }
    key_of(m, &first, &last, &bytes);
    if (kept(w, gid, m, first, last, bytes)) {
        w->hits++;
        out->body = w->body;
        out->body_len = w->body_len;
        return 0;
    }
    rv = raft_msg_encode_append_entries(m, &buf, &len, errmsg);
    if (rv != 0) {
        return rv;
    }
    out->body = buf;
    out->body_len = len;
    if (len > SRV_JS_WIRE_CACHE_BYTES_MAX) {
        out->owned = buf; /* too large to keep */
        return 0;
    }
    free(w->body);
    memcpy(w->gid, gid, sizeof w->gid);
    w->prev_index = m->append.prev_index;
    w->n = m->append.n_entries;
    w->first_term = first;
    w->last_term = last;
    w->payload_bytes = bytes;
    w->body = buf;
    w->body_len = len;
    return 0;
}

void srv_js_wire_msg_done(struct srv_js_wire_msg *out)
{
    free(out->owned);
    out->owned = NULL;
}

void srv_js_wire_free(struct srv_js_wire *w)
{
    free(w->body);
    w->body = NULL;
    w->body_len = 0;
}
