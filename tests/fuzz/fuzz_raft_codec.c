/* libFuzzer target: the Raft message decoder must reject any malformed frame
 * with an error and never crash; a frame it accepts re-encodes to a frame
 * that decodes to the same message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "keel/assert.h"
#include "keel/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct raft_msg m, m2;
    struct raft_entry e[RAFT_APPEND_ENTRIES_MAX];
    struct raft_entry e2[RAFT_APPEND_ENTRIES_MAX];
    char errmsg[KEEL_ERRMSG_MAX];
    void *buf = NULL;
    size_t len = 0;

    if (raft_msg_decode(data, size, &m, e, errmsg) != 0) {
        return 0;
    }
    ASSERT(m.from != 0 && m.to != 0);
    if (raft_msg_encode(&m, &buf, &len, errmsg) != 0) {
        return 0; /* e.g. a frame that grew past the maximum */
    }
    ASSERT(raft_msg_decode(buf, len, &m2, e2, errmsg) == 0);
    ASSERT(m2.type == m.type && m2.term == m.term && m2.from == m.from);
    if (m.type == RAFT_MSG_APPEND) {
        ASSERT(m2.append.n_entries == m.append.n_entries);
        for (uint32_t i = 0; i < m.append.n_entries; i++) {
            ASSERT(e2[i].len == e[i].len && e2[i].term == e[i].term);
            ASSERT(e[i].len == 0 || memcmp(e2[i].buf, e[i].buf, e[i].len) == 0);
        }
    }
    free(buf);
    return 0;
}
