/* Fuzz the snapshot loader's validation (DESIGN.md §5, snapshot/FORMAT.md):
 * header decode and whole-image validation must never crash, assert or
 * read out of bounds on any bytes, and a validated image must re-encode to
 * the same header.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct snap_header h;
    struct snap_expect exp;
    const uint8_t *body = NULL;
    size_t body_len = 0;
    char errmsg[KEEL_ERRMSG_MAX];

    if (snap_header_decode(data, size, &h, errmsg) != 0) {
        return 0;
    }
    /* Expect what the header claims (the LMDB-named case) and something
     * else (a stale or foreign file). */
    memcpy(exp.group, h.group, 16);
    exp.index = h.index;
    exp.term = h.term;
    if (snap_validate(data, size, &exp, &h, &body, &body_len, errmsg) == 0) {
        uint8_t again[SNAP_HEADER_BYTES];
        snap_header_encode(&h, again);
        if (memcmp(again, data, SNAP_HEADER_BYTES) != 0 ||
            body != data + SNAP_HEADER_BYTES ||
            body_len != size - SNAP_HEADER_BYTES) {
            __builtin_trap();
        }
        exp.term = h.term + 1;
        if (snap_validate(data, size, &exp, &h, &body, &body_len, errmsg) ==
            0) {
            __builtin_trap(); /* a term LMDB does not name must not load */
        }
    }
    return 0;
}
