/* srv_outq: the block queue must behave exactly like one FIFO byte string
 * whose in-flight prefix is never touched by appends or drops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "srv_outq.h"

#define MODEL_MAX (8 * SRV_OUT_BLOCK_BYTES)

struct fixture {
    struct srv_outpool pool;
    struct srv_outq q;
    char *model; /* the bytes the queue must hold, unwritten ones only */
    size_t model_len;
    char *scratch;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    srv_outpool_init(&f->pool);
    srv_outq_init(&f->q);
    f->model = malloc(MODEL_MAX);
    f->scratch = malloc(MODEL_MAX);
    assert_non_null(f->model);
    assert_non_null(f->scratch);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_outq_close(&f->q, &f->pool);
    assert_int_equal(f->pool.nlive, 0);
    srv_outpool_close(&f->pool);
    free(f->model);
    free(f->scratch);
    free(f);
    return 0;
}

/* Concatenate the in-flight prefix (from the head) and the iovecs. */
static size_t gather(struct fixture *f, char *out)
{
    uv_buf_t iov[SRV_OUT_IOV_MAX];
    size_t total = 0, n = 0, flight = f->q.flight;
    unsigned cnt;

    for (struct srv_outblk *b = f->q.head; b != NULL && flight > 0;
         b = b->next) {
        size_t take = b->len - b->off < flight ? b->len - b->off : flight;
        memcpy(out + n, b->data + b->off, take);
        n += take;
        flight -= take;
    }
    cnt = srv_outq_iov(&f->q, iov, SRV_OUT_IOV_MAX, &total);
    for (unsigned i = 0; i < cnt; i++) {
        memcpy(out + n, iov[i].base, iov[i].len);
        n += iov[i].len;
    }
    return n;
}

static void check_model(struct fixture *f)
{
    assert_int_equal(f->q.bytes, f->model_len);
    assert_int_equal(gather(f, f->scratch), f->model_len);
    assert_memory_equal(f->scratch, f->model, f->model_len);
}

static void model_append(struct fixture *f, size_t len, uint32_t seed)
{
    char *src = malloc(len + 1);
    assert_non_null(src);
    for (size_t i = 0; i < len; i++) {
        src[i] = (char)(seed + i * 31);
    }
    assert_int_equal(srv_outq_append(&f->q, &f->pool, src, len), 0);
    memcpy(f->model + f->model_len, src, len);
    f->model_len += len;
    free(src);
}

static void model_consume(struct fixture *f, size_t n)
{
    srv_outq_consume(&f->q, &f->pool, n);
    memmove(f->model, f->model + n, f->model_len - n);
    f->model_len -= n;
}

static void appends_spanning_blocks_keep_every_byte_in_order(void **state)
{
    struct fixture *f = *state;

    model_append(f, 100, 1);
    model_append(f, SRV_OUT_BLOCK_BYTES + 7, 2);
    model_append(f, 3 * SRV_OUT_BLOCK_BYTES, 3);
    check_model(f);
    assert_true(f->pool.nlive >= 5);
}

static void reserve_and_commit_write_in_place_at_the_tail(void **state)
{
    struct fixture *f = *state;
    char *p;

    model_append(f, SRV_OUT_BLOCK_BYTES - 10, 4);
    /* 20 bytes do not fit the 10 left: a new block is taken. */
    p = srv_outq_reserve(&f->q, &f->pool, 20);
    assert_non_null(p);
    memcpy(p, "abcdefghijklmnopqrst", 20);
    srv_outq_commit(&f->q, 20);
    memcpy(f->model + f->model_len, "abcdefghijklmnopqrst", 20);
    f->model_len += 20;
    check_model(f);
    assert_int_equal(f->pool.nlive, 2);
}

static void consuming_everything_returns_every_block_to_the_pool(void **state)
{
    struct fixture *f = *state;

    model_append(f, 2 * SRV_OUT_BLOCK_BYTES + 5, 5);
    model_consume(f, 1000);
    check_model(f);
    model_consume(f, f->model_len);
    check_model(f);
    assert_null(f->q.head);
    assert_null(f->q.tail);
    assert_int_equal(f->pool.nlive, 0);
    assert_int_equal(f->pool.nfree, 3);
}

static void
appends_during_a_write_never_change_the_in_flight_bytes(void **state)
{
    struct fixture *f = *state;
    uv_buf_t iov[SRV_OUT_IOV_MAX];
    size_t total = 0;
    char before[200];

    model_append(f, 150, 6);
    srv_outq_iov(&f->q, iov, SRV_OUT_IOV_MAX, &total);
    assert_int_equal(total, 150);
    memcpy(before, iov[0].base, 150);
    srv_outq_start_flight(&f->q, total);
    model_append(f, 2 * SRV_OUT_BLOCK_BYTES, 7);
    /* The iovec handed to the kernel still reads the same bytes. */
    assert_memory_equal(iov[0].base, before, 150);
    assert_int_equal(iov[0].len, 150);
    /* The next iovec starts after the flight. */
    srv_outq_iov(&f->q, iov, SRV_OUT_IOV_MAX, &total);
    assert_int_equal(total, f->model_len - 150);
    srv_outq_end_flight(&f->q, &f->pool);
    memmove(f->model, f->model + 150, f->model_len - 150);
    f->model_len -= 150;
    check_model(f);
}

