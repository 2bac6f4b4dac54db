/* Unit tests of srv_js_wire: an AppendEntries range sent to several
 * followers is encoded once, and every frame is byte for byte what
 * raft_msg_encode writes for its follower. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "keel/error.h"
#include "srv_js_wire.h"

static const uint8_t GID_A[SRV_JSC_GID_BYTES] = {1};
static const uint8_t GID_B[SRV_JSC_GID_BYTES] = {2};

static struct raft_entry entries[3] = {
    {5, RAFT_ENTRY_NORMAL, 3, "one"},
    {5, RAFT_ENTRY_NORMAL, 3, "two"},
    {6, RAFT_ENTRY_NORMAL, 5, "three"},
};

static struct raft_msg append_to(uint64_t to)
{
    struct raft_msg m = {.type = RAFT_MSG_APPEND,
                         .from = 1,
                         .from_incarnation = 11,
                         .to = to,
                         .to_incarnation = to * 10,
                         .term = 6};
    m.append.prev_index = 100;
    m.append.prev_term = 5;
    m.append.commit = 90 + to; /* differs per follower */
    m.append.leader_last = 103;
    m.append.n_entries = 3;
    m.append.entries = entries;
    return m;
}

/* Encode m through w and check the frame against raft_msg_encode. */
static void encode_and_check(struct srv_js_wire *w, const uint8_t *gid,
                             const struct raft_msg *m)
{
    struct srv_js_wire_msg out;
    char err[KEEL_ERRMSG_MAX];
    void *want = NULL;
    size_t want_len = 0;
    assert_int_equal(srv_js_wire_encode(w, gid, m, &out, err), 0);
    assert_int_equal(raft_msg_encode(m, &want, &want_len, err), 0);
    assert_int_equal(out.head_len + out.body_len, want_len);
    assert_memory_equal(out.head, want, out.head_len);
    assert_memory_equal(out.body, (uint8_t *)want + out.head_len, out.body_len);
    srv_js_wire_msg_done(&out);
    free(want);
}

static void one_range_to_four_followers_is_encoded_once(void **state)
{
    struct srv_js_wire w = {0};
    (void)state;
    for (uint64_t to = 2; to <= 5; to++) {
        struct raft_msg m = append_to(to);
        encode_and_check(&w, GID_A, &m);
    }
    assert_int_equal(w.hits, 3);
    srv_js_wire_free(&w);
}

static void another_range_group_or_term_is_encoded_again(void **state)
{
    struct srv_js_wire w = {0};
    (void)state;
    struct raft_msg m = append_to(2);
    encode_and_check(&w, GID_A, &m);
    encode_and_check(&w, GID_B, &m); /* another group */
    m.append.prev_index = 101;       /* another range */
    m.append.prev_term = 5;
    m.append.entries = entries + 1;
    m.append.n_entries = 2;
    encode_and_check(&w, GID_B, &m);
    struct raft_entry other[3];
    memcpy(other, entries, sizeof other);
    other[2].term = 7; /* the same indexes, another last term */
    other[2].buf = "seven";
    m = append_to(3);
    m.append.entries = other;
    encode_and_check(&w, GID_A, &m);
    assert_int_equal(w.hits, 0);
    srv_js_wire_free(&w);
}

static void other_types_and_large_ranges_are_not_kept(void **state)
{
    struct srv_js_wire w = {0};
    struct srv_js_wire_msg out;
    char err[KEEL_ERRMSG_MAX];
    (void)state;
    struct raft_msg vote = {
        .type = RAFT_MSG_VOTE, .from = 1, .to = 2, .term = 3};
    encode_and_check(&w, GID_A, &vote);
    struct raft_msg hb = append_to(2); /* a heartbeat: no entries */
    hb.append.n_entries = 0;
    hb.append.entries = NULL;
    encode_and_check(&w, GID_A, &hb);
    assert_null(w.body);
    static uint8_t big[SRV_JS_WIRE_CACHE_BYTES_MAX];
    struct raft_entry one = {6, RAFT_ENTRY_NORMAL, sizeof big, big};
    struct raft_msg m = append_to(2);
    m.append.entries = &one;
    m.append.n_entries = 1;
    assert_int_equal(srv_js_wire_encode(&w, GID_A, &m, &out, err), 0);
    assert_non_null(out.owned); /* over the bound: freed after the send */
    assert_null(w.body);
    srv_js_wire_msg_done(&out);
    srv_js_wire_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_range_to_four_followers_is_encoded_once),
        cmocka_unit_test(another_range_group_or_term_is_encoded_again),
        cmocka_unit_test(other_types_and_large_ranges_are_not_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
