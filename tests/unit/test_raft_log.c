/* Unit tests of the core's log view: run-length terms, backtracking
 * lookups, compaction and the configuration payload format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "keel/error.h"
#include "internal.h"
#include "raft.h"

struct fixture {
    struct raft r;
    struct raft_config cfg;
    uint8_t buf[RAFT_CONFIG_BYTES_MAX];
    uint32_t len;
};

/* Log: 1(t1, config) 2..4(t2) 5..9(t3) 10(t5). */
static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    struct raft_params p = {.id = 1,
                            .incarnation = 7,
                            .seed = 1,
                            .election_timeout_ms = 100,
                            .heartbeat_ms = 10};
    f->cfg.n = 1;
    f->cfg.servers[0] = (struct raft_server){1, 7, RAFT_VOTER};
    f->len = raft_config_encode(&f->cfg, f->buf, sizeof f->buf);
    assert_int_equal(raft_init(&f->r, &p), 0);
    raft_load_hard_state(&f->r, 5, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, f->len, f->buf};
    assert_int_equal(raft_load_entry(&f->r, 1, &c), 0);
    for (raft_index i = 2; i <= 10; i++) {
        raft_term t = i <= 4 ? 2 : i <= 9 ? 3 : 5;
        struct raft_entry e = {t, RAFT_ENTRY_NORMAL, 0, NULL};
        assert_int_equal(raft_load_entry(&f->r, i, &e), 0);
    }
    raft_start(&f->r, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    raft_close(&f->r);
    free(f);
    return 0;
}

static void terms_are_kept_as_one_run_per_term(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(f->r.n_runs, 4);
    assert_int_equal(raft_term_at(&f->r, 0), 0);
    assert_int_equal(raft_term_at(&f->r, 1), 1);
    assert_int_equal(raft_term_at(&f->r, 4), 2);
    assert_int_equal(raft_term_at(&f->r, 5), 3);
    assert_int_equal(raft_term_at(&f->r, 9), 3);
    assert_int_equal(raft_term_at(&f->r, 10), 5);
    assert_int_equal(raft_term_at(&f->r, 11), 0);
    assert_int_equal(f->r.persisted, 10); /* loaded records are durable */
}

static void out_of_order_or_zero_term_loads_are_refused(void **state)
{
    struct fixture *f = *state;
    struct raft_entry e = {5, RAFT_ENTRY_NORMAL, 0, NULL};
    assert_int_equal(raft_load_entry(&f->r, 12, &e), KEEL_EINVAL);
    e.term = 0;
    assert_int_equal(raft_load_entry(&f->r, 11, &e), KEEL_EINVAL);
}

static void a_snapshot_drops_the_terms_it_covers(void **state)
{
    struct fixture *f = *state;
    struct raft_in in = {.type = RAFT_IN_APPLIED, .applied = 0};
    struct raft_out *out = calloc(1, sizeof *out);
    /* A group of one commits its own barrier: elect, persist, apply. */
    in.type = RAFT_IN_TICK;
    in.now_ms = 1000;
    assert_int_equal(raft_step(&f->r, &in, out), 0);
    assert_int_equal(f->r.role, RAFT_LEADER);
    in.type = RAFT_IN_PERSISTED;
    in.persisted.index = 11;
    in.persisted.term = f->r.term;
    assert_int_equal(raft_step(&f->r, &in, out), 0);
    assert_int_equal(out->commit, 11);
    in.type = RAFT_IN_APPLIED;
    in.applied = 11;
    assert_int_equal(raft_step(&f->r, &in, out), 0);
    in.type = RAFT_IN_SNAPSHOT_TAKEN;
    in.snapshot.index = 7;
    in.snapshot.term = 3;
    assert_int_equal(raft_step(&f->r, &in, out), 0);
    assert_int_equal(raft_term_at(&f->r, 7), 3);
    assert_int_equal(raft_term_at(&f->r, 6), 0); /* compacted */
    assert_int_equal(raft_term_at(&f->r, 8), 3);
    assert_int_equal(raft_term_at(&f->r, 10), 5);
    assert_int_equal(raft_config_current(&f->r)->n, 1);
    free(out);
}

static void configuration_payloads_round_trip_and_reject_garbage(void **state)
{
    struct fixture *f = *state;
    struct raft_config c;
    assert_int_equal(raft_config_decode(f->buf, f->len, &c), 0);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.servers[0].incarnation, 7);
    assert_int_equal(raft_config_decode(f->buf, f->len - 1, &c), KEEL_ECORRUPT);
    uint8_t bad[RAFT_CONFIG_BYTES_MAX];
    memcpy(bad, f->buf, f->len);
    bad[0] = 9; /* version */
    assert_int_equal(raft_config_decode(bad, f->len, &c), KEEL_ECORRUPT);
    memcpy(bad, f->buf, f->len);
    bad[f->len - 1] = 7; /* role */
    assert_int_equal(raft_config_decode(bad, f->len, &c), KEEL_ECORRUPT);
    assert_int_equal(raft_config_decode(NULL, 0, &c), KEEL_ECORRUPT);
}

/* Every configuration but the last in a log is committed (one change at a
 * time), so a log of more than RAFT_CONFIGS_MAX of them loads: the
 * soak's meta group held 60 after 28 membership changes and its node
 * refused to start (finding F22 in docs/faults.md). */
static void a_log_of_many_configurations_loads(void **state)
{
    (void)state;
    struct raft r;
    struct raft_params p = {.id = 1,
                            .incarnation = 7,
                            .seed = 1,
                            .election_timeout_ms = 100,
                            .heartbeat_ms = 10};
    assert_int_equal(raft_init(&r, &p), 0);
    raft_load_hard_state(&r, 3, 0);
    const raft_index n = 3 * RAFT_CONFIGS_MAX;
    for (raft_index i = 1; i <= n; i++) {
        /* n1 alone, then n1 with learner n2, alternately. */
        struct raft_config c = {.n = 1 + (uint32_t)(i % 2 == 0)};
        c.servers[0] = (struct raft_server){1, 7, RAFT_VOTER};
        c.servers[1] = (struct raft_server){2, 9, RAFT_LEARNER};
        uint8_t buf[RAFT_CONFIG_BYTES_MAX];
        struct raft_entry e = {1 + i / 10, RAFT_ENTRY_CONFIG,
                               raft_config_encode(&c, buf, sizeof buf), buf};
        assert_int_equal(raft_load_entry(&r, i, &e), 0);
        assert_int_equal(raft_config_current_index(&r), i);
        assert_int_equal(raft_config_current(&r)->n, c.n);
    }
    assert_true(r.n_configs <= RAFT_CONFIGS_MAX);
    /* The last one may be uncommitted: dropping it brings back the one
     * before, which the log still tracks. */
    raft__log_truncate(&r, n);
    assert_int_equal(raft_config_current_index(&r), n - 1);
    assert_int_equal(raft_config_current(&r)->n, 1);
    raft_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(terms_are_kept_as_one_run_per_term,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            out_of_order_or_zero_term_loads_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(a_snapshot_drops_the_terms_it_covers,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            configuration_payloads_round_trip_and_reject_garbage, setup,
            teardown),
        cmocka_unit_test(a_log_of_many_configurations_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
