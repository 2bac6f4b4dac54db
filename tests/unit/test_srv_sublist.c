/* srv_sublist: subject validation, wildcard matching, queue groups and the
 * match cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_sublist.h"

#define SUBS_MAX 64

struct fixture {
    struct srv_sublist sl;
    struct srv_sub subs[SUBS_MAX];
    size_t nsubs;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || srv_sublist_init(&f->sl) != 0) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_sublist_close(&f->sl);
    free(f);
    return 0;
}

static struct srv_sub *add(struct fixture *f, const char *subject,
                           const char *queue)
{
    assert_true(f->nsubs < SUBS_MAX);
    struct srv_sub *s = &f->subs[f->nsubs++];
    s->subject = (char *)subject;
    s->subject_len = strlen(subject);
    s->queue = (char *)queue;
    s->queue_len = queue != NULL ? strlen(queue) : 0;
    s->sid = (char *)"1";
    s->sid_len = 1;
    assert_int_equal(srv_sublist_insert(&f->sl, s), 0);
    return s;
}

static struct srv_sublist_result *match(struct fixture *f, const char *subj)
{
    struct srv_sublist_result *r = NULL;
    assert_int_equal(srv_sublist_match(&f->sl, subj, strlen(subj), &r), 0);
    return r;
}

static bool has(const struct srv_sublist_result *r, const struct srv_sub *s)
{
    for (size_t i = 0; i < r->npsubs; i++) {
        if (r->psubs[i] == s) {
            return true;
        }
    }
    return false;
}

static void subjects_are_validated_per_protocol_rules(void **state)
{
    (void)state;
    const char *ok[] = {"foo", "foo.bar", "foo.*", "foo.>",   "*",
                        ">",   "*.*.>",   "foo*",  "a.b*c.d", "$JS.API.INFO"};
    const char *bad[] = {"",         ".",       "foo.",     ".foo",
                         "foo..bar", "foo bar", "foo\tbar", "foo.>.bar",
                         ">.foo",    "a\r\n"};

    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_true(srv_subject_valid(ok[i], strlen(ok[i]), true));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(srv_subject_valid(bad[i], strlen(bad[i]), true));
    }
    assert_true(srv_subject_valid("foo.bar", 7, false));
    assert_false(srv_subject_valid("foo.*", 5, false));
    assert_false(srv_subject_valid("foo.>", 5, false));
    assert_true(srv_subject_valid("foo*", 4, false));
}

static void star_matches_one_token_and_tail_matches_the_rest(void **state)
{
    struct fixture *f = *state;
    struct srv_sub *lit = add(f, "foo.bar", NULL);
    struct srv_sub *star = add(f, "foo.*", NULL);
    struct srv_sub *tail = add(f, "foo.>", NULL);
    struct srv_sub *all = add(f, ">", NULL);
    struct srv_sub *mid = add(f, "*.bar.*", NULL);
    struct srv_sub *lstar = add(f, "foo*", NULL);
    struct srv_sublist_result *r;

    r = match(f, "foo.bar");
    assert_int_equal(r->npsubs, 4);
    assert_true(has(r, lit) && has(r, star) && has(r, tail) && has(r, all));
    srv_sublist_result_release(r);

    r = match(f, "foo.bar.baz");
    assert_int_equal(r->npsubs, 3);
    assert_true(has(r, tail) && has(r, all) && has(r, mid));
    srv_sublist_result_release(r);

    r = match(f, "foo");
    assert_int_equal(r->npsubs, 1); /* foo.> needs at least one more token */
    assert_true(has(r, all));
    srv_sublist_result_release(r);

    r = match(f, "foox");
    assert_int_equal(r->npsubs, 1);
    srv_sublist_result_release(r);

    r = match(f, "foo*");
    assert_int_equal(r->npsubs, 2); /* foo* is a literal token */
    assert_true(has(r, lstar) && has(r, all));
    srv_sublist_result_release(r);
    assert_true(srv_subject_matches("a.*.c", 5, "a.b.c", 5));
    assert_false(srv_subject_matches("a.*.c", 5, "a.b.c.d", 7));
    assert_false(srv_subject_matches("a.>", 3, "a", 1));
}

static void queue_members_share_one_group_across_trie_nodes(void **state)
{
    struct fixture *f = *state;
    struct srv_sub *a = add(f, "orders.new", "workers");
    struct srv_sub *b = add(f, "orders.*", "workers");
    struct srv_sub *c = add(f, "orders.>", "auditors");
    struct srv_sublist_result *r = match(f, "orders.new");
    int picks[2] = {0, 0};

    assert_int_equal(r->npsubs, 0);
    assert_int_equal(r->nqgroups, 2);
    for (size_t g = 0; g < r->nqgroups; g++) {
        struct srv_sublist_qgroup *q = &r->qgroups[g];
        if (q->name_len == 7) {
            assert_int_equal(q->n, 2);
            for (int i = 0; i < 100; i++) {
                struct srv_sub *s = srv_sublist_qgroup_pick(q, NULL, NULL);
                assert_true(s == a || s == b);
                picks[s == a ? 0 : 1]++;
            }
        } else {
            assert_int_equal(q->n, 1);
            assert_ptr_equal(srv_sublist_qgroup_pick(q, NULL, NULL), c);
        }
    }
    /* Round robin gives each member an even share. */
    assert_int_equal(picks[0], 50);
    assert_int_equal(picks[1], 50);
    srv_sublist_result_release(r);
}

