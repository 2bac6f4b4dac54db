/* Fuzz the snapshot loader's validation (docs/design.md §5,
 * snapshot/FORMAT.md): header decode and whole-image validation must never
 * crash, assert or read out of bounds on any bytes, and a validated image must
 * re-encode to the same header.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A transfer frame that checks out re-seals to the same bytes. */
static void check_frame(const uint8_t *data, size_t size)
{
    struct snap_frame fm;
    char errmsg[KEEL_ERRMSG_MAX];

    if (snap_frame_check(data, size, &fm, errmsg) != 0) {
        return;
    }
    uint8_t *copy = malloc(size);
    if (copy == NULL) {
        return;
    }
    memcpy(copy, data, size);
    snap_frame_seal(copy, fm.len, fm.data_off, fm.total);
    if (memcmp(copy, data, size) != 0) {
        __builtin_trap();
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct snap_header h;
    struct snap_expect exp;
    const uint8_t *body = NULL;
    size_t body_len = 0;
    char errmsg[KEEL_ERRMSG_MAX];

    check_frame(data, size);
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
