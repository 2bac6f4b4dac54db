/* The sync threads' run queue (store/store.c store__schedule): groups run
 * in the order their work came, except a group set first
 * (store_group_set_first: the meta group), which goes ahead of every
 * group already waiting (docs/cluster.md, "Loop turns"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

/* Groups with work queued, on a store no sync thread serves: only the
 * queue's order is looked at. */
static struct store s;
static struct store_group g[4];
static struct op work;

static void with_work(struct store_group *x)
{
    memset(x, 0, sizeof *x);
    x->s = &s;
    x->ops_head = &work;
}

static void a_first_group_runs_ahead_of_those_already_waiting(void **state)
{
    (void)state;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    for (int i = 0; i < 4; i++) {
        with_work(&g[i]);
    }
    g[2].first = true;
    pthread_mutex_lock(&s.mu);
    store__schedule(&s, &g[0]);
    store__schedule(&s, &g[1]);
    store__schedule(&s, &g[2]); /* the meta group, say */
    store__schedule(&s, &g[3]);
    assert_ptr_equal(store__gq_pop(&s, STORE__Q_RUN), &g[2]);
    assert_ptr_equal(store__gq_pop(&s, STORE__Q_RUN), &g[0]);
    assert_ptr_equal(store__gq_pop(&s, STORE__Q_RUN), &g[1]);
    assert_ptr_equal(store__gq_pop(&s, STORE__Q_RUN), &g[3]);
    assert_null(store__gq_pop(&s, STORE__Q_RUN));
    /* Alone on an empty queue it is simply the head and the tail. */
    g[2].queued = false;
    store__schedule(&s, &g[2]);
    pthread_mutex_unlock(&s.mu);
    assert_ptr_equal(s.q[STORE__Q_RUN].head, &g[2]);
    assert_ptr_equal(s.q[STORE__Q_RUN].tail, &g[2]);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_first_group_runs_ahead_of_those_already_waiting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
