/* srv_hmap: puts, gets and backward-shift deletes agree with a reference
 * table under a long random sequence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_hmap.h"

#define KEYS 512
#define OPS 200000

struct fixture {
    struct srv_hmap m;
    char keys[KEYS][16];
    void *ref[KEYS]; /* expected value per key, NULL = absent */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    srv_hmap_init(&f->m);
    for (int i = 0; i < KEYS; i++) {
        snprintf(f->keys[i], sizeof f->keys[i], "k%d", i * 7919);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_hmap_close(&f->m);
    free(f);
    return 0;
}

static void random_puts_and_deletes_match_a_reference_table(void **state)
{
    struct fixture *f = *state;
    uint64_t x = 88172645463325252ull;
    size_t live = 0;

    for (int op = 0; op < OPS; op++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int k = (int)(x % KEYS);
        const char *key = f->keys[k];
        if ((x >> 32) % 3 != 0) {
            void *v = (void *)(uintptr_t)(op + 1);
            assert_int_equal(srv_hmap_put(&f->m, key, strlen(key), v), 0);
            live += f->ref[k] == NULL;
            f->ref[k] = v;
        } else {
            void *v = srv_hmap_del(&f->m, key, strlen(key));
            assert_ptr_equal(v, f->ref[k]);
            live -= f->ref[k] != NULL;
            f->ref[k] = NULL;
        }
        assert_int_equal(f->m.count, live);
    }
    for (int k = 0; k < KEYS; k++) {
        assert_ptr_equal(srv_hmap_get(&f->m, f->keys[k], strlen(f->keys[k])),
                         f->ref[k]);
    }
}

static void iteration_visits_every_live_key_once(void **state)
{
    struct fixture *f = *state;
    size_t pos = 0;
    size_t seen = 0;
    struct srv_hmap_slot *s;

    for (int k = 0; k < KEYS; k += 3) {
        assert_int_equal(
            srv_hmap_put(&f->m, f->keys[k], strlen(f->keys[k]), f->keys[k]), 0);
    }
    while ((s = srv_hmap_next(&f->m, &pos)) != NULL) {
        assert_string_equal(s->key, s->value);
        seen++;
    }
    assert_int_equal(seen, f->m.count);
    assert_int_equal(seen, (KEYS + 2) / 3);
}

static void keys_with_equal_prefixes_stay_distinct(void **state)
{
    struct fixture *f = *state;
    int a;
    int b;

    assert_int_equal(srv_hmap_put(&f->m, "ab", 2, &a), 0);
    assert_int_equal(srv_hmap_put(&f->m, "abc", 3, &b), 0);
    assert_ptr_equal(srv_hmap_get(&f->m, "ab", 2), &a);
    assert_ptr_equal(srv_hmap_get(&f->m, "abc", 3), &b);
    assert_null(srv_hmap_get(&f->m, "a", 1));
    assert_null(srv_hmap_del(&f->m, "abcd", 4));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(random_puts_and_deletes_match_a_reference_table),
        T(iteration_visits_every_live_key_once),
        T(keys_with_equal_prefixes_stay_distinct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
