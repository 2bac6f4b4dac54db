/* srv_isub: an internal subscription gets what is published inside keeld,
 * what the layer above delivers and what another node routes here; its
 * interest goes to the forwarder (the cluster) when added and when
 * removed; an internal publish goes to the layer above, to the local
 * subscribers and to the forwarder, as a client's PUB. A server on a
 * loop, no client and no socket traffic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_config.h"
#include "srv_isub.h"
#include "srv_parser.h"
#include "srv_route.h"
#include "srv_server.h"

struct fixture {
    uv_loop_t loop;
    struct srv_config cfg;
    struct srv_server srv;
    /* what the handler saw */
    unsigned got;
    char subject[64], reply[64], body[64];
    size_t hdr;
    /* the hooks */
    unsigned taken, fwd_end, interest_add, interest_remove;
    char taken_subject[64];
};

static void on_msg(void *arg, const struct srv_cmd *m)
{
    struct fixture *f = arg;
    f->got++;
    snprintf(f->subject, sizeof f->subject, "%.*s", (int)m->subject.len,
             m->subject.ptr);
    snprintf(f->reply, sizeof f->reply, "%.*s", (int)m->reply.len,
             m->reply.len > 0 ? m->reply.ptr : "");
    f->hdr = m->hdr_bytes;
    snprintf(f->body, sizeof f->body, "%.*s",
             (int)(m->total_bytes - m->hdr_bytes), m->payload + m->hdr_bytes);
}

static bool take(void *arg, struct srv_conn *c, const struct srv_cmd *cmd)
{
    struct fixture *f = arg;
    assert_null(c);
    f->taken++;
    snprintf(f->taken_subject, sizeof f->taken_subject, "%.*s",
             (int)cmd->subject.len, cmd->subject.ptr);
    return strncmp(f->taken_subject, "$JS.", 4) == 0;
}
static bool park(void *arg, const struct srv_cmd *cmd, bool nr)
{
    (void)arg, (void)cmd, (void)nr;
    return false;
}
static uint32_t hand_over(void *arg, bool start)
{
    (void)arg, (void)start;
    return 0;
}
static void stop(void *arg)
{
    (void)arg;
}
static const struct srv_pub_hooks pub_hooks = {take, park, hand_over, stop};

static void fwd_begin(void *arg, const struct srv_cmd *cmd,
                      struct srv_pub_fwd *w)
{
    (void)arg, (void)cmd, (void)w;
}
static bool fwd_queue_remote(void *arg, struct srv_pub_fwd *w, const char *name,
                             size_t len, size_t n)
{
    (void)arg, (void)w, (void)name, (void)len, (void)n;
    return false;
}
static size_t fwd_end(void *arg, struct srv_pub_fwd *w,
                      const struct srv_cmd *cmd)
{
    (void)w, (void)cmd;
    ((struct fixture *)arg)->fwd_end++;
    return 0;
}
static void fwd_add(void *arg, const struct srv_sub *sub)
{
    assert_non_null(sub->fn);
    ((struct fixture *)arg)->interest_add++;
}
static void fwd_remove(void *arg, const struct srv_sub *sub)
{
    assert_non_null(sub->fn);
    ((struct fixture *)arg)->interest_remove++;
}
static const struct srv_fwd_hooks fwd_hooks = {
    fwd_begin, fwd_queue_remote, fwd_end, fwd_add, fwd_remove, stop};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    char err[KEEL_ERRMSG_MAX];
    if (f == NULL || uv_loop_init(&f->loop) != 0) {
        free(f);
        return -1;
    }
    srv_config_defaults(&f->cfg);
    snprintf(f->cfg.addr, sizeof f->cfg.addr, "127.0.0.1");
    f->cfg.port = 0;
    if (srv_server_init(&f->srv, &f->loop, &f->cfg, err) != 0) {
        return -1;
    }
    srv_server_set_pub_hooks(&f->srv, &pub_hooks, f);
    srv_server_set_fwd_hooks(&f->srv, &fwd_hooks, f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_server_set_fwd_hooks(&f->srv, NULL, NULL);
    srv_server_set_pub_hooks(&f->srv, NULL, NULL);
    srv_server_stop(&f->srv);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    srv_server_close(&f->srv);
    (void)uv_loop_close(&f->loop);
    free(f);
    return 0;
}

