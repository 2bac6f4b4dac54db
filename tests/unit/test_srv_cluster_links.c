/* srv_cluster links, in process: several nodes on one libuv loop on
 * loopback (transport only, no NATS server), driven until a condition
 * holds or a bounded number of loop turns passed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "keel/error.h"
#include "srv_cluster.h"

#define NODES 4
#define WAIT_MS 10000

struct fixture {
    uv_loop_t loop;
    struct srv_cluster cl[NODES];
    bool started[NODES];
    char url[NODES][300];
    /* group echo */
    char got_from[64];
    char got[64];
    size_t got_len;
    unsigned got_count;
    /* peer callbacks of node 0 */
    unsigned ups, downs;
    char last_down[64];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || uv_loop_init(&f->loop) != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < NODES; i++) {
        if (f->started[i]) {
            srv_cluster_stop(&f->cl[i]);
        }
    }
    uv_run(&f->loop, UV_RUN_DEFAULT);
    for (int i = 0; i < NODES; i++) {
        if (f->started[i]) {
            srv_cluster_close(&f->cl[i]);
        }
    }
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f);
    return 0;
}

static void start_node(struct fixture *f, int i, const char *cluster,
                       const char *listen, const char *routes)
{
    char name[16], id[16];
    snprintf(name, sizeof name, "n%d", i + 1);
    snprintf(id, sizeof id, "ID%d", i + 1);
    struct srv_cluster_settings s = {
        .listen = listen,
        .name = cluster,
        .routes = routes,
        .node_name = name,
        .node_id = id,
        .client_url = "127.0.0.1:4222",
    };
    char errmsg[KEEL_ERRMSG_MAX] = "";
    assert_int_equal(srv_cluster_start(&f->cl[i], &f->loop, NULL, &s, errmsg),
                     0);
    f->started[i] = true;
    char url[sizeof f->cl[i].url];
    memcpy(url, f->cl[i].url, sizeof url);
    snprintf(f->url[i], sizeof f->url[i], "nats://%s", url);
}

static size_t npeers(struct fixture *f, int i)
{
    const char *names[SRV_CLUSTER_LINKS_MAX];
    return srv_cluster_peers(&f->cl[i], names, SRV_CLUSTER_LINKS_MAX);
}

/* Turn the loop until cond holds; the tick timer wakes it every
 * SRV_CLUSTER_TICK_MS, so each turn is bounded. */
