/* cli_bench_report: latency percentiles over every requester's samples and
 * the JSON report that tools/bench-vs-nats parses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_bench.h"

#define SAMPLES_MAX 1000

struct fixture {
    struct bench b;
    struct bench_pub pubs[2];
    int64_t lat[2][SAMPLES_MAX];
    struct bench_result r;
    char errmsg[KEEL_ERRMSG_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    f->b.pubs = f->pubs;
    f->b.npubs = 2;
    f->pubs[0].lat_ns = f->lat[0];
    f->pubs[1].lat_ns = f->lat[1];
    f->b.cfg.mode = BENCH_REQ;
    f->b.cfg.mode_name = "req";
    f->b.cfg.subject = "a\"b";
    f->b.cfg.size = 16;
    f->b.cfg.msgs = 100;
    f->b.cfg.pubs = 2;
    f->b.cfg.subs = 1;
    f->b.cfg.json = true;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static void percentiles_merge_every_requester_by_nearest_rank(void **state)
{
    struct fixture *f = *state;
    /* 1..100 us, odd values on one requester and even on the other, in
     * reverse order, so only a merged sort gives the right ranks.
     */
    for (int i = 0; i < 50; i++) {
        f->lat[0][i] = (int64_t)(99 - 2 * i) * 1000;
        f->lat[1][i] = (int64_t)(100 - 2 * i) * 1000;
    }
    f->pubs[0].sent = 50;
    f->pubs[1].sent = 50;
    assert_int_equal(cli_bench_latency(&f->b, &f->r, f->errmsg), 0);
    assert_int_equal(f->r.p50_ns, 50000);
    assert_int_equal(f->r.p90_ns, 90000);
    assert_int_equal(f->r.p99_ns, 99000);
    assert_int_equal(f->r.max_ns, 100000);
    assert_true(f->r.mean_ns > 50499.0 && f->r.mean_ns < 50501.0);
}

static void a_single_sample_is_every_percentile(void **state)
{
    struct fixture *f = *state;
    f->lat[1][0] = 7000;
    f->pubs[1].sent = 1;
    assert_int_equal(cli_bench_latency(&f->b, &f->r, f->errmsg), 0);
    assert_int_equal(f->r.p50_ns, 7000);
    assert_int_equal(f->r.p99_ns, 7000);
    assert_int_equal(f->r.max_ns, 7000);
}

static void no_samples_leave_the_latency_fields_zero(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(cli_bench_latency(&f->b, &f->r, f->errmsg), 0);
    assert_int_equal(f->r.p50_ns, 0);
    assert_int_equal(f->r.max_ns, 0);
}

static void the_json_report_is_one_line_with_rates_and_losses(void **state)
{
    struct fixture *f = *state;
    char *buf = NULL;
    size_t len = 0;
    f->r.pub_msgs = 100;
    f->r.pub_s = 0.5;
    f->r.e2e_s = 0.5;
    f->r.p50_ns = 1500;
    FILE *saved = stdout;
    stdout = open_memstream(&buf, &len);
    assert_non_null(stdout);
    cli_bench_report(&f->b.cfg, &f->r);
    fclose(stdout);
    stdout = saved;
    assert_non_null(strstr(buf, "\"mode\":\"req\""));
    assert_non_null(strstr(buf, "\"subject\":\"a\\\"b\""));
    assert_non_null(strstr(buf, "\"msgs_per_s\":200.0,"));
    assert_non_null(strstr(buf, "\"lost\":0,\"dropped\":0,"));
    assert_non_null(strstr(buf, "\"p50_us\":1.5,"));
    assert_ptr_equal(strchr(buf, '\n'), buf + len - 1);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(percentiles_merge_every_requester_by_nearest_rank),
        T(a_single_sample_is_every_percentile),
        T(no_samples_leave_the_latency_fields_zero),
        T(the_json_report_is_one_line_with_rates_and_losses),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
