/* keel_passwd: the PBKDF2 password hashes keel passwd makes and keeld
 * verifies (common/keel_passwd.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel_passwd.h"

/* Hashes in tests use the minimum rounds so the suite stays fast. */
#define ITER KEEL_PASSWD_ITER_MIN

struct fixture {
    char errmsg[KEEL_ERRMSG_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static void a_hash_verifies_its_password_and_no_other(void **state)
{
    struct fixture *f = *state;
    char h1[KEEL_PASSWD_STRING_BYTES];
    char h2[KEEL_PASSWD_STRING_BYTES];

    assert_int_equal(keel_passwd_hash("s3cret", ITER, h1, sizeof h1, f->errmsg),
                     0);
    assert_int_equal(keel_passwd_hash("s3cret", ITER, h2, sizeof h2, f->errmsg),
                     0);
    assert_memory_equal(h1, KEEL_PASSWD_HASH_PREFIX "i=1000$", 21);
    assert_string_not_equal(h1, h2); /* a fresh salt each time */
    assert_true(keel_passwd_iterations(h1) == ITER);
    assert_true(keel_passwd_ok(h1, "s3cret"));
    assert_true(keel_passwd_ok(h2, "s3cret"));
    assert_false(keel_passwd_ok(h1, "s3cret "));
    assert_false(keel_passwd_ok(h1, ""));
}

static void a_damaged_hash_never_verifies(void **state)
{
    struct fixture *f = *state;
    char h[KEEL_PASSWD_STRING_BYTES];

    assert_int_equal(keel_passwd_hash("pw", ITER, h, sizeof h, f->errmsg), 0);
    /* A character well inside the base64 hash: all six of its bits are
     * data (the last one before '=' carries two padding bits a decoder
     * ignores, so changing only those left the hash equal: a flaky test). */
    char *mid = h + strlen(h) - 10;
    *mid = *mid == 'A' ? 'B' : 'A';
    assert_false(keel_passwd_ok(h, "pw"));
    assert_false(keel_passwd_iterations("$pbkdf2-sha256$i=10$AAAA$AAAA") != 0);
    assert_false(keel_passwd_iterations("$pbkdf2-sha256$i=1000$$") != 0);
    assert_false(keel_passwd_ok("$pbkdf2-sha256$x", "pw"));
}

static void out_of_range_iterations_are_refused(void **state)
{
    struct fixture *f = *state;
    char h[KEEL_PASSWD_STRING_BYTES];

    assert_int_equal(keel_passwd_hash("pw", ITER - 1, h, sizeof h, f->errmsg),
                     KEEL_EINVAL);
    assert_int_equal(keel_passwd_hash("pw", ITER, h, 20, f->errmsg),
                     KEEL_EINVAL);
}

static void plain_passwords_compare_exactly(void **state)
{
    (void)state;
    assert_true(keel_passwd_ok("abc", "abc"));
    assert_false(keel_passwd_ok("abc", "abcd"));
    assert_false(keel_passwd_ok("abc", "ab"));
    assert_false(keel_passwd_ok("abc", "ABC"));
}

static void only_well_formed_hashes_count_as_hashes(void **state)
{
    (void)state;
    assert_int_equal(keel_passwd_iterations(NULL), 0);
    assert_int_equal(keel_passwd_iterations("plain"), 0);
    assert_false(keel_passwd_looks_hashed("plain"));
    assert_false(keel_passwd_looks_hashed(NULL));
    /* A typo in a hash still looks hashed, so keeld refuses it instead of
     * taking it for a plain-text password. */
    assert_true(keel_passwd_looks_hashed("$pbkdf2-sha256$i=x"));
    assert_int_equal(keel_passwd_iterations("$pbkdf2-sha256$i=x"), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(a_hash_verifies_its_password_and_no_other),
        T(a_damaged_hash_never_verifies),
        T(out_of_range_iterations_are_refused),
        T(plain_passwords_compare_exactly),
        T(only_well_formed_hashes_count_as_hashes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
