/* libFuzzer target for the stream entry decoder (keel_stream_entry) and the
 * state machine behind it: a decoded entry re-encodes to bytes that decode
 * to the same fields, applies to a state machine without crashing, and the
 * state's snapshot restores to the same bytes. Input starting with 0xff is
 * fed to srv_stream_sm_restore instead (snapshot decoder robustness). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/error.h"
#include "keel_stream_entry.h"
#include "srv_stream_sm.h"

static void same_entry(const struct keel_stream_entry *a,
                       const struct keel_stream_entry *b)
{
    ASSERT(a->kind == b->kind && a->ts_ns == b->ts_ns && a->seq == b->seq &&
           a->keep == b->keep);
    ASSERT(a->subject_len == b->subject_len && a->hdr_len == b->hdr_len &&
           a->data_len == b->data_len);
    ASSERT(a->subject_len == 0 ||
           memcmp(a->subject, b->subject, a->subject_len) == 0);
    ASSERT(a->hdr_len == 0 || memcmp(a->hdr, b->hdr, a->hdr_len) == 0);
    ASSERT(a->data_len == 0 || memcmp(a->data, b->data, a->data_len) == 0);
}

static void snapshot_round_trip(const struct srv_stream_sm *sm)
{
    char err[KEEL_ERRMSG_MAX];
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    struct srv_stream_sm r;
    ASSERT(srv_stream_sm_snapshot(sm, &a, &alen) == 0);
    ASSERT(srv_stream_sm_init(&r, "F") == 0);
    ASSERT(srv_stream_sm_restore(&r, a, alen, err) == 0);
    ASSERT(srv_stream_sm_snapshot(&r, &b, &blen) == 0);
    ASSERT(alen == blen && memcmp(a, b, alen) == 0);
    srv_stream_sm_close(&r);
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[KEEL_ERRMSG_MAX];
    struct keel_stream_entry e, again;
    struct srv_stream_sm sm;
    struct srv_stream_result res;
    uint8_t *enc = NULL;
    size_t len = 0;
    ASSERT(srv_stream_sm_init(&sm, "F") == 0);
    if (size > 0 && data[0] == 0xff) {
        (void)srv_stream_sm_restore(&sm, data + 1, size - 1, err);
        srv_stream_sm_close(&sm);
        return 0;
    }
    if (keel_stream_entry_decode(data, size, &e, err) == 0) {
        ASSERT(keel_stream_entry_encode(&e, &enc, &len) == 0);
        ASSERT(keel_stream_entry_decode(enc, len, &again, err) == 0);
        same_entry(&e, &again);
        /* Twice: the second publish meets the first (dedupe, limits). */
        ASSERT(srv_stream_sm_apply(&sm, 1, &e, &res) == 0);
        ASSERT(srv_stream_sm_apply(&sm, 2, &e, &res) == 0);
        snapshot_round_trip(&sm);
        free(enc);
    }
    srv_stream_sm_close(&sm);
    return 0;
}
