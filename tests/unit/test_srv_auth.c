/* srv_auth: subject matching for permissions, credential checks and
 * building users from the config (the hashes themselves:
 * test_keel_passwd.c).
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
#include "srv_auth.h"
#include "srv_confparse.h"

/* Hashes in tests use the minimum rounds so the suite stays fast. */
#define ITER KEEL_PASSWD_ITER_MIN

struct fixture {
    struct srv_auth auth;
    json_t *root;
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
    struct fixture *f = *state;
    srv_auth_close(&f->auth);
    json_decref(f->root);
    free(f);
    return 0;
}

/* Parse a config text and build auth from its authorization.users. */
static int build_users(struct fixture *f, const char *conf)
{
    int rv = srv_confparse(conf, strlen(conf), &f->root, f->errmsg);
    assert_int_equal(rv, 0);
    const json_t *users =
        json_object_get(json_object_get(f->root, "authorization"), "users");
    return srv_auth_init(&f->auth, NULL, NULL, NULL, users, f->errmsg);
}

static bool match(const char *p, const char *s)
{
    return srv_auth_subject_match(p, s, strlen(s));
}

static bool subset(const char *s, const char *p)
{
    return srv_auth_subject_subset(s, strlen(s), p);
}

static void literal_subjects_match_patterns_token_by_token(void **state)
{
    (void)state;
    assert_true(match("a.b.c", "a.b.c"));
    assert_false(match("a.b.c", "a.b"));
    assert_false(match("a.b", "a.b.c"));
    assert_true(match("a.*.c", "a.x.c"));
    assert_false(match("a.*.c", "a.x.y"));
    assert_true(match("a.>", "a.b"));
    assert_true(match("a.>", "a.b.c.d"));
    assert_false(match("a.>", "a"));
    assert_true(match(">", "anything.at.all"));
    assert_false(match("ab.>", "a.b"));
}

static void a_wildcard_sub_is_a_subset_only_of_wider_patterns(void **state)
{
    (void)state;
    assert_true(subset("a.b", "a.b"));
    assert_true(subset("a.*", "a.*"));
    assert_true(subset("a.*", "a.>"));
    assert_true(subset("a.b.>", "a.>"));
    assert_true(subset("a.*.c", "a.>"));
    assert_true(subset("a.*", ">"));
    assert_false(subset("a.>", "a.*"));
    assert_false(subset("a.*", "a.b"));
    assert_false(subset(">", "a.>"));
    assert_false(subset("a", "a.>"));
    assert_false(subset("a.b.c", "a.b"));
    assert_false(subset("a.b", "a.b.c"));
}

static void users_check_their_own_password_only(void **state)
{
    struct fixture *f = *state;
    char h[KEEL_PASSWD_STRING_BYTES];
    char conf[512];
    const struct srv_user *u = NULL;

    assert_int_equal(keel_passwd_hash("bpw", ITER, h, sizeof h, f->errmsg), 0);
    snprintf(conf, sizeof conf,
             "authorization { users = [ {user: a, password: apw}, "
             "{user: b, password: \"%s\"} ] }",
             h);
    assert_int_equal(build_users(f, conf), 0);
    assert_true(f->auth.required);
    assert_int_equal(f->auth.nplain, 1);

    struct srv_auth_creds a_ok = {"a", "apw", NULL};
    struct srv_auth_creds b_ok = {"b", "bpw", NULL};
    struct srv_auth_creds b_bad = {"b", "apw", NULL};
    struct srv_auth_creds nobody = {"c", "apw", NULL};
    struct srv_auth_creds none = {NULL, NULL, NULL};
    assert_int_equal(srv_auth_check(&f->auth, &a_ok, &u), 0);
    assert_string_equal(u->name, "a");
    assert_false(srv_auth_check_is_slow(&f->auth, &a_ok));
    assert_true(srv_auth_check_is_slow(&f->auth, &b_ok));
    assert_int_equal(srv_auth_check(&f->auth, &b_ok, &u), 0);
    assert_string_equal(u->name, "b");
    assert_int_equal(srv_auth_check(&f->auth, &b_bad, &u), KEEL_EAUTH);
    assert_null(u);
    assert_int_equal(srv_auth_check(&f->auth, &nobody, &u), KEEL_EAUTH);
    /* An unknown name costs a hash too, so timing does not reveal it. */
    assert_true(srv_auth_check_is_slow(&f->auth, &nobody));
    assert_non_null(f->auth.dummy_hash);
    assert_int_equal(srv_auth_check(&f->auth, &none, &u), KEEL_EAUTH);
}

static void a_token_is_checked_and_users_are_not_asked_for(void **state)
{
    struct fixture *f = *state;
    const struct srv_user *u = NULL;

    assert_int_equal(
        srv_auth_init(&f->auth, "tok", NULL, NULL, NULL, f->errmsg), 0);
    struct srv_auth_creds ok = {NULL, NULL, "tok"};
    struct srv_auth_creds bad = {NULL, NULL, "tok2"};
    struct srv_auth_creds missing = {"a", "tok", NULL};
    assert_int_equal(srv_auth_check(&f->auth, &ok, &u), 0);
    assert_null(u);
    assert_int_equal(srv_auth_check(&f->auth, &bad, &u), KEEL_EAUTH);
    assert_int_equal(srv_auth_check(&f->auth, &missing, &u), KEEL_EAUTH);
}