static bool run_until(struct fixture *f, bool (*cond)(struct fixture *))
{
    uint64_t end = uv_now(&f->loop) + WAIT_MS;
    while (!cond(f)) {
        if (uv_now(&f->loop) > end) {
            return false;
        }
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    return true;
}

static bool mesh3(struct fixture *f)
{
    return npeers(f, 0) == 2 && npeers(f, 1) == 2 && npeers(f, 2) == 2;
}

static void nodes_seeded_with_one_route_learn_the_rest_by_gossip(void **state)
{
    struct fixture *f = *state;

    start_node(f, 0, "c1", "nats://127.0.0.1:0", "");
    start_node(f, 1, "c1", "nats://127.0.0.1:0", f->url[0]);
    start_node(f, 2, "c1", "nats://127.0.0.1:0", f->url[0]);
    assert_true(run_until(f, mesh3));
    /* One link per pair: no node holds two links to one peer. */
    for (int i = 0; i < 3; i++) {
        const char *names[SRV_CLUSTER_LINKS_MAX];
        size_t n = srv_cluster_peers(&f->cl[i], names, SRV_CLUSTER_LINKS_MAX);
        assert_int_equal(n, 2);
        assert_string_not_equal(names[0], names[1]);
    }
}

static void echo_cb(void *arg, const char *from, const uint8_t *data,
                    size_t len)
{
    struct fixture *f = arg;
    snprintf(f->got_from, sizeof f->got_from, "%s", from);
    f->got_len = len < sizeof f->got ? len : sizeof f->got;
    memcpy(f->got, data, f->got_len);
    f->got_count++;
}

static bool got_one(struct fixture *f)
{
    return f->got_count >= 1;
}

static bool mesh2(struct fixture *f)
{
    return npeers(f, 0) == 1 && npeers(f, 1) == 1;
}

static void
a_group_frame_reaches_the_handler_registered_for_its_group(void **state)
{
    struct fixture *f = *state;
    uint8_t g1[SRV_CLUSTER_GROUP_ID_BYTES] = {1, 2, 3};
    uint8_t g2[SRV_CLUSTER_GROUP_ID_BYTES] = {9, 9, 9};

    start_node(f, 0, "c1", "nats://127.0.0.1:0", "");
    start_node(f, 1, "c1", "nats://127.0.0.1:0", f->url[0]);
    assert_int_equal(srv_cluster_register_group(&f->cl[1], g1, echo_cb, f), 0);
    assert_int_equal(srv_cluster_register_group(&f->cl[1], g1, echo_cb, f),
                     KEEL_EEXIST);
    assert_int_equal(srv_cluster_send(&f->cl[0], "n2", g1, "x", 1),
                     KEEL_ENOENT); /* not linked yet */
    assert_true(run_until(f, mesh2));
    /* A frame of a group n2 does not host is dropped, not misrouted. */
    assert_int_equal(srv_cluster_send(&f->cl[0], "n2", g2, "nope", 4), 0);
    assert_int_equal(srv_cluster_send(&f->cl[0], "n2", g1, "hello", 5), 0);
    assert_true(run_until(f, got_one));
    assert_int_equal(f->got_count, 1);
    assert_string_equal(f->got_from, "n1");
    assert_int_equal(f->got_len, 5);
    assert_memory_equal(f->got, "hello", 5);
}

static void
an_extension_frame_reaches_its_kind_handler_and_an_unknown_kind_is_dropped(
    void **state)
{
    struct fixture *f = *state;

    start_node(f, 0, "c1", "nats://127.0.0.1:0", "");
    start_node(f, 1, "c1", "nats://127.0.0.1:0", f->url[0]);
    assert_int_equal(
        srv_cluster_register_kind(&f->cl[1], SRV_CLUSTER_GROUP, echo_cb, f),
        KEEL_EINVAL);
    assert_int_equal(
        srv_cluster_register_kind(&f->cl[1], SRV_CLUSTER_JS_LEADER, echo_cb, f),
        0);
    assert_int_equal(
        srv_cluster_register_kind(&f->cl[1], SRV_CLUSTER_JS_LEADER, echo_cb, f),
        KEEL_EEXIST);
    assert_true(run_until(f, mesh2));
    /* No handler for JS_META on n2: dropped, and the link stays up. */
    assert_int_equal(
        srv_cluster_send_kind(&f->cl[0], "n2", SRV_CLUSTER_JS_META, "nope", 4),
        0);
    assert_int_equal(
        srv_cluster_broadcast_kind(&f->cl[0], SRV_CLUSTER_JS_LEADER, "lead", 4),
        1);
    assert_true(run_until(f, got_one));
    assert_int_equal(f->got_count, 1);
    assert_string_equal(f->got_from, "n1");
    assert_int_equal(f->got_len, 4);
    assert_memory_equal(f->got, "lead", 4);
    assert_int_equal(npeers(f, 0), 1);
    assert_int_equal(npeers(f, 1), 1);
}

static bool refused(struct fixture *f)
{
    for (int i = 0; i < SRV_CLUSTER_NODES_MAX; i++) {
        if (f->cl[1].nodes[i].used && f->cl[1].nodes[i].refused) {
            return true;
        }
    }
    return false;
}

static void a_node_of_another_cluster_name_is_refused(void **state)
{
    struct fixture *f = *state;

    start_node(f, 0, "c1", "nats://127.0.0.1:0", "");
    start_node(f, 1, "other", "nats://127.0.0.1:0", f->url[0]);
    assert_true(run_until(f, refused));
    assert_int_equal(npeers(f, 0), 0);
    assert_int_equal(npeers(f, 1), 0);
}

static bool self_marked(struct fixture *f)
{
    int self = 0;
    for (int i = 0; i < SRV_CLUSTER_NODES_MAX; i++) {
        self += f->cl[0].nodes[i].used && f->cl[0].nodes[i].self;
    }
    return self == 2 && npeers(f, 0) == 1;
}

static void routes_that_reach_this_node_itself_are_skipped(void **state)
{
    struct fixture *f = *state;
    char alias[64];

    start_node(f, 1, "c1", "nats://127.0.0.1:0", "");
    /* Listening on every address, node 0 advertises 127.0.0.1:port; a
     * seed of 127.0.0.2:port reaches it too and is only recognised by the
     * node id in the handshake. */
    start_node(f, 0, "c1", "nats://0.0.0.0:0", f->url[1]);
    snprintf(alias, sizeof alias, "nats://127.0.0.2:%d", f->cl[0].port);
    assert_int_equal(srv_cluster_add_route(&f->cl[0], f->url[0]), 0);
    assert_int_equal(srv_cluster_add_route(&f->cl[0], alias), 0);
    assert_true(run_until(f, self_marked));
}

static void peer_cb(void *arg, const char *name, bool up)
{
    struct fixture *f = arg;
    if (up) {
        f->ups++;
    } else {
        f->downs++;
        snprintf(f->last_down, sizeof f->last_down, "%s", name);
    }
}

static bool n3_down(struct fixture *f)
{
    return f->downs == 1 && npeers(f, 0) == 1 && npeers(f, 1) == 1;
}

static void
a_stopped_node_is_reported_down_and_the_rest_stay_linked(void **state)
{
    struct fixture *f = *state;

    start_node(f, 0, "c1", "nats://127.0.0.1:0", "");
    srv_cluster_set_peer_cb(&f->cl[0], peer_cb, f);
    start_node(f, 1, "c1", "nats://127.0.0.1:0", f->url[0]);
    start_node(f, 2, "c1", "nats://127.0.0.1:0", f->url[1]);
    assert_true(run_until(f, mesh3));
    assert_int_equal(f->ups, 2);
    srv_cluster_stop(&f->cl[2]);
    assert_true(run_until(f, n3_down));
    assert_string_equal(f->last_down, "n3");
}

/* The loop thread stuck in one long turn (longer than
 * SRV_CLUSTER_DEAD_MS), as a node applying many entries at once: the
 * deliberate stall is the scenario, not a wait for a condition. */
static void stall_cb(uv_timer_t *t)
{
    (void)t;
    usleep((SRV_CLUSTER_DEAD_MS + 1000) * 1000);
}

static uint64_t stall_end_ms;
static uv_timer_t stall; /* closed by the teardown's loop run */

static bool past_stall(struct fixture *f)
{
    return uv_now(&f->loop) > stall_end_ms + 5 * SRV_CLUSTER_TICK_MS;
}

/* After a loop turn longer than SRV_CLUSTER_DEAD_MS the peer's frames
 * sit unread in the socket while the late tick runs (libuv runs timers
 * before the poll): the tick must not call that silence a dead link. */
static void a_long_loop_turn_does_not_drop_live_links(void **state)
{
    struct fixture *f = *state;

    start_node(f, 0, "c1", "nats://127.0.0.1:0", "");
    srv_cluster_set_peer_cb(&f->cl[0], peer_cb, f);
    start_node(f, 1, "c1", "nats://127.0.0.1:0", f->url[0]);
    assert_true(run_until(f, mesh2));
    assert_int_equal(uv_timer_init(&f->loop, &stall), 0);
    assert_int_equal(uv_timer_start(&stall, stall_cb, 0, 0), 0);
    uv_run(&f->loop, UV_RUN_ONCE);
    uv_update_time(&f->loop);
    stall_end_ms = uv_now(&f->loop);
    assert_true(run_until(f, past_stall));
    assert_int_equal(f->downs, 0);
    assert_true(mesh2(f));
    uv_close((uv_handle_t *)&stall, NULL);
}

static void two_nodes_dialing_each_other_keep_one_link(void **state)
{
    struct fixture *f = *state;

    start_node(f, 0, "c1", "nats://127.0.0.1:0", "");
    srv_cluster_set_peer_cb(&f->cl[0], peer_cb, f);
    start_node(f, 1, "c1", "nats://127.0.0.1:0", f->url[0]);
    assert_int_equal(srv_cluster_add_route(&f->cl[0], f->url[1]), 0);
    assert_true(run_until(f, mesh2));
    /* Drive a little longer: the loser of a simultaneous dial is closed
     * on both sides and the survivor is the link n1 dialed. */
    for (int i = 0; i < 20; i++) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_true(mesh2(f));
    /* Replacing the losing link is not a peer going down and up. */
    assert_int_equal(f->downs, 0);
    assert_int_equal(f->ups, 1);
    for (int i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        struct srv_cluster_link *l = f->cl[0].links[i];
        if (l != NULL && l->established && !l->closing) {
            assert_true(l->outbound);
        }
    }
}

/* A raw peer on 127.0.0.1:port that says HELLO as node name with server
 * id id, then only PINGs (fake_ping): the link of a process that is gone
 * while TCP has not noticed (half-open). Returns the socket. */
static int fake_peer(int port, const char *name, const char *id)
{
    char hello[256];
    uint8_t frame[512];
    int n = snprintf(hello, sizeof hello,
                     "{\"proto\":1,\"id\":\"%s\",\"name\":\"%s\","
                     "\"cluster\":\"c1\",\"url\":\"127.0.0.1:1\","
                     "\"client_url\":\"127.0.0.1:1\"}",
                     id, name);
    size_t h =
        srv_cluster_frame_header(frame, SRV_CLUSTER_HELLO, NULL, 0, (size_t)n);
    memcpy(frame + h, hello, (size_t)n);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(write(fd, frame, h + (size_t)n), (ssize_t)(h + (size_t)n));
    return fd;
}

static int fake_fd = -1;

static void fake_ping(void)
{
    uint8_t frame[64];
    size_t h = srv_cluster_frame_header(frame, SRV_CLUSTER_PING, NULL, 0, 0);
    /* After n1 dropped the link this fails: no SIGPIPE, it is ignored. */
    (void)!send(fake_fd, frame, h, MSG_NOSIGNAL);
}

/* n1's link named n2 has server id id. */
static bool n2_is(struct fixture *f, const char *id)
{
    struct srv_cluster_link *l = srv_cluster_peer_link(&f->cl[0], "n2");
    return l != NULL && strcmp(l->peer_id, id) == 0;
}

static bool fake_linked(struct fixture *f)
{
    fake_ping();
    return n2_is(f, "OLD2");
}

static bool restarted_linked(struct fixture *f)
{
    fake_ping(); /* the stale link never falls silent */
    return n2_is(f, "ID2") && npeers(f, 1) == 1;
}

/* n2 restarts (a new server id) while n1 still holds a live-looking link
 * to its old process: n1 takes the new link at once, although the tie
 * rule (keep the link the smaller name dialed) would keep the old one. */
static void a_restarted_peer_replaces_its_stale_link(void **state)
{
    struct fixture *f = *state;

    start_node(f, 0, "c1", "nats://127.0.0.1:0", "");
    srv_cluster_set_peer_cb(&f->cl[0], peer_cb, f);
    const char *colon = strrchr(f->cl[0].url, ':');
    assert_non_null(colon);
    fake_fd = fake_peer(atoi(colon + 1), "n2", "OLD2");
    assert_true(run_until(f, fake_linked));
    start_node(f, 1, "c1", "nats://127.0.0.1:0", f->url[0]); /* id ID2 */
    assert_true(run_until(f, restarted_linked));
    assert_int_equal(f->downs, 1); /* its users saw it restart */
    assert_string_equal(f->last_down, "n2");
    close(fake_fd);
    fake_fd = -1;
}

/* Batching (docs/design.md §3): the messages of 20 groups sent to one node in
 * one loop iteration arrive in one frame, each at its own group's handler, in
 * the order sent; a message too large to batch is framed alone after them
 * (it must not overtake them). */
#define BATCH_GROUPS 20

struct batch_rx {
    struct fixture *f;
    int group;
};
static int batch_order[BATCH_GROUPS + 1];
static int batch_n;

static void batch_cb(void *arg, const char *from, const uint8_t *data,
                     size_t len)
{
    const struct batch_rx *rx = arg;
    (void)from;
    size_t want =
        rx->group == BATCH_GROUPS ? SRV_CLUSTER_BATCH_ITEM_BYTES_MAX + 1 : 1;
    assert_int_equal(len, want);
    assert_int_equal(data[0], (uint8_t)rx->group);
    if (batch_n <= BATCH_GROUPS) {
        batch_order[batch_n++] = rx->group;
    }
}

static bool batch_all(struct fixture *f)
{
    (void)f;
    return batch_n == BATCH_GROUPS + 1;
}

static void group_messages_of_one_iteration_share_one_frame(void **state)
{
    struct fixture *f = *state;
    static struct batch_rx rx[BATCH_GROUPS + 1];
    static uint8_t big[SRV_CLUSTER_BATCH_ITEM_BYTES_MAX + 1];
    uint8_t gid[BATCH_GROUPS + 1][SRV_CLUSTER_GROUP_ID_BYTES];

    start_node(f, 0, "c1", "nats://127.0.0.1:0", "");
    start_node(f, 1, "c1", "nats://127.0.0.1:0", f->url[0]);
    for (int g = 0; g <= BATCH_GROUPS; g++) {
        memset(gid[g], 0, sizeof gid[g]);
        gid[g][0] = (uint8_t)(g + 1);
        rx[g] = (struct batch_rx){.f = f, .group = g};
        assert_int_equal(
            srv_cluster_register_group(&f->cl[1], gid[g], batch_cb, &rx[g]), 0);
    }
    assert_true(run_until(f, mesh2));
    struct srv_cluster_link *l = srv_cluster_peer_link(&f->cl[0], "n2");
    assert_non_null(l);
    uint64_t frames0 = l->frames_out;
    batch_n = 0;
    for (int g = 0; g < BATCH_GROUPS; g++) {
        uint8_t b = (uint8_t)g;
        assert_int_equal(srv_cluster_send(&f->cl[0], "n2", gid[g], &b, 1), 0);
    }
    big[0] = BATCH_GROUPS;
    assert_int_equal(
        srv_cluster_send(&f->cl[0], "n2", gid[BATCH_GROUPS], big, sizeof big),
        0);
    /* Queued, not yet framed: 20 items in the batch, the big one already
     * after the flushed batch. */
    assert_int_equal(l->frames_out - frames0, 2);
    assert_true(run_until(f, batch_all));
    for (int i = 0; i <= BATCH_GROUPS; i++) {
        assert_int_equal(batch_order[i], i);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            nodes_seeded_with_one_route_learn_the_rest_by_gossip, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_group_frame_reaches_the_handler_registered_for_its_group, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            an_extension_frame_reaches_its_kind_handler_and_an_unknown_kind_is_dropped,
            setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_node_of_another_cluster_name_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            routes_that_reach_this_node_itself_are_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_stopped_node_is_reported_down_and_the_rest_stay_linked, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_long_loop_turn_does_not_drop_live_links, setup, teardown),
        cmocka_unit_test_setup_teardown(
            two_nodes_dialing_each_other_keep_one_link, setup, teardown),
        cmocka_unit_test_setup_teardown(
            group_messages_of_one_iteration_share_one_frame, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_restarted_peer_replaces_its_stale_link, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
