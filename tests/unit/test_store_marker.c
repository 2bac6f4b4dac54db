/* Rule 2 when the newest sync marker is damaged (docs/raft.md finding 14):
 * records 1..10 are one synced batch, 11..12 the next. A marker whose bytes
 * were all written and then changed by a media fault still ends a completed
 * sync, so damage before it is faulty (repaired from a peer, never dropped).
 * A marker a power loss left half-written is a torn tail, whatever part of
 * it survived: a node of one, with no peer to repair from, must not stall
 * on a record that was never acknowledged (docs/design.md §4.7 R5 would keep it
 * read-only until an operator acts).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "format.h"
#include "store_test_util.h"

#define MT_LEN 100 /* payload bytes of every record */

struct fixture {
    struct ts t;
    char path[512];
    uint64_t rec12; /* offset of record 12 */
    uint64_t mark;  /* offset of the marker after it */
};

/* A fresh store with the two batches, closed as a crash. */
static void two_batches(struct fixture *f, uint64_t seed)
{
    char errmsg[KEEL_ERRMSG_MAX];

    ts_init(&f->t, seed, false);
    ts_open(&f->t);
    assert_int_equal(store_hard_state_save(f->t.g, 5, "n1", 2, errmsg), 0);
    assert_true(ts_wait_hard_state(&f->t, 5));
    ts_append(&f->t, 1, 10, 5, MT_LEN, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    ts_append(&f->t, 11, 12, 5, MT_LEN, 1);
    assert_true(ts_wait_persisted(&f->t, 12));
    ts_where(&f->t, 12, f->path, &f->rec12);
    f->mark = f->rec12 + store_fmt_rec_bytes(MT_LEN);
    ts_close(&f->t, false);
}

/* Bytes [off, off + n) of the segment become zero (old, never written). */
static void zero_bytes(struct fixture *f, uint64_t off, size_t n)
{
    uint8_t b[STORE_MARKER_BYTES + 256];
    size_t got = 0;

    assert_true(n <= sizeof b);
    assert_int_equal(fs_fault_peek(f->t.ff, f->path, off, b, n, &got), 0);
    assert_int_equal(got, n);
    for (size_t i = 0; i < n; i++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            if ((b[i] >> bit) & 1u) {
                assert_int_equal(
                    fs_fault_flip_bit(f->t.ff, f->path, off + i, bit), 0);
            }
        }
    }
}

static void
a_flipped_newest_marker_over_a_flipped_record_is_faulty(void **state)
{
    struct fixture *f = *state;
    static uint8_t buf[TS_PAYLOAD_MAX];

    /* Every 7th bit of the marker: magic, index, term, checksum, boot id
     * and the marker's own checksum; the record's bit in its payload, or
     * in its magic (then its length field cannot be trusted either). */
    for (unsigned bit = 0; bit < 8 * STORE_MARKER_BYTES; bit += 7) {
        two_batches(f, 100 + bit);
        uint64_t rec_at = (bit / 7) % 2 == 0 ? 60 : 1;
        assert_int_equal(
            fs_fault_flip_bit(f->t.ff, f->path, f->rec12 + rec_at, 2), 0);
        assert_int_equal(
            fs_fault_flip_bit(f->t.ff, f->path, f->mark + bit / 8, bit % 8), 0);
        ts_open(&f->t);
        const struct store_recovery *r = &f->t.rep;
        if (r->n_faulty != 1 || r->faulty[0].from != 12) {
            fail_msg("marker bit %u: %u faulty ranges, last %llu", bit,
                     r->n_faulty, (unsigned long long)r->last_index);
        }
        assert_int_equal(r->faulty[0].to, 12);
        assert_int_equal(r->last_index, 12);
        assert_false(r->amnesia);
        assert_int_equal(r->extent_index, 12); /* the mended marker's */
        assert_int_equal(r->extent_term, 5);
        ts_expect(&f->t, 11, 5, 1);
        /* Only the true copy verifies against the mended marker. */
        uint32_t l = ts_payload(12, 2, MT_LEN, buf);
        struct store_record wrong = {12, 5, 1, 0, l, buf};
        assert_int_equal(store_repair(f->t.g, &wrong, 1, NULL), KEEL_ECONFLICT);
        l = ts_payload(12, 1, MT_LEN, buf);
        struct store_record right = {12, 5, 1, 0, l, buf};
        assert_int_equal(store_repair(f->t.g, &right, 1, NULL), 0);
        assert_true(ts_wait_repaired(&f->t, 12));
        ts_expect(&f->t, 12, 5, 1);
        /* The repair made the marker sound again: one more flip in it
         * (and in the record) mends as the first did. */
        assert_true(ts_wait_persisted(&f->t, 12));
        ts_close(&f->t, false);
        unsigned again = (bit + 200) % (8 * STORE_MARKER_BYTES);
        assert_int_equal(fs_fault_flip_bit(f->t.ff, f->path, f->rec12 + 70, 5),
                         0);
        assert_int_equal(
            fs_fault_flip_bit(f->t.ff, f->path, f->mark + again / 8, again % 8),
            0);
        ts_open(&f->t);
        assert_int_equal(f->t.rep.n_faulty, 1);
        assert_int_equal(f->t.rep.faulty[0].from, 12);
        assert_int_equal(f->t.rep.last_index, 12);
        ts_fini(&f->t);
    }
}