static void no_auth_configured_lets_everyone_in(void **state)
{
    struct fixture *f = *state;
    const struct srv_user *u = NULL;
    struct srv_auth_creds any = {"x", "y", NULL};

    assert_int_equal(srv_auth_init(&f->auth, NULL, NULL, NULL, NULL, f->errmsg),
                     0);
    assert_false(f->auth.required);
    assert_int_equal(srv_auth_check(&f->auth, &any, &u), 0);
}

static void deny_wins_over_allow_for_publish(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(
        build_users(f, "authorization { users = [ {user: a, password: p, "
                       "permissions: { publish: { allow: [\"orders.>\"], "
                       "deny: [\"orders.secret.*\"] } } } ] }"),
        0);
    const struct srv_perms *p = &f->auth.users[0].perms;
    assert_true(f->auth.users[0].has_perms);
    assert_true(srv_auth_can_publish(p, "orders.new", 10));
    assert_true(srv_auth_can_publish(p, "orders.secret", 13));
    assert_false(srv_auth_can_publish(p, "orders.secret.x", 15));
    assert_false(srv_auth_can_publish(p, "billing.x", 9));
    /* No subscribe lists: everything may be subscribed. */
    assert_true(srv_auth_can_subscribe(p, ">", 1));
    assert_true(srv_auth_can_publish(NULL, "billing.x", 9));
}

static void subscribe_lists_filter_subs_and_deliveries(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(
        build_users(f, "authorization { users = [ {user: a, password: p, "
                       "permissions: { subscribe: { allow: \"s.>\", "
                       "deny: [\"s.secret\"] } } } ] }"),
        0);
    const struct srv_perms *p = &f->auth.users[0].perms;
    assert_true(srv_auth_can_subscribe(p, "s.a", 3));
    assert_true(srv_auth_can_subscribe(p, "s.*", 3));
    assert_false(srv_auth_can_subscribe(p, ">", 1));
    assert_false(srv_auth_can_subscribe(p, "t.a", 3));
    assert_false(srv_auth_can_subscribe(p, "s.secret", 8));
    /* s.* overlaps the deny: accepted, but its s.secret messages are
     * filtered at delivery. */
    assert_true(srv_auth_can_deliver(p, "s.a", 3));
    assert_false(srv_auth_can_deliver(p, "s.secret", 8));
    /* Publishing is unrestricted. */
    assert_true(srv_auth_can_publish(p, "t.a", 3));
}

static void a_list_form_is_the_allow_list(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(
        build_users(f, "authorization { users = [ {user: a, password: p, "
                       "permissions: { publish: [\"a\", \"b.*\"] } } ] }"),
        0);
    const struct srv_perms *p = &f->auth.users[0].perms;
    assert_int_equal(p->pub_allow.count, 2);
    assert_true(srv_auth_can_publish(p, "b.x", 3));
    assert_false(srv_auth_can_publish(p, "c", 1));
}

static void allow_responses_is_true_or_a_max(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(build_users(f, "authorization { users = [ "
                                    "{user: a, password: p, permissions: { "
                                    "allow_responses: true } }, "
                                    "{user: b, password: p, permissions: { "
                                    "allow_responses: { max: 3 } } }, "
                                    "{user: c, password: p, permissions: { "
                                    "publish: \"x\" } } ] }"),
                     0);
    assert_int_equal(f->auth.users[0].perms.responses_max, 1);
    assert_int_equal(f->auth.users[1].perms.responses_max, 3);
    assert_int_equal(f->auth.users[2].perms.responses_max, 0);
    srv_auth_close(&f->auth);
    json_decref(f->root);
    assert_int_equal(
        build_users(f, "authorization { users = [ {user: a, password: p, "
                       "permissions: { allow_responses: { max: 0 } } } ] }"),
        KEEL_ECONFIG);
}

static void bad_user_blocks_are_config_errors(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(build_users(f, "authorization { users = [ {user: a} ] "
                                    "}"),
                     KEEL_ECONFIG);
    srv_auth_close(&f->auth);
    json_decref(f->root);
    assert_int_equal(
        build_users(f, "authorization { users = [ {user: a, password: p}, "
                       "{user: a, password: q} ] }"),
        KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "twice"));
    srv_auth_close(&f->auth);
    json_decref(f->root);
    assert_int_equal(
        build_users(f, "authorization { users = [ {user: a, password: p, "
                       "permissions: { publish: [\"a..b\"] } } ] }"),
        KEEL_ECONFIG);
    srv_auth_close(&f->auth);
    json_decref(f->root);
    assert_int_equal(
        build_users(f, "authorization { users = [ {user: a, password: "
                       "\"$pbkdf2-sha256$i=5$x$y\"} ] }"),
        KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "malformed"));
    srv_auth_close(&f->auth);
    json_decref(f->root);
    f->root = NULL;
    assert_int_equal(srv_auth_init(&f->auth, "tok", "a", "p", NULL, f->errmsg),
                     KEEL_ECONFIG);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(literal_subjects_match_patterns_token_by_token),
        T(a_wildcard_sub_is_a_subset_only_of_wider_patterns),
        T(users_check_their_own_password_only),
        T(a_token_is_checked_and_users_are_not_asked_for),
        T(no_auth_configured_lets_everyone_in),
        T(deny_wins_over_allow_for_publish),
        T(subscribe_lists_filter_subs_and_deliveries),
        T(a_list_form_is_the_allow_list),
        T(allow_responses_is_true_or_a_max),
        T(bad_user_blocks_are_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
