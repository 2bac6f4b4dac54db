/* srv_js_index: the stream a subject goes to and a stream by name, through
 * the subject trie, the same answers as walking every stream (the index
 * turned off), across joins, updates of subjects and leaves, with as many
 * streams as a node may hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_js_index.h"
#include "srv_js_int.h"

#define STREAMS SRV_JS_STREAMS_MAX

struct fixture {
    struct srv_js js;
    struct srv_stream *st[STREAMS];
};

static void set_subjects(struct srv_stream *st, const char *const *subj,
                         uint32_t n)
{
    for (uint32_t k = 0; k < st->cfg.nsubjects; k++) {
        free(st->cfg.subjects[k]);
    }
    free(st->cfg.subjects);
    st->cfg.subjects = n > 0 ? calloc(n, sizeof *st->cfg.subjects) : NULL;
    for (uint32_t k = 0; k < n; k++) {
        st->cfg.subjects[k] = strdup(subj[k]);
    }
    st->cfg.nsubjects = n;
}

static struct srv_stream *add(struct fixture *f, const char *name,
                              const char *const *subj, uint32_t n)
{
    struct srv_stream *st = calloc(1, sizeof *st);
    assert_non_null(st);
    snprintf(st->cfg.name, sizeof st->cfg.name, "%s", name);
    set_subjects(st, subj, n);
    f->js.streams[f->js.nstreams++] = st;
    srv_js_index_join(&f->js, st);
    return st;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->js.streams = calloc(SRV_JS_STREAMS_MAX, sizeof *f->js.streams);
    assert_int_equal(srv_js_index_init(&f->js), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (uint32_t i = 0; i < f->js.nstreams; i++) {
        struct srv_stream *st = f->js.streams[i];
        srv_js_index_leave(&f->js, st);
        set_subjects(st, NULL, 0);
        free(st);
    }
    srv_js_index_close(&f->js);
    free(f->js.streams);
    free(f);
    return 0;
}

static struct srv_stream *match(struct fixture *f, const char *subj)
{
    struct srv_stream *st = srv_js_index_match(&f->js, subj, strlen(subj));
    /* The index answers what walking every stream answers. */
    f->js.index_off = true;
    struct srv_stream *walked = srv_js_index_match(&f->js, subj, strlen(subj));
    f->js.index_off = false;
    assert_ptr_equal(st, walked);
    return st;
}

static void subjects_and_wildcards_name_their_stream(void **state)
{
    struct fixture *f = *state;
    const char *orders[] = {"orders.*", "orders.eu.>"};
    const char *kv[] = {"$KV.cfg.>"};
    const char *exact[] = {"a.b.c"};
    struct srv_stream *o = add(f, "ORDERS", orders, 2);
    struct srv_stream *k = add(f, "KV_cfg", kv, 1);
    struct srv_stream *e = add(f, "EXACT", exact, 1);
    add(f, "MIRROR", NULL, 0); /* a mirror has no subjects */
    assert_ptr_equal(match(f, "orders.new"), o);
    assert_ptr_equal(match(f, "orders.eu.fr.paris"), o);
    assert_null(match(f, "orders"));
    assert_null(match(f, "orders.us.ny")); /* '*' is one token */
    assert_ptr_equal(match(f, "$KV.cfg.color"), k);
    assert_null(match(f, "$KV.cfg")); /* '>' needs a token */
    assert_ptr_equal(match(f, "a.b.c"), e);
    assert_null(match(f, "a.b.c.d"));
    assert_null(match(f, "_INBOX.abc.1"));
    assert_ptr_equal(srv_js_index_find(&f->js, "KV_cfg"), k);
    assert_null(srv_js_index_find(&f->js, "KV_cf"));
}

static void an_update_and_a_leave_change_the_answers(void **state)
{
    struct fixture *f = *state;
    const char *one[] = {"old.>"};
    const char *two[] = {"new.>", "other.x"};
    struct srv_stream *st = add(f, "S", one, 1);
    assert_ptr_equal(match(f, "old.a"), st);
    /* An update of the subjects: leave, new config, join. */
    srv_js_index_leave(&f->js, st);
    set_subjects(st, two, 2);
    srv_js_index_join(&f->js, st);
    assert_null(match(f, "old.a"));
    assert_ptr_equal(match(f, "new.a.b"), st);
    assert_ptr_equal(match(f, "other.x"), st);
    assert_ptr_equal(srv_js_index_find(&f->js, "S"), st);
    /* Gone: no subject and no name finds it. */
    srv_js_index_leave(&f->js, st);
    f->js.nstreams--;
    assert_null(srv_js_index_match(&f->js, "new.a.b", 7));
    assert_null(srv_js_index_find(&f->js, "S"));
    set_subjects(st, NULL, 0);
    free(st);
}

static void mirrors_are_counted_so_their_pump_skips_a_node_without(void **state)
{
    struct fixture *f = *state;
    const char *one[] = {"m.>"};
    add(f, "PLAIN", one, 1);
    assert_int_equal(f->js.nmirrors, 0);
    struct srv_stream *m = calloc(1, sizeof *m);
    snprintf(m->cfg.name, sizeof m->cfg.name, "COPY");
    m->cfg.has_mirror = true;
    f->js.streams[f->js.nstreams++] = m;
    srv_js_index_join(&f->js, m);
    assert_int_equal(f->js.nmirrors, 1);
    srv_js_index_leave(&f->js, m);
    srv_js_index_leave(&f->js, m); /* a second leave counts nothing */
    assert_int_equal(f->js.nmirrors, 0);
    srv_js_index_join(&f->js, m); /* teardown leaves it once more */
}

static void thousands_of_streams_each_get_their_own_subjects(void **state)
{
    struct fixture *f = *state;
    char name[32], subj[64];
    for (int i = 0; i < STREAMS; i++) {
        snprintf(name, sizeof name, "S%d", i);
        snprintf(subj, sizeof subj, "s%d.>", i);
        const char *s[] = {subj};
        f->st[i] = add(f, name, s, 1);
    }
    for (int i = 0; i < STREAMS; i += 97) {
        snprintf(subj, sizeof subj, "s%d.x.y", i);
        assert_ptr_equal(match(f, subj), f->st[i]);
        snprintf(name, sizeof name, "S%d", i);
        assert_ptr_equal(srv_js_index_find(&f->js, name), f->st[i]);
    }
    assert_null(match(f, "s99999.x"));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(subjects_and_wildcards_name_their_stream),
        T(an_update_and_a_leave_change_the_answers),
        T(mirrors_are_counted_so_their_pump_skips_a_node_without),
        T(thousands_of_streams_each_get_their_own_subjects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