static void
a_flipped_newest_marker_after_an_intact_record_names_it(void **state)
{
    struct fixture *f = *state;

    two_batches(f, 7);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, f->path, f->rec12 - 100, 1),
                     0); /* record 11 */
    assert_int_equal(fs_fault_flip_bit(f->t.ff, f->path, f->mark + 20, 4), 0);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.n_faulty, 1);
    assert_int_equal(f->t.rep.faulty[0].from, 11);
    assert_int_equal(f->t.rep.faulty[0].to, 11);
    assert_int_equal(f->t.rep.last_index, 12);
    assert_int_equal(f->t.rep.marker_index, 12);
    ts_expect(&f->t, 12, 5, 1);
    /* A sound marker replaced the damaged one: a reopen finds it. */
    assert_true(ts_wait_persisted(&f->t, 12));
    ts_close(&f->t, false);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.n_faulty, 1);
    assert_int_equal(f->t.rep.last_index, 12);
    ts_fini(&f->t);
}

/* Reopen: nothing faulty, no amnesia, the log ends at 11 or 12, and what
 * it keeps is intact. */
static void expect_torn(struct fixture *f, const char *what, size_t at)
{
    ts_open(&f->t);
    const struct store_recovery *r = &f->t.rep;
    if (r->n_faulty != 0 || r->last_index < 11 || r->amnesia) {
        fail_msg("%s %zu: %u faulty ranges (first %llu), last %llu", what, at,
                 r->n_faulty,
                 (unsigned long long)(r->n_faulty ? r->faulty[0].from : 0),
                 (unsigned long long)r->last_index);
    }
    for (uint64_t i = 11; i <= r->last_index; i++) {
        ts_expect(&f->t, i, 5, 1);
    }
    ts_fini(&f->t);
}

/* What a power loss leaves of the second batch: a prefix of its write,
 * cut at any byte of record 12 or of the marker; or record 12's second
 * half lost with the marker split at an 8-aligned (sector or page)
 * boundary, one side kept. */
static void a_half_written_marker_is_a_torn_tail(void **state)
{
    struct fixture *f = *state;
    uint64_t rec_bytes = store_fmt_rec_bytes(MT_LEN);

    for (uint64_t cut = 0; cut < rec_bytes + STORE_MARKER_BYTES; cut++) {
        two_batches(f, 300 + cut);
        uint64_t n = rec_bytes + STORE_MARKER_BYTES - cut;
        for (uint64_t at = 0; at < n; at += 256) {
            zero_bytes(f, f->rec12 + cut + at, n - at < 256 ? n - at : 256);
        }
        expect_torn(f, "prefix cut at", cut);
    }
    for (size_t from = 8; from < STORE_MARKER_BYTES; from += 8) {
        two_batches(f, 600 + from);
        zero_bytes(f, f->rec12 + 80, rec_bytes - 80);
        zero_bytes(f, f->mark + from, STORE_MARKER_BYTES - from);
        expect_torn(f, "marker kept up to", from);
        two_batches(f, 700 + from);
        zero_bytes(f, f->rec12 + 80, rec_bytes - 80);
        zero_bytes(f, f->mark, from);
        expect_torn(f, "marker kept from", from);
    }
}

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    test_free(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_flipped_newest_marker_over_a_flipped_record_is_faulty, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_flipped_newest_marker_after_an_intact_record_names_it, setup,
            teardown),
        cmocka_unit_test_setup_teardown(a_half_written_marker_is_a_torn_tail,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
