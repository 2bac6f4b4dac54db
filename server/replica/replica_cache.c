/* The leader's send cache: the payloads of the entries this leader just
 * proposed, kept by index so the AppendEntries to each follower are filled
 * from memory instead of reading (and checksumming) every entry back from
 * the store once per follower (4 reads per entry at R5: the largest cost of
 * the R5 publish path after the store's own writes, docs/bench.md).
 *
 * Only sending uses it; apply still reads committed entries back from the
 * store. A slot is used only while raft's log holds the same term at its
 * index (Log Matching: same index and term, same entry), so a truncated or
 * replaced entry is never sent from here. Bounded: REPLICA_SEND_CACHE_ENTRIES
 * slots of at most REPLICA_SEND_CACHE_ITEM_BYTES each; emptied when this
 * replica stops leading.
 */
#include <stdlib.h>

#include <keel/assert.h>

#include "replica_int.h"

bool replica__cache_put(struct replica *r, raft_index index, raft_term term,
                        uint8_t type, uint32_t len, uint8_t *buf)
{
    if (len > REPLICA_SEND_CACHE_ITEM_BYTES || r->role != RAFT_LEADER) {
        return false;
    }
    if (r->cache == NULL) {
        r->cache = calloc(REPLICA_SEND_CACHE_ENTRIES, sizeof(*r->cache));
        if (r->cache == NULL) {
            return false; /* sends read the store */
        }
    }
    struct replica_cached *c = &r->cache[index % REPLICA_SEND_CACHE_ENTRIES];
    free(c->buf);
    *c = (struct replica_cached){
        .index = index, .term = term, .type = type, .len = len, .buf = buf};
    return true;
}

bool replica__cache_get(const struct replica *r, raft_index index,
                        struct raft_entry *out)
{
    if (r->cache == NULL) {
        return false;
    }
    const struct replica_cached *c =
        &r->cache[index % REPLICA_SEND_CACHE_ENTRIES];
    if (c->buf == NULL || c->index != index ||
        c->term != raft_term_at(&r->raft, index)) {
        return false;
    }
    *out = (struct raft_entry){
        .term = c->term, .type = c->type, .len = c->len, .buf = c->buf};
    return true;
}

void replica__cache_drop(struct replica *r)
{
    if (r->cache == NULL) {
        return;
    }
    for (uint32_t i = 0; i < REPLICA_SEND_CACHE_ENTRIES; i++) {
        free(r->cache[i].buf);
    }
    free(r->cache);
    r->cache = NULL;
}
