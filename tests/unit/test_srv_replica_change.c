/* Membership changes through the driver (replica_change): four replicas on
 * one loop, messages through the Raft codec, node 4 opened on an empty
 * log with no configuration (a new node waiting to be added). Also: a
 * deposed leader never answers another leader's entry with its own ctx. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec.h"
#include "replica_int.h"
#include "test_srv_replica_common.h"

#define N 4
#define QUEUE_MAX 4096
#define IDX_MAX 512

struct node {
    char dir[256];
    struct replica_host *host;
    struct store *s;
    struct store_node_report rep;
    struct replica *r;
    raft_incarnation inc;
    uint64_t count;
    uint64_t ctx_at[IDX_MAX]; /* ctx the apply callback got per index */
    uint8_t type_at[IDX_MAX];
    char first_at[IDX_MAX]; /* first payload byte per index */
};

struct qmsg {
    int to;
    void *buf;
    size_t len;
};

struct fixture {
    uv_loop_t loop;
    struct node n[N];
    struct raft_config cfg;
    struct store_group_id gid;
    struct qmsg q[QUEUE_MAX];
    size_t nq;
    int cut; /* index of a node whose messages are dropped; -1: none */
};

static struct fixture *fx;

static void on_send(struct replica *r, const struct raft_msg *m, void *arg)
{
    struct node *from = arg;
    (void)r;
    int to = (int)m->to - 1;
    if (fx->nq >= QUEUE_MAX || to < 0 || to >= N) {
        return; /* a lost message: raft resends */
    }
    if (fx->cut >= 0 && (to == fx->cut || from == &fx->n[fx->cut])) {
        return; /* partitioned */
    }
    struct qmsg *q = &fx->q[fx->nq];
    if (raft_msg_encode(m, &q->buf, &q->len, NULL) == 0) {
        q->to = to;
        fx->nq++;
    }
}

static void deliver(void)
{
    size_t n = fx->nq;
    struct qmsg *qs = malloc(n * sizeof *qs + 1);
    memcpy(qs, fx->q, n * sizeof *qs);
    fx->nq = 0;
    for (size_t i = 0; i < n; i++) {
        struct raft_msg m;
        struct raft_entry es[RAFT_APPEND_ENTRIES_MAX];
        struct node *d = &fx->n[qs[i].to];
        if (d->r != NULL &&
            raft_msg_decode(qs[i].buf, qs[i].len, &m, es, NULL) == 0) {
            (void)replica_receive(d->r, &m, NULL);
        }
        free(qs[i].buf);
    }
    free(qs);
}

static void rec_apply(struct replica *r, uint64_t index, uint64_t term,
                      uint8_t type, const void *payload, uint32_t len,
                      uint64_t ctx, void *arg)
{
    struct node *nd = arg;
    (void)r;
    (void)term;
    if (type == RAFT_ENTRY_NORMAL) {
        nd->count++;
    }
    if (index < IDX_MAX) {
        nd->ctx_at[index] = ctx;
        nd->type_at[index] = type;
        nd->first_at[index] = len > 0 ? ((const char *)payload)[0] : 0;
    }
}

static void open_replica(int i, bool boot)
{
    struct node *nd = &fx->n[i];
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(replica_host_create(&fx->loop, &nd->host, err), 0);
    struct store_config sc = {.data_dir = nd->dir,
                              .wakeup_cb = replica_host_wakeup,
                              .wakeup_arg = nd->host,
                              .no_prealloc = true,
                              .segment_bytes = STORE_SEGMENT_BYTES_MIN};
    assert_int_equal(store_open(&sc, &nd->s, &nd->rep, err), 0);
    replica_host_attach(nd->host, nd->s);
    nd->inc = replica_incarnation_of(nd->rep.incarnation);
    struct replica_options opt = {
        .self = (raft_node)(i + 1),
        .incarnation = nd->inc,
        .bootstrap = boot ? &fx->cfg : NULL,
        .election_timeout_ms = 100,
        .heartbeat_ms = 10,
        .seed = (uint64_t)i + 11,
    };
    struct replica_callbacks cbs = {
        .apply = rec_apply, .send = on_send, .arg = nd};
    if (replica_open(nd->host, &fx->gid, &opt, &cbs, &nd->r, err) != 0) {
        fail_msg("replica_open %d: %s", i, err);
    }
}

