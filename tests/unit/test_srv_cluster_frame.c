/* srv_cluster frames: the msgpack subset round-trips, and truncated or
 * mistyped bytes from the network are refused with KEEL_EPROTO instead of
 * being read past their end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_cluster.h"

struct fixture {
    uint8_t buf[4096];
    uint8_t group[SRV_CLUSTER_GROUP_ID_BYTES];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    for (size_t i = 0; i < sizeof f->group; i++) {
        f->group[i] = (uint8_t)(0xa0 + i);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static size_t build_frame(struct fixture *f, const char *payload)
{
    size_t plen = strlen(payload);
    size_t hn = srv_cluster_frame_header(f->buf, SRV_CLUSTER_GROUP, f->group,
                                         sizeof f->group, plen);
    memcpy(f->buf + hn, payload, plen);
    return hn + plen;
}

static void a_group_frame_decodes_to_its_kind_group_and_payload(void **state)
{
    struct fixture *f = *state;
    size_t n = build_frame(f, "raft bytes");
    const uint8_t *g, *p;
    size_t glen = 0, plen = 0;
    unsigned kind = 0;

    size_t body = (size_t)f->buf[0] << 24 | (size_t)f->buf[1] << 16 |
                  (size_t)f->buf[2] << 8 | f->buf[3];
    assert_int_equal(body, n - 4);
    assert_int_equal(
        srv_cluster_frame_decode(f->buf + 4, body, &kind, &g, &glen, &p, &plen),
        0);
    assert_int_equal(kind, SRV_CLUSTER_GROUP);
    assert_int_equal(glen, sizeof f->group);
    assert_memory_equal(g, f->group, glen);
    assert_int_equal(plen, strlen("raft bytes"));
    assert_memory_equal(p, "raft bytes", plen);
}

static void every_truncation_of_a_frame_is_refused(void **state)
{
    struct fixture *f = *state;
    size_t n = build_frame(f, "payload");
    const uint8_t *g, *p;
    size_t glen = 0, plen = 0;
    unsigned kind = 0;

    for (size_t cut = 0; cut < n - 4; cut++) {
        assert_int_equal(srv_cluster_frame_decode(f->buf + 4, cut, &kind, &g,
                                                  &glen, &p, &plen),
                         KEEL_EPROTO);
    }
}

static void trailing_bytes_and_unknown_kinds_are_refused(void **state)
{
    struct fixture *f = *state;
    size_t n = build_frame(f, "x");
    const uint8_t *g, *p;
    size_t glen = 0, plen = 0;
    unsigned kind = 0;

    assert_int_equal(srv_cluster_frame_decode(f->buf + 4, n - 4 + 1, &kind, &g,
                                              &glen, &p, &plen),
                     KEEL_EPROTO);
    f->buf[5] = SRV_CLUSTER_KIND_MAX + 1; /* the kind fixint */
    assert_int_equal(srv_cluster_frame_decode(f->buf + 4, n - 4, &kind, &g,
                                              &glen, &p, &plen),
                     KEEL_EPROTO);
}

static void integers_strings_and_arrays_round_trip(void **state)
{
    struct fixture *f = *state;
    static const uint64_t vals[] = {0,     1,          127,       128,
                                    65535, 1ull << 32, UINT64_MAX};
    char big[300];
    uint8_t *w = f->buf;

    memset(big, 'z', sizeof big);
    w = srv_mp_put_array(w, 20);
    for (size_t i = 0; i < 7; i++) {
        w = srv_mp_put_uint(w, vals[i]);
    }
    w = srv_mp_put_str(w, "short", 5);
    w = srv_mp_put_str(w, big, 40);
    w = srv_mp_put_str(w, big, sizeof big);

    struct srv_mp_reader r = {f->buf, w};
    uint32_t n = 0;
    uint64_t v = 0;
    const uint8_t *s;
    size_t len = 0;
    assert_int_equal(srv_mp_get_array(&r, &n), 0);
    assert_int_equal(n, 20);
    for (size_t i = 0; i < 7; i++) {
        assert_int_equal(srv_mp_get_uint(&r, &v), 0);
        assert_true(v == vals[i]);
    }
    assert_int_equal(srv_mp_get_bytes(&r, &s, &len), 0);
    assert_int_equal(len, 5);
    assert_int_equal(srv_mp_get_bytes(&r, &s, &len), 0);
    assert_int_equal(len, 40);
    assert_int_equal(srv_mp_get_bytes(&r, &s, &len), 0);
    assert_int_equal(len, sizeof big);
    assert_memory_equal(s, big, len);
    assert_true(r.p == r.end);
    assert_int_equal(srv_mp_get_uint(&r, &v), KEEL_EPROTO);
}

static void a_string_longer_than_its_input_is_refused(void **state)
{
    struct fixture *f = *state;
    uint8_t *w = srv_mp_put_str(f->buf, "0123456789", 10);
    struct srv_mp_reader r = {f->buf, w - 1};
    const uint8_t *s;
    size_t len = 0;

    assert_int_equal(srv_mp_get_bytes(&r, &s, &len), KEEL_EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_group_frame_decodes_to_its_kind_group_and_payload, setup,
            teardown),
        cmocka_unit_test_setup_teardown(every_truncation_of_a_frame_is_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            trailing_bytes_and_unknown_kinds_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(integers_strings_and_arrays_round_trip,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_string_longer_than_its_input_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
