/* Unit tests of the Raft message codec: round trips, and strict rejection
 * of truncated, trailing, wrongly typed, unknown and oversized frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "keel/error.h"

struct fixture {
    struct raft_msg m;
    struct raft_msg out;
    struct raft_entry entries[3];
    struct raft_entry decoded[RAFT_APPEND_ENTRIES_MAX];
    uint8_t cfg[RAFT_CONFIG_BYTES_MAX];
    void *buf;
    size_t len;
    char errmsg[KEEL_ERRMSG_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    struct raft_config c = {.n = 2};
    c.servers[0] = (struct raft_server){1, 11, RAFT_VOTER};
    c.servers[1] = (struct raft_server){2, 22, RAFT_LEARNER};
    uint32_t n = raft_config_encode(&c, f->cfg, sizeof f->cfg);
    f->m.type = RAFT_MSG_APPEND;
    f->m.from = 1;
    f->m.from_incarnation = 11;
    f->m.to = 2;
    f->m.to_incarnation = 22;
    f->m.term = 7;
    f->m.append.prev_index = 40;
    f->m.append.prev_term = 6;
    f->m.append.commit = 39;
    f->m.append.leader_last = 43;
    f->m.append.ctx = 5;
    f->entries[0] = (struct raft_entry){7, RAFT_ENTRY_NORMAL, 5, "hello"};
    f->entries[1] = (struct raft_entry){7, RAFT_ENTRY_BARRIER, 0, NULL};
    f->entries[2] = (struct raft_entry){7, RAFT_ENTRY_CONFIG, n, f->cfg};
    f->m.append.n_entries = 3;
    f->m.append.entries = f->entries;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    free(f->buf);
    free(f);
    return 0;
}

static int decode(struct fixture *f, const void *buf, size_t len)
{
    return raft_msg_decode(buf, len, &f->out, f->decoded, f->errmsg);
}

static void append_entries_round_trip_with_payloads(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(raft_msg_encode(&f->m, &f->buf, &f->len, f->errmsg), 0);
    assert_int_equal(decode(f, f->buf, f->len), 0);
    assert_int_equal(f->out.type, RAFT_MSG_APPEND);
    assert_int_equal(f->out.from_incarnation, 11);
    assert_int_equal(f->out.to_incarnation, 22);
    assert_int_equal(f->out.append.prev_index, 40);
    assert_int_equal(f->out.append.leader_last, 43);
    assert_int_equal(f->out.append.n_entries, 3);
    assert_int_equal(f->decoded[0].len, 5);
    assert_memory_equal(f->decoded[0].buf, "hello", 5);
    assert_int_equal(f->decoded[2].type, RAFT_ENTRY_CONFIG);
    /* Payloads point into the frame: no copy per entry. */
    const uint8_t *b = f->buf;
    assert_true((const uint8_t *)f->decoded[0].buf >= b &&
                (const uint8_t *)f->decoded[0].buf < b + f->len);
}

static void every_message_type_round_trips(void **state)
{
    struct fixture *f = *state;
    uint8_t types[] = {RAFT_MSG_APPEND_RESP,   RAFT_MSG_VOTE,
                       RAFT_MSG_VOTE_RESP,     RAFT_MSG_SNAPSHOT,
                       RAFT_MSG_SNAPSHOT_RESP, RAFT_MSG_TIMEOUT_NOW};
    for (size_t i = 0; i < sizeof types; i++) {
        struct raft_msg m = f->m;
        memset(&m.append, 0, sizeof m.snapshot);
        m.type = types[i];
        if (m.type == RAFT_MSG_SNAPSHOT) {
            m.snapshot.index = 900;
            m.snapshot.chunk = "abc";
            m.snapshot.len = 3;
            m.snapshot.config.n = 1;
            m.snapshot.config.servers[0] = (struct raft_server){1, 1, 1};
        }
        if (m.type == RAFT_MSG_APPEND_RESP) {
            m.append_resp.match = 33;
        }
        free(f->buf);
        f->buf = NULL;
        assert_int_equal(raft_msg_encode(&m, &f->buf, &f->len, f->errmsg), 0);
        assert_int_equal(decode(f, f->buf, f->len), 0);
        assert_int_equal(f->out.type, types[i]);
        assert_int_equal(f->out.term, 7);
        if (m.type == RAFT_MSG_SNAPSHOT) {
            assert_int_equal(f->out.snapshot.index, 900);
            assert_int_equal(f->out.snapshot.config.n, 1);
        }
        if (m.type == RAFT_MSG_APPEND_RESP) {
            assert_int_equal(f->out.append_resp.match, 33);
        }
    }
}