static int setup(void **state)
{
    fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    fx->cut = -1;
    uv_loop_init(&fx->loop);
    for (int i = 0; i < 16; i++) {
        fx->gid.b[i] = (uint8_t)(0x40 + i);
    }
    for (int i = 0; i < N; i++) {
        snprintf(fx->n[i].dir, sizeof fx->n[i].dir,
                 "/tmp/keel-replchange-XXXXXX");
        assert_non_null(mkdtemp(fx->n[i].dir));
    }
    /* Nodes 1-3 are the index-1 voters; their incarnations are known once
     * their stores are open, so open those first with the config filled
     * in as each store reports it. */
    fx->cfg.n = 3;
    for (int i = 0; i < 3; i++) {
        char err[KEEL_ERRMSG_MAX];
        struct store *s = NULL;
        struct store_node_report rep;
        struct store_config sc = {.data_dir = fx->n[i].dir,
                                  .no_prealloc = true,
                                  .segment_bytes = STORE_SEGMENT_BYTES_MIN};
        assert_int_equal(store_open(&sc, &s, &rep, err), 0);
        store_close(s, true);
        fx->cfg.servers[i] = (struct raft_server){
            .node = (raft_node)(i + 1),
            .incarnation = replica_incarnation_of(rep.incarnation),
            .role = RAFT_VOTER};
    }
    for (int i = 0; i < N; i++) {
        open_replica(i, i < 3);
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) {
        struct node *nd = &fx->n[i];
        if (nd->r == NULL) {
            continue; /* a failed test left it stopped */
        }
        replica_close(nd->r);
        nd->r = NULL;
        store_close(nd->s, true);
        replica_host_destroy(nd->host);
    }
    fx->cut = -1;
    deliver();
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    uv_loop_close(&fx->loop);
    for (int i = 0; i < N; i++) {
        nftw(fx->n[i].dir, tr_rm, 16, FTW_DEPTH | FTW_PHYS);
    }
    free(fx);
    return 0;
}

typedef bool (*cond_fn)(uint64_t arg);

static bool wait_for(cond_fn c, uint64_t arg)
{
    for (int i = 0; i < 200000; i++) {
        if (c(arg)) {
            return true;
        }
        deliver();
        uv_run(&fx->loop, UV_RUN_ONCE);
    }
    return c(arg);
}

/* A leader other than `not` that committed its barrier. */
static int leader_but(int not )
{
    for (int i = 0; i < N; i++) {
        struct replica_info ri;
        if (fx->n[i].r == NULL) {
            continue;
        }
        replica_info(fx->n[i].r, &ri);
        if (i != not &&ri.role == RAFT_LEADER && ri.commit == ri.last_index) {
            return i;
        }
    }
    return -1;
}

static bool has_leader_but(uint64_t not )
{
    return leader_but((int)not ) >= 0;
}

static bool applied_ctx(uint64_t arg)
{
    int l = leader_but(-1);
    uint64_t index = arg >> 8;
    return l >= 0 && fx->n[l].ctx_at[index] == (arg & 0xff);
}

static bool node4_caught_up(uint64_t count)
{
    return fx->n[3].count >= count;
}

static bool voters_are(uint64_t n)
{
    const struct raft_config *c = replica_config(fx->n[3].r);
    uint32_t v = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        v += c->servers[i].role == RAFT_VOTER ? 1 : 0;
    }
    return v == n;
}

static void propose(int l, int n, char ch, uint64_t ctx)
{
    char buf[64];
    memset(buf, ch, sizeof buf);
    for (int i = 0; i < n; i++) {
        assert_int_equal(replica_propose(fx->n[l].r, RAFT_ENTRY_NORMAL, buf,
                                         sizeof buf, ctx, NULL),
                         0);
    }
}

static int change(int l, uint8_t op, int node, bool force, uint64_t ctx,
                  uint64_t *index, char *err)
{
    struct replica_change c = {.op = op,
                               .node = (raft_node)(node + 1),
                               .incarnation = fx->n[node].inc,
                               .force = force};
    return replica_change(fx->n[l].r, &c, ctx, index, err);
}

