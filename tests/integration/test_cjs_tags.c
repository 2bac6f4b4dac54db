/* Placement tags on a 3-node cluster of real keelds in network
 * namespaces, each with its own server_tags in a config file: a stream
 * asking for tags lands on the nodes that carry them (case folded), one
 * asking for tags no node (or too few nodes) carries is refused with
 * nats-server's 10005 and is not created, an update to other tags moves
 * the stream's replica and keeps its messages, an update to tags nobody
 * carries is refused and moves nothing, and /varz and cluster status show
 * each node's tags. docs/cluster.md, "Placement tags". Shared setup:
 * cjs_common.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cjs_common.h"
#include "harness.h"

#define NODES 3
#define WAIT_MS 20000

static struct cjs cj; /* one cluster for the whole file */
static char conf[NODES][64];

static const char *const node_tags[NODES] = {
    "server_tags: [\"AZ:1\", \"ssd\"]\n",
    "server_tags: [\"az:2\", \"SSD\"]\n",
    "server_tags: [\"az:3\"]\n",
};

static int group_setup(void **state)
{
    (void)state;
    if (h_netns_prepare(&cj.net, NODES, "cjstags", NULL) != 0) {
        return -1;
    }
    for (int i = 0; i < NODES; i++) {
        snprintf(conf[i], sizeof conf[i], "/tmp/keel-tags-%d-%d.conf",
                 (int)getpid(), i);
        FILE *f = fopen(conf[i], "w");
        if (f == NULL || fputs(node_tags[i], f) < 0 || fclose(f) != 0) {
            return -1;
        }
        cj.net.node[i].config = conf[i];
    }
    return cjs_start_prepared(&cj, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    int rv = cjs_stop(&cj);
    for (int i = 0; i < NODES; i++) {
        unlink(conf[i]);
    }
    return rv;
}

/* STREAM.CREATE or UPDATE of name with num_replicas r and placement tags
 * (a JSON array text) through node 0: the answer (owned). */
static json_t *put_stream(const char *op, const char *name, int r,
                          const char *tags)
{
    char subj[128], body[512];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.%s.%s", op, name);
    snprintf(body, sizeof body,
             "{\"name\":\"%s\",\"subjects\":[\"%s.>\"],\"num_replicas\":%d,"
             "\"placement\":{\"tags\":%s}}",
             name, name, r, tags);
    json_t *o = cjs_request_retry(&cj, 0, subj, body, WAIT_MS);
    assert_non_null(o);
    return o;
}

/* The names of the stream's replicas (leader and followers), sorted,
 * comma-joined into out; "" when the info has no leader yet. */
static void replicas_of(const char *stream, char *out, size_t cap)
{
    out[0] = '\0';
    json_t *si = cjs_stream_info(&cj, 0, stream);
    const json_t *c = json_object_get(si, "cluster");
    const char *leader = json_string_value(json_object_get(c, "leader"));
    if (leader == NULL) {
        json_decref(si);
        return;
    }
    const char *names[NODES + 1];
    size_t n = 0, i;
    names[n++] = leader;
    const json_t *r;
    json_array_foreach(json_object_get(c, "replicas"), i, r)
    {
        const char *nm = json_string_value(json_object_get(r, "name"));
        if (nm != NULL && n < NODES + 1) {
            names[n++] = nm;
        }
    }
    for (size_t a = 0; a < n; a++) { /* sort a handful of names */
        for (size_t b = a + 1; b < n; b++) {
            if (strcmp(names[b], names[a]) < 0) {
                const char *t = names[a];
                names[a] = names[b];
                names[b] = t;
            }
        }
    }
    size_t used = 0;
    for (size_t k = 0; k < n; k++) {
        used += (size_t)snprintf(out + used, cap - used, "%s%s",
                                 k > 0 ? "," : "", names[k]);
    }
    json_decref(si);
}

struct want_replicas {
    const char *stream;
    const char *names;
};

static bool replicas_are(void *arg)
{
    const struct want_replicas *w = arg;
    char got[128];
    replicas_of(w->stream, got, sizeof got);
    return strcmp(got, w->names) == 0;
}

static json_int_t err_code(const json_t *o)
{
    return json_integer_value(
        json_object_get(json_object_get(o, "error"), "err_code"));
}

static const char *err_desc(const json_t *o)
{
    const char *d = json_string_value(
        json_object_get(json_object_get(o, "error"), "description"));
    return d != NULL ? d : "";
}

static void a_stream_lands_on_the_nodes_with_its_tags(void **state)
{
    (void)state;
    json_t *o = put_stream("CREATE", "ONE", 1, "[\"AZ:2\"]");
    assert_false(cjs_is_error(o));
    /* The config echoes the tags as asked. */
    assert_string_equal(
        json_string_value(json_array_get(
            json_object_get(
                json_object_get(json_object_get(o, "config"), "placement"),
                "tags"),
            0)),
        "AZ:2");
    json_decref(o);
    struct want_replicas w = {"ONE", "n2"};
    assert_true(h_poll(replicas_are, &w, WAIT_MS));

    o = put_stream("CREATE", "FAST", 2, "[\"ssd\"]");
    assert_false(cjs_is_error(o));
    json_decref(o);
    w = (struct want_replicas){"FAST", "n1,n2"};
    assert_true(h_poll(replicas_are, &w, WAIT_MS));
}

static void tags_too_few_nodes_carry_are_refused_with_10005(void **state)
{
    (void)state;
    json_t *o = put_stream("CREATE", "NOWHERE", 1, "[\"az:9\"]");
    assert_int_equal(err_code(o), 10005);
    assert_ptr_equal(strstr(err_desc(o), "no suitable peers for placement, "
                                         "tags not matched ['az:9']"),
                     err_desc(o));
    json_decref(o);
    o = put_stream("CREATE", "TWOAZ1", 2, "[\"az:1\"]");
    assert_int_equal(err_code(o), 10005);
    json_decref(o);
    /* Neither was created. */
    o = cjs_request(&cj, 0, "$JS.API.STREAM.INFO.NOWHERE", "");
    assert_int_equal(err_code(o), 10059);
    json_decref(o);
    o = cjs_request(&cj, 0, "$JS.API.STREAM.INFO.TWOAZ1", "");
    assert_int_equal(err_code(o), 10059);
    json_decref(o);
}

struct count_on {
    int node;
    const char *stream;
    json_int_t messages;
};

static bool node_counts(void *arg)
{
    const struct count_on *c = arg;
    json_t *si = cjs_stream_info(&cj, c->node, c->stream);
    json_int_t m = json_integer_value(
        json_object_get(json_object_get(si, "state"), "messages"));
    json_decref(si);
    return si != NULL && m == c->messages;
}

static void an_update_to_other_tags_moves_the_replica(void **state)
{
    (void)state;
    for (int i = 0; i < 10; i++) {
        json_t *a = cjs_request_retry(&cj, 0, "ONE.x", "kept", WAIT_MS);
        assert_false(cjs_is_error(a));
        json_decref(a);
    }
    json_t *o = put_stream("UPDATE", "ONE", 1, "[\"az:3\"]");
    assert_false(cjs_is_error(o));
    json_decref(o);
    struct want_replicas w = {"ONE", "n3"};
    assert_true(h_poll(replicas_are, &w, WAIT_MS));
    /* The messages moved with it: n3 holds and answers all ten. */
    struct count_on c = {2, "ONE", 10};
    assert_true(h_poll(node_counts, &c, WAIT_MS));

    o = put_stream("UPDATE", "ONE", 1, "[\"az:7\"]");
    assert_int_equal(err_code(o), 10005);
    assert_non_null(strstr(err_desc(o), "tags not matched ['az:7']"));
    json_decref(o);
    char got[128];
    replicas_of("ONE", got, sizeof got);
    assert_string_equal(got, "n3");
    json_t *si = cjs_stream_info(&cj, 0, "ONE");
    assert_string_equal(
        json_string_value(json_array_get(
            json_object_get(
                json_object_get(json_object_get(si, "config"), "placement"),
                "tags"),
            0)),
        "az:3");
    json_decref(si);
}

static void varz_and_cluster_status_show_each_nodes_tags(void **state)
{
    (void)state;
    char body[16384];
    assert_int_equal(h_netns_http_get(&cj.net, 0, "/varz", body, sizeof body),
                     200);
    json_t *v = json_loads(body, 0, NULL);
    assert_non_null(v);
    const json_t *t = json_object_get(v, "tags");
    assert_int_equal(json_array_size(t), 2);
    assert_string_equal(json_string_value(json_array_get(t, 0)), "az:1");
    assert_string_equal(json_string_value(json_array_get(t, 1)), "ssd");
    json_decref(v);
    /* Every node answers the status request; check whichever came first
     * against that node's own tags. */
    static const char *const first[NODES] = {"az:1", "az:2", "az:3"};
    json_t *st = cjs_request(&cj, 2, "$KEEL.API.CLUSTER.STATUS", "");
    assert_non_null(st);
    const json_t *srv = json_object_get(st, "server");
    int i =
        cjs_node_named(&cj, json_string_value(json_object_get(srv, "name")));
    assert_true(i >= 0);
    t = json_object_get(srv, "tags");
    assert_int_equal(json_array_size(t), i == 2 ? 1 : 2);
    assert_string_equal(json_string_value(json_array_get(t, 0)), first[i]);
    json_decref(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_stream_lands_on_the_nodes_with_its_tags),
        cmocka_unit_test(tags_too_few_nodes_carry_are_refused_with_10005),
        cmocka_unit_test(an_update_to_other_tags_moves_the_replica),
        cmocka_unit_test(varz_and_cluster_status_show_each_nodes_tags),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