static void
a_subscription_gets_what_is_published_delivered_and_routed(void **state)
{
    struct fixture *f = *state;
    struct srv_sub *sub = NULL;
    size_t n = 0;
    static const char hdr[] = "NATS/1.0\r\nA: b\r\n\r\n";

    assert_int_equal(srv_isub_add(&f->srv, "in.*.x", on_msg, f, &sub), 0);
    assert_int_equal(f->interest_add, 1);
    /* published inside: a subscriber got it, and the forwarder saw it */
    assert_int_equal(
        srv_isub_publish(&f->srv, "in.a.x", "r.1", NULL, 0, "one", 3, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(f->got, 1);
    assert_string_equal(f->subject, "in.a.x");
    assert_string_equal(f->reply, "r.1");
    assert_string_equal(f->body, "one");
    assert_int_equal(f->fwd_end, 1);
    assert_int_equal(f->taken, 1);
    /* headers and payload come as one block */
    assert_int_equal(srv_isub_publish(&f->srv, "in.b.x", NULL, hdr,
                                      sizeof hdr - 1, "two", 3, &n),
                     0);
    assert_int_equal(f->got, 2);
    assert_int_equal(f->hdr, sizeof hdr - 1);
    assert_string_equal(f->body, "two");
    /* delivered by the layer above (a JetStream reply) */
    assert_int_equal(srv_route_deliver_internal(&f->srv, "in.c.x", 6, "in.c.x",
                                                6, NULL, NULL, 0, "three", 5),
                     0);
    assert_int_equal(f->got, 3);
    assert_string_equal(f->body, "three");
    /* routed from another node */
    struct srv_cmd routed = {.op = SRV_OP_PUB,
                             .subject = {"in.d.x", 6},
                             .total_bytes = 4,
                             .payload = "four"};
    srv_route_deliver_routed(&f->srv, &routed, NULL, 0);
    assert_int_equal(f->got, 4);
    assert_string_equal(f->body, "four");
    /* another subject: not ours */
    assert_int_equal(
        srv_isub_publish(&f->srv, "in.e.y", NULL, NULL, 0, "x", 1, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(f->got, 4);

    srv_isub_remove(&f->srv, sub);
    assert_int_equal(f->interest_remove, 1);
    assert_int_equal(
        srv_isub_publish(&f->srv, "in.a.x", NULL, NULL, 0, "x", 1, &n), 0);
    assert_int_equal(f->got, 4);
}

static void the_layer_above_takes_an_internal_request(void **state)
{
    struct fixture *f = *state;
    size_t n = 0;
    assert_int_equal(
        srv_isub_publish(&f->srv, "$JS.API.INFO", "_R.1", NULL, 0, "", 0, &n),
        0);
    assert_int_equal(f->taken, 1);
    assert_string_equal(f->taken_subject, "$JS.API.INFO");
    assert_int_equal(n, 1); /* taken counts as delivered */
}

static void bad_subjects_are_refused(void **state)
{
    struct fixture *f = *state;
    struct srv_sub *sub = NULL;
    size_t n = 0;
    assert_int_equal(srv_isub_add(&f->srv, "", on_msg, f, &sub), KEEL_EINVAL);
    assert_int_equal(srv_isub_add(&f->srv, "a..b", on_msg, f, &sub),
                     KEEL_EINVAL);
    assert_null(sub);
    assert_int_equal(
        srv_isub_publish(&f->srv, "a.*", NULL, NULL, 0, "x", 1, &n),
        KEEL_EINVAL);
    assert_int_equal(f->interest_add, 0);
    srv_isub_remove(&f->srv, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_subscription_gets_what_is_published_delivered_and_routed, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            the_layer_above_takes_an_internal_request, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_subjects_are_refused, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