static void a_new_node_is_added_promoted_and_an_old_one_removed(void **state)
{
    (void)state;
    char err[KEEL_ERRMSG_MAX];
    uint64_t index = 0;
    assert_true(wait_for(has_leader_but, (uint64_t)-1));
    int l = leader_but(-1);
    propose(l, 30, 'a', 0);
    /* Node 4 is not in the configuration: removing it is refused. */
    assert_int_equal(change(l, RAFT_CHANGE_REMOVE, 3, false, 0, &index, err),
                     KEEL_ENOENT);
    assert_int_equal(
        change(l, RAFT_CHANGE_ADD_LEARNER, 3, false, 0x21, &index, err), 0);
    assert_true(index > 1);
    /* One change at a time (rule 3), and the message says so. */
    uint64_t i2 = 0;
    assert_int_equal(change(l, RAFT_CHANGE_PROMOTE, 3, false, 0, &i2, err),
                     KEEL_EBUSY);
    assert_non_null(strstr(err, "one change at a time"));
    /* The configuration entry's commit reaches apply with its ctx. */
    assert_true(wait_for(applied_ctx, index << 8 | 0x21));
    assert_int_equal(fx->n[l].type_at[index], RAFT_ENTRY_CONFIG);
    /* The learner catches up by replication from index 1. */
    assert_true(wait_for(node4_caught_up, 30));
    int rv = KEEL_EBUSY;
    for (int k = 0; k < 1000 && rv == KEEL_EBUSY; k++) {
        rv = change(l, RAFT_CHANGE_PROMOTE, 3, false, 0x22, &index, err);
        deliver();
        uv_run(&fx->loop, UV_RUN_ONCE);
    }
    assert_int_equal(rv, 0);
    assert_true(wait_for(applied_ctx, index << 8 | 0x22));
    assert_true(wait_for(voters_are, 4));
    /* The leader itself is never removed: transfer first. */
    assert_int_equal(change(l, RAFT_CHANGE_REMOVE, l, false, 0, &index, err),
                     KEEL_EINVAL);
    assert_non_null(strstr(err, "transfer leadership"));
    int victim = (l + 1) % 3;
    assert_int_equal(
        change(l, RAFT_CHANGE_REMOVE, victim, false, 0x23, &index, err), 0);
    assert_true(wait_for(applied_ctx, index << 8 | 0x23));
    assert_true(wait_for(voters_are, 3));
    /* The new voter takes part: more entries commit with it. */
    propose(l, 5, 'b', 0);
    assert_true(wait_for(node4_caught_up, 35));
}

static uint64_t commit_mark;

/* Leader l committed an index past commit_mark (set before). */
static bool committed_past(uint64_t l)
{
    struct replica_info ri;
    replica_info(fx->n[l].r, &ri);
    return ri.commit > commit_mark && ri.commit == ri.last_index;
}

static void an_unhealthy_majority_is_refused_unless_forced(void **state)
{
    (void)state;
    char err[KEEL_ERRMSG_MAX];
    uint64_t index = 0;
    assert_true(wait_for(has_leader_but, (uint64_t)-1));
    int l = leader_but(-1);
    int a = (l + 1) % 3;
    int b = (l + 2) % 3;
    /* Stop b: removing a would leave {l, b}, one of two healthy. */
    replica_close(fx->n[b].r);
    store_close(fx->n[b].s, true);
    replica_host_destroy(fx->n[b].host);
    fx->n[b].r = NULL;
    for (int k = 0; k < 100; k++) {
        uv_run(&fx->loop, UV_RUN_NOWAIT);
    }
    struct replica_info ri;
    replica_info(fx->n[l].r, &ri);
    commit_mark = ri.commit;
    propose(l, 3, 'c', 0);
    /* Committed without b: b's match is now below the commit. */
    assert_true(wait_for(has_leader_but, (uint64_t)b));
    assert_true(wait_for(committed_past, (uint64_t)l));
    assert_int_equal(change(l, RAFT_CHANGE_REMOVE, a, false, 0, &index, err),
                     KEEL_EBUSY);
    assert_non_null(strstr(err, "--force"));
    assert_int_equal(change(l, RAFT_CHANGE_REMOVE, a, true, 0, &index, err), 0);
    open_replica(b, true); /* teardown closes every node */
}

static bool cut_leader_stepped_down(uint64_t old)
{
    return leader_but((int)old) >= 0;
}

static bool old_applied(uint64_t arg)
{
    int old = (int)(arg & 0xff);
    uint64_t index = arg >> 8;
    struct replica_info ri;
    replica_info(fx->n[old].r, &ri);
    return ri.applied >= index;
}

static void a_deposed_leader_answers_no_ctx_for_a_replaced_entry(void **state)
{
    (void)state;
    assert_true(wait_for(has_leader_but, (uint64_t)-1));
    int old = leader_but(-1);
    struct replica_info ri;
    replica_info(fx->n[old].r, &ri);
    uint64_t index = ri.last_index + 1;
    fx->cut = old;
    propose(old, 1, 'x', 0x55); /* never commits: old is cut off */
    assert_true(wait_for(cut_leader_stepped_down, (uint64_t)old));
    int l = leader_but(old);
    propose(l, 3, 'y', 0);
    fx->cut = -1;
    assert_true(wait_for(old_applied, (index + 3) << 8 | (uint64_t)old));
    /* The entry at index is the new leader's, not the one ctx 0x55 named. */
    assert_int_not_equal(fx->n[old].first_at[index], 'x');
    assert_int_equal(fx->n[old].ctx_at[index], 0);
    for (uint64_t i = index; i < index + 4; i++) {
        assert_int_not_equal(fx->n[old].ctx_at[i], 0x55);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_new_node_is_added_promoted_and_an_old_one_removed, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            an_unhealthy_majority_is_refused_unless_forced, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_deposed_leader_answers_no_ctx_for_a_replaced_entry, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
