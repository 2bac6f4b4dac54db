/* srv_stream_snap: a stream snapshot body carries the whole stream state
 * (state, deleted sequences, seq -> index, dedupe) and restores it
 * exactly; a damaged body is refused, never half-applied into a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_int.h"
#include "keel_stream_entry.h"
#include "srv_stream_snap.h"

struct fixture {
    struct srv_js js; /* no consumer ops: the stream part only */
    struct srv_stream a;
    struct srv_stream b;
    uint64_t index;
    uint8_t *body;
    size_t len;
};

static void stream_init(struct fixture *f, struct srv_stream *st)
{
    st->js = &f->js;
    snprintf(st->cfg.name, sizeof st->cfg.name, "S");
    assert_int_equal(srv_stream_sm_init(&st->sm, "S"), 0);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    stream_init(f, &f->a);
    stream_init(f, &f->b);
    f->index = 10;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_stream_sm_close(&f->a.sm);
    srv_stream_sm_close(&f->b.sm);
    free(f->body);
    free(f);
    return 0;
}

static void apply(struct fixture *f, const struct keel_stream_entry *e)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    struct keel_stream_entry d;
    struct srv_stream_result res;
    char err[256];
    assert_int_equal(keel_stream_entry_encode(e, &buf, &len), 0);
    assert_int_equal(keel_stream_entry_decode(buf, len, &d, err), 0);
    assert_int_equal(srv_stream_sm_apply(&f->a.sm, f->index++, &d, &res), 0);
    free(buf);
}

static void pub(struct fixture *f, int64_t ts, const char *subj,
                const char *hdr)
{
    struct keel_stream_entry e = {
        .kind = KEEL_STREAM_E_PUBLISH,
        .ts_ns = ts,
        .subject = subj,
        .subject_len = strlen(subj),
        .hdr = (const uint8_t *)hdr,
        .hdr_len = hdr != NULL ? strlen(hdr) : 0,
        .data = (const uint8_t *)"d",
        .data_len = 1,
    };
    apply(f, &e);
}

static void fill(struct fixture *f)
{
    const char *json = "{\"name\":\"S\",\"subjects\":[\"s.>\"],"
                       "\"duplicate_window\":60000000000}";
    struct keel_stream_entry c = {.kind = KEEL_STREAM_E_CONFIG,
                                  .subject = json,
                                  .subject_len = strlen(json)};
    apply(f, &c);
    for (int i = 0; i < 20; i++) {
        char hdr[64];
        snprintf(hdr, sizeof hdr, "NATS/1.0\r\nNats-Msg-Id: id-%d\r\n\r\n", i);
        pub(f, 1000 + i, i % 2 ? "s.odd" : "s.even", hdr);
    }
    struct keel_stream_entry del = {.kind = KEEL_STREAM_E_DELETE, .seq = 7};
    apply(f, &del);
    assert_int_equal(
        srv_stream_snap_encode(NULL, f->index - 1, &f->body, &f->len, &f->a),
        0);
}

static void a_restored_stream_equals_the_snapshotted_one(void **state)
{
    struct fixture *f = *state;
    fill(f);
    assert_int_equal(
        srv_stream_snap_restore(NULL, f->index - 1, f->body, f->len, &f->b), 0);
    const struct srv_stream_sm *x = &f->a.sm, *y = &f->b.sm;
    assert_int_equal(y->msgs, x->msgs);
    assert_int_equal(y->bytes, x->bytes);
    assert_int_equal(y->last_seq, x->last_seq);
    assert_int_equal(y->deleted, x->deleted);
    assert_int_equal(y->subjects.count, x->subjects.count);
    assert_null(srv_stream_sm_get(y, 7));
    for (uint64_t s = 1; s <= x->last_seq; s++) {
        const struct srv_stream_slot *p = srv_stream_sm_get(x, s);
        const struct srv_stream_slot *q = srv_stream_sm_get(y, s);
        assert_true((p == NULL) == (q == NULL));
        if (p != NULL) {
            assert_int_equal(q->index, p->index); /* seq -> Raft index */
            assert_int_equal(q->ts_ns, p->ts_ns);
        }
    }
    assert_int_equal(srv_dedupe_find(&y->dedupe, "id-4", 4), 5);
    /* Encoding the restored one gives the same bytes (deterministic). */
    uint8_t *again = NULL;
    size_t len = 0;
    assert_int_equal(srv_stream_snap_encode(NULL, 0, &again, &len, &f->b), 0);
    assert_int_equal(len, f->len);
    assert_memory_equal(again, f->body, len);
    free(again);
}

static void a_damaged_body_is_refused(void **state)
{
    struct fixture *f = *state;
    fill(f);
    /* Truncated at every length: refused, never read past the end. */
    for (size_t n = 0; n < f->len; n += 1 + n / 8) {
        uint8_t *cut = malloc(n > 0 ? n : 1);
        memcpy(cut, f->body, n);
        assert_int_not_equal(srv_stream_snap_restore(NULL, 1, cut, n, &f->b),
                             0);
        free(cut);
    }
    f->body[0] ^= 1; /* magic */
    assert_int_equal(srv_stream_snap_restore(NULL, 1, f->body, f->len, &f->b),
                     KEEL_ECORRUPT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_restored_stream_equals_the_snapshotted_one, setup, teardown),
        cmocka_unit_test_setup_teardown(a_damaged_body_is_refused, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