static void fetch_and_discard_answers_round_trip_with_their_copy(void **state)
{
    struct fixture *f = *state;
    struct raft_msg m = f->m;
    memset(&m.append, 0, sizeof m.snapshot);
    m.type = RAFT_MSG_FETCH_RESP;
    m.discard_resp.index = 41;
    m.discard_resp.status = RAFT_DISCARD_HAS;
    m.discard_resp.term = 7;
    m.discard_resp.entry = &f->entries[0];
    assert_int_equal(raft_msg_encode(&m, &f->buf, &f->len, f->errmsg), 0);
    assert_int_equal(decode(f, f->buf, f->len), 0);
    assert_int_equal(f->out.discard_resp.index, 41);
    assert_int_equal(f->out.discard_resp.status, RAFT_DISCARD_HAS);
    assert_non_null(f->out.discard_resp.entry);
    assert_int_equal(f->out.discard_resp.entry->len, 5);
    assert_memory_equal(f->out.discard_resp.entry->buf, "hello", 5);
    /* A copy with any other status is never sent. */
    m.discard_resp.status = RAFT_DISCARD_NONE;
    free(f->buf);
    f->buf = NULL;
    assert_int_equal(raft_msg_encode(&m, &f->buf, &f->len, f->errmsg),
                     KEEL_EINVAL);
    m.type = RAFT_MSG_DISCARD;
    m.discard.index = 41;
    assert_int_equal(raft_msg_encode(&m, &f->buf, &f->len, f->errmsg), 0);
    assert_int_equal(decode(f, f->buf, f->len), 0);
    assert_int_equal(f->out.type, RAFT_MSG_DISCARD);
    assert_int_equal(f->out.discard.index, 41);
}

static void every_truncation_of_a_frame_is_rejected(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(raft_msg_encode(&f->m, &f->buf, &f->len, f->errmsg), 0);
    for (size_t n = 0; n < f->len; n++) {
        assert_int_not_equal(decode(f, f->buf, n), 0);
    }
}

static void trailing_bytes_are_rejected(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(raft_msg_encode(&f->m, &f->buf, &f->len, f->errmsg), 0);
    uint8_t *b = malloc(f->len + 1);
    memcpy(b, f->buf, f->len);
    b[f->len] = 0x00;
    assert_int_equal(decode(f, b, f->len + 1), KEEL_EPROTO);
    free(b);
}

static void
wrong_version_unknown_type_and_wrong_field_types_are_rejected(void **state)
{
    struct fixture *f = *state;
    /* [2, 7, 1, 0, 2, 0, 5]: version 2. */
    const uint8_t v2[] = {0x97, 2, 7, 1, 0, 2, 0, 5};
    /* [1, 99, ...]: unknown type. */
    const uint8_t t99[] = {0x97, 1, 99, 1, 0, 2, 0, 5};
    /* TimeoutNow whose term is a string. */
    const uint8_t str[] = {0x97, 1, 7, 1, 0, 2, 0, 0xa1, 'x'};
    /* TimeoutNow from node 0. */
    const uint8_t zero[] = {0x97, 1, 7, 0, 0, 2, 0, 5};
    /* Vote resp with granted = 2. */
    const uint8_t flag[] = {0x99, 1, 4, 1, 0, 2, 0, 5, 0, 2};
    const uint8_t ok[] = {0x97, 1, 7, 1, 0, 2, 0, 5};
    assert_int_equal(decode(f, ok, sizeof ok), 0);
    assert_int_equal(decode(f, v2, sizeof v2), KEEL_EVERSION);
    assert_int_equal(decode(f, t99, sizeof t99), KEEL_EPROTO);
    assert_int_equal(decode(f, str, sizeof str), KEEL_EPROTO);
    assert_int_equal(decode(f, zero, sizeof zero), KEEL_EPROTO);
    assert_int_equal(decode(f, flag, sizeof flag), KEEL_EPROTO);
}