static bool skip_a(struct srv_sub *s, void *ud)
{
    return s == ud;
}

static void queue_pick_skips_rejected_members(void **state)
{
    struct fixture *f = *state;
    struct srv_sub *a = add(f, "q", "g");
    struct srv_sub *b = add(f, "q", "g");
    struct srv_sublist_result *r = match(f, "q");

    for (int i = 0; i < 10; i++) {
        assert_ptr_equal(srv_sublist_qgroup_pick(&r->qgroups[0], skip_a, a), b);
    }
    srv_sublist_result_release(r);
}

static void the_cache_sees_new_and_removed_subscriptions(void **state)
{
    struct fixture *f = *state;
    struct srv_sub *a = add(f, "t.x", NULL);
    struct srv_sublist_result *r = match(f, "t.x");

    assert_int_equal(r->npsubs, 1);
    srv_sublist_result_release(r);
    r = match(f, "t.x"); /* the second miss caches it */
    srv_sublist_result_release(r);
    r = match(f, "t.x");
    assert_int_equal(f->sl.cache_hits, 1);
    srv_sublist_result_release(r);

    struct srv_sub *b = add(f, "t.*", NULL);
    r = match(f, "t.x");
    assert_int_equal(r->npsubs, 2);
    assert_true(has(r, b));
    /* The result held here stays valid after b goes away. */
    assert_int_equal(srv_sublist_remove(&f->sl, b), 0);
    assert_int_equal(r->npsubs, 2);
    assert_true(b->removed);
    srv_sublist_result_release(r);

    r = match(f, "t.x");
    assert_int_equal(r->npsubs, 1);
    assert_true(has(r, a));
    srv_sublist_result_release(r);
    assert_int_equal(srv_sublist_remove(&f->sl, b), KEEL_ENOENT);
}

static void unrelated_changes_keep_cached_results(void **state)
{
    struct fixture *f = *state;
    struct srv_sublist_result *r;

    add(f, "keep.me", NULL);
    for (int i = 0; i < 2; i++) {
        r = match(f, "keep.me");
        srv_sublist_result_release(r);
    }
    uint64_t hits = f->sl.cache_hits;
    struct srv_sub *o = add(f, "other.subject", NULL);
    assert_int_equal(srv_sublist_remove(&f->sl, o), 0);
    r = match(f, "keep.me");
    assert_int_equal(f->sl.cache_hits, hits + 1);
    assert_int_equal(r->npsubs, 1);
    srv_sublist_result_release(r);
}

/* Request-reply subjects are unique: each missed the cache, was copied
 * into it, and every SRV_SUBLIST_CACHE_MAX of them cleared it, the
 * repeated subjects with it (docs/bench.md). */
static void subjects_seen_once_stay_out_of_the_cache(void **state)
{
    struct fixture *f = *state;
    struct srv_sublist_result *r;
    char subj[64];

    add(f, "_INBOX.abc.*", NULL);
    add(f, "orders.new", NULL);
    for (int i = 0; i < 2; i++) {
        r = match(f, "orders.new");
        srv_sublist_result_release(r);
    }
    assert_int_equal(f->sl.cache.count, 1);
    for (int i = 0; i <= SRV_SUBLIST_CACHE_MAX; i++) {
        snprintf(subj, sizeof subj, "_INBOX.abc.%d", i);
        r = match(f, subj);
        assert_int_equal(r->npsubs, 1);
        srv_sublist_result_release(r);
    }
    assert_int_equal(f->sl.cache.count, 1);
    uint64_t hits = f->sl.cache_hits;
    r = match(f, "orders.new");
    assert_int_equal(f->sl.cache_hits, hits + 1);
    assert_int_equal(r->npsubs, 1);
    srv_sublist_result_release(r);
}

static void removing_every_sub_empties_the_index(void **state)
{
    struct fixture *f = *state;
    struct srv_sub *s[4];

    s[0] = add(f, "a.b.c", NULL);
    s[1] = add(f, "a.*.c", "q");
    s[2] = add(f, "a.>", NULL);
    s[3] = add(f, "a.b.c", "q");
    assert_int_equal(f->sl.count, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(srv_sublist_remove(&f->sl, s[i]), 0);
    }
    assert_int_equal(f->sl.count, 0);
    struct srv_sublist_result *r = match(f, "a.b.c");
    assert_int_equal(r->npsubs, 0);
    assert_int_equal(r->nqgroups, 0);
    srv_sublist_result_release(r);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(subjects_are_validated_per_protocol_rules),
        T(star_matches_one_token_and_tail_matches_the_rest),
        T(queue_members_share_one_group_across_trie_nodes),
        T(queue_pick_skips_rejected_members),
        T(the_cache_sees_new_and_removed_subscriptions),
        T(unrelated_changes_keep_cached_results),
        T(subjects_seen_once_stay_out_of_the_cache),
        T(removing_every_sub_empties_the_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