static void dropping_unsent_keeps_exactly_the_in_flight_prefix(void **state)
{
    struct fixture *f = *state;

    model_append(f, SRV_OUT_BLOCK_BYTES + 300, 8);
    model_consume(f, 40);
    srv_outq_start_flight(&f->q, SRV_OUT_BLOCK_BYTES);
    model_append(f, 3 * SRV_OUT_BLOCK_BYTES, 9);
    srv_outq_drop_unsent(&f->q, &f->pool);
    f->model_len = SRV_OUT_BLOCK_BYTES;
    check_model(f);
    srv_outq_end_flight(&f->q, &f->pool);
    assert_int_equal(f->q.bytes, 0);
    assert_int_equal(f->pool.nlive, 0);
    /* The queue is usable again. */
    f->model_len = 0;
    model_append(f, 10, 10);
    check_model(f);
}

static void dropping_with_nothing_in_flight_empties_the_queue(void **state)
{
    struct fixture *f = *state;

    model_append(f, 5 * SRV_OUT_BLOCK_BYTES, 11);
    srv_outq_drop_unsent(&f->q, &f->pool);
    assert_int_equal(f->q.bytes, 0);
    assert_null(f->q.head);
    assert_int_equal(f->pool.nlive, 0);
}

static void iov_is_bounded_by_its_array(void **state)
{
    struct fixture *f = *state;
    uv_buf_t iov[2];
    size_t total = 0;

    model_append(f, 4 * SRV_OUT_BLOCK_BYTES, 12);
    assert_int_equal(srv_outq_iov(&f->q, iov, 2, &total), 2);
    assert_int_equal(total, 2 * SRV_OUT_BLOCK_BYTES);
}

static void the_pool_keeps_at_most_its_maximum(void **state)
{
    struct fixture *f = *state;
    size_t n = SRV_OUT_POOL_BLOCKS_MAX + 8;
    struct srv_outq *qs = calloc(n, sizeof *qs);

    assert_non_null(qs);
    for (size_t i = 0; i < n; i++) {
        srv_outq_init(&qs[i]);
        assert_int_equal(srv_outq_append(&qs[i], &f->pool, "x", 1), 0);
    }
    assert_int_equal(f->pool.nlive, n);
    for (size_t i = 0; i < n; i++) {
        srv_outq_close(&qs[i], &f->pool);
    }
    assert_int_equal(f->pool.nlive, 0);
    assert_int_equal(f->pool.nfree, SRV_OUT_POOL_BLOCKS_MAX);
    free(qs);
}

/* Random appends, partial writes, flights and drops against the model. */
static void random_operations_match_a_byte_string_model(void **state)
{
    struct fixture *f = *state;
    uint32_t x = 12345;

    for (int step = 0; step < 20000; step++) {
        x = x * 1103515245u + 12345u;
        uint32_t r = x >> 8;
        switch (r % 5) {
        case 0:
        case 1: {
            size_t len = r % 3 == 0 ? (r >> 4) % (2 * SRV_OUT_BLOCK_BYTES)
                                    : (r >> 4) % 200;
            if (f->model_len + len <= MODEL_MAX) {
                model_append(f, len, r);
            }
            break;
        }
        case 2:
            if (f->q.flight == 0) {
                size_t unsent = f->model_len;
                model_consume(f, unsent == 0 ? 0 : (r >> 4) % (unsent + 1));
            }
            break;
        case 3:
            if (f->q.flight == 0) {
                uv_buf_t iov[SRV_OUT_IOV_MAX];
                size_t total = 0;
                srv_outq_iov(&f->q, iov, SRV_OUT_IOV_MAX, &total);
                srv_outq_start_flight(&f->q, total);
            } else {
                size_t fl = f->q.flight;
                srv_outq_end_flight(&f->q, &f->pool);
                memmove(f->model, f->model + fl, f->model_len - fl);
                f->model_len -= fl;
            }
            break;
        default:
            if (r % 7 == 0) {
                srv_outq_drop_unsent(&f->q, &f->pool);
                f->model_len = f->q.flight;
            }
            break;
        }
        check_model(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            appends_spanning_blocks_keep_every_byte_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(
            reserve_and_commit_write_in_place_at_the_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(
            consuming_everything_returns_every_block_to_the_pool, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            appends_during_a_write_never_change_the_in_flight_bytes, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            dropping_unsent_keeps_exactly_the_in_flight_prefix, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            dropping_with_nothing_in_flight_empties_the_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(iov_is_bounded_by_its_array, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_pool_keeps_at_most_its_maximum,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            random_operations_match_a_byte_string_model, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