static void huge_declared_counts_are_rejected_without_allocating(void **state)
{
    struct fixture *f = *state;
    /* array32 announcing 4 billion elements, then nothing. */
    const uint8_t arr[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01};
    /* bin32 announcing 4 GiB. */
    const uint8_t bin[] = {0xc6, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_int_equal(decode(f, arr, sizeof arr), KEEL_ETRUNCATED);
    assert_int_equal(decode(f, bin, sizeof bin), KEEL_ETRUNCATED);
    assert_int_not_equal(decode(f, NULL, 0), 0);
}

static void too_many_entries_and_bad_configurations_are_rejected(void **state)
{
    struct fixture *f = *state;
    struct raft_entry many[RAFT_APPEND_ENTRIES_MAX + 1];
    for (uint32_t i = 0; i <= RAFT_APPEND_ENTRIES_MAX; i++) {
        many[i] = (struct raft_entry){7, RAFT_ENTRY_NORMAL, 1, "x"};
    }
    f->m.append.entries = many;
    f->m.append.n_entries = RAFT_APPEND_ENTRIES_MAX + 1;
    assert_int_equal(raft_msg_encode(&f->m, &f->buf, &f->len, f->errmsg),
                     KEEL_EINVAL);
    f->m.append.entries = f->entries;
    f->m.append.n_entries = 3;
    f->cfg[1] = 3; /* claims three servers, carries two */
    assert_int_equal(raft_msg_encode(&f->m, &f->buf, &f->len, f->errmsg), 0);
    assert_int_equal(decode(f, f->buf, f->len), KEEL_EPROTO);
}

/* The two parts a leader encodes apart (the head per follower, the
 * entries once) join to exactly raft_msg_encode's bytes, for small and
 * full-width fields and payloads past msgpack's first buffer. */
static void append_head_and_entries_join_to_the_encoding(void **state)
{
    struct fixture *f = *state;
    static uint8_t big[20000];
    uint64_t wide[] = {1, 200, 70000, 5000000000ull, UINT64_MAX};
    memset(big, 0xab, sizeof big);
    f->entries[1] = (struct raft_entry){7, RAFT_ENTRY_NORMAL, sizeof big, big};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        struct raft_msg m = f->m;
        uint8_t head[RAFT_APPEND_HEAD_BYTES_MAX];
        size_t hlen = 0, blen = 0;
        void *body = NULL;
        m.from = m.to = m.term = wide[i];
        m.from_incarnation = m.to_incarnation = wide[i];
        m.append.prev_index = m.append.prev_term = wide[i];
        m.append.commit = m.append.leader_last = m.append.ctx = wide[i];
        free(f->buf);
        f->buf = NULL;
        assert_int_equal(raft_msg_encode(&m, &f->buf, &f->len, f->errmsg), 0);
        assert_int_equal(
            raft_msg_encode_append_head(&m, head, &hlen, f->errmsg), 0);
        assert_int_equal(
            raft_msg_encode_append_entries(&m, &body, &blen, f->errmsg), 0);
        assert_int_equal(hlen + blen, f->len);
        assert_memory_equal(head, f->buf, hlen);
        assert_memory_equal(body, (uint8_t *)f->buf + hlen, blen);
        free(body);
    }
    /* What raft_msg_encode refuses, the parts refuse too. */
    struct raft_msg m = f->m;
    uint8_t head[RAFT_APPEND_HEAD_BYTES_MAX];
    size_t hlen = 0;
    m.to = 0;
    assert_int_equal(raft_msg_encode_append_head(&m, head, &hlen, f->errmsg),
                     KEEL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(append_entries_round_trip_with_payloads,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(every_message_type_round_trips, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            append_head_and_entries_join_to_the_encoding, setup, teardown),
        cmocka_unit_test_setup_teardown(
            fetch_and_discard_answers_round_trip_with_their_copy, setup,
            teardown),
        cmocka_unit_test_setup_teardown(every_truncation_of_a_frame_is_rejected,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(trailing_bytes_are_rejected, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            wrong_version_unknown_type_and_wrong_field_types_are_rejected,
            setup, teardown),
        cmocka_unit_test_setup_teardown(
            huge_declared_counts_are_rejected_without_allocating, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            too_many_entries_and_bad_configurations_are_rejected, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
