/* Unit tests of keel cluster status's merged view (cli_cluster_status.c):
 * canned answers of three nodes become one row per node and one per
 * stream replica; the exit status is 0 only when every node answered and
 * every state is ok, and the message names what is wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_cluster.h"

#define MEMBERS                                                                \
    "\"members\": [{\"name\": \"n1\", \"up\": true}, {\"name\": \"n2\", "      \
    "\"up\": true}, {\"name\": \"n3\", \"up\": %s}]"

/* One node's answer: its name, meta role, health, and its ORD group. */
static json_t *answer(const char *name, const char *role, const char *status,
                      const char *gstate, bool n3_up, const char *peers)
{
    char text[2048];
    char members[256];
    snprintf(members, sizeof members, MEMBERS, n3_up ? "true" : "false");
    snprintf(text, sizeof text,
             "{\"server\": {\"name\": \"%s\", \"cluster\": \"c\", "
             "\"uptime_ms\": 65000}, \"status\": \"%s\", %s%s%s "
             "\"orphans_count\": 0, %s, \"meta\": {\"role\": \"%s\", "
             "\"leader\": \"n1\", \"term\": 2}, \"groups\": [{\"stream\": "
             "\"ORD\", \"replicas\": 3, \"role\": \"%s\", \"leader\": "
             "\"n1\", \"term\": 2, \"applied\": 1234, \"state\": \"%s\", "
             "\"peers\": %s}]}",
             name, status, strcmp(status, "ok") == 0 ? "" : "\"error\": \"",
             strcmp(status, "ok") == 0 ? "" : gstate,
             strcmp(status, "ok") == 0 ? "" : "\",", members, role, role,
             gstate, peers);
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    return o;
}

#define LEADER_PEERS                                                           \
    "[{\"name\": \"n1\", \"leader\": true}, {\"name\": \"n2\", \"leader\": "   \
    "false, \"current\": true, \"lag\": 0, \"offline\": false}, {\"name\": "   \
    "\"n3\", \"leader\": false, \"current\": %s, \"lag\": %d, \"offline\": "   \
    "%s}]"

static char out[16384];

static int print(json_t *replies, json_t *missing, char *errmsg)
{
    FILE *f = fmemopen(out, sizeof out, "w");
    assert_non_null(f);
    int rv = cli_cluster_status_print(replies, missing, f, false, errmsg);
    fclose(f);
    json_decref(replies);
    json_decref(missing);
    return rv;
}

static void all_answered_and_ok_is_exit_0_with_a_row_each(void **state)
{
    (void)state;
    char errmsg[KEEL_ERRMSG_MAX] = "";
    char lp[512];
    snprintf(lp, sizeof lp, LEADER_PEERS, "true", 0, "false");
    json_t *r = json_array();
    json_array_append_new(r, answer("n1", "leader", "ok", "ok", true, lp));
    json_array_append_new(r, answer("n2", "follower", "ok", "ok", true, "[]"));
    json_array_append_new(r, answer("n3", "follower", "ok", "ok", true, "[]"));
    assert_int_equal(print(r, json_array(), errmsg), 0);
    assert_non_null(strstr(out, "Cluster c: 3 of 3 nodes answered, meta "
                                "leader n1 (term 2)"));
    assert_non_null(strstr(out, "n2    yes  follower  ok"));
    assert_non_null(strstr(out, "1m5s"));  /* uptime in human units */
    assert_non_null(strstr(out, "1,234")); /* counts with separators */
    int rows = 0;
    for (const char *p = out; (p = strstr(p, "\nORD ")) != NULL; p++) {
        rows++;
    }
    assert_int_equal(rows, 3);
}

static void a_down_node_is_named_and_exit_is_1(void **state)
{
    (void)state;
    char errmsg[KEEL_ERRMSG_MAX] = "";
    char lp[512];
    snprintf(lp, sizeof lp, LEADER_PEERS, "false", 7, "true");
    json_t *r = json_array();
    json_array_append_new(r, answer("n1", "leader", "ok", "ok", false, lp));
    json_array_append_new(r, answer("n2", "follower", "ok", "ok", false, "[]"));
    assert_int_equal(print(r, json_array(), errmsg), KEEL_EIO);
    assert_non_null(strstr(errmsg, "n3 is down"));
    assert_non_null(strstr(out, "n3    DOWN"));
    assert_non_null(strstr(out, "offline (leader has no link)"));
}

static void a_silent_linked_node_and_a_bad_group_are_named(void **state)
{
    (void)state;
    char errmsg[KEEL_ERRMSG_MAX] = "";
    char lp[512];
    snprintf(lp, sizeof lp, LEADER_PEERS, "false", 3, "false");
    json_t *r = json_array();
    json_array_append_new(r, answer("n1", "leader", "ok", "ok", true, lp));
    json_array_append_new(r, answer("n2", "follower", "unavailable",
                                    "group ORD is amnesiac (lost synced state)",
                                    true, "[]"));
    json_t *missing = json_array();
    json_array_append_new(missing, json_string("n3"));
    assert_int_equal(print(r, missing, errmsg), KEEL_EIO);
    assert_non_null(strstr(errmsg, "n2: group ORD is amnesiac"));
    assert_non_null(strstr(errmsg, "n3 did not answer"));
    assert_non_null(strstr(out, "no answer"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_answered_and_ok_is_exit_0_with_a_row_each),
        cmocka_unit_test(a_down_node_is_named_and_exit_is_1),
        cmocka_unit_test(a_silent_linked_node_and_a_bad_group_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
