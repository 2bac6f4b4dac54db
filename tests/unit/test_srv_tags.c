/* srv_tags: server_tags and placement tags as nats-server matches them
 * (case folded, every tag asked for among the server's), and the text of
 * its placement error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_tags.h"

static void parse(const char *text, struct srv_tags *out)
{
    char errmsg[KEEL_ERRMSG_MAX];
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(v);
    assert_int_equal(srv_tags_parse(v, out, errmsg), 0);
    json_decref(v);
}

static void every_asked_tag_must_be_a_server_tag(void **state)
{
    (void)state;
    struct srv_tags node, want;
    parse("[\"az:1\", \"SSD\"]", &node);
    parse("[\"ssd\"]", &want);
    assert_true(srv_tags_match(&node, &want));
    parse("[\"AZ:1\", \"ssd\"]", &want);
    assert_true(srv_tags_match(&node, &want));
    parse("[\"az:1\", \"gpu\"]", &want);
    assert_false(srv_tags_match(&node, &want));
    parse("[]", &want);
    assert_true(srv_tags_match(&node, &want)); /* no tags: any node */
    parse("[]", &node);
    parse("[\"ssd\"]", &want);
    assert_false(srv_tags_match(&node, &want));
}

static void one_string_is_one_tag_and_null_is_none(void **state)
{
    (void)state;
    struct srv_tags t;
    parse("\"a,b\"", &t);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.t[0], "a,b");
    char errmsg[KEEL_ERRMSG_MAX];
    assert_int_equal(srv_tags_parse(NULL, &t, errmsg), 0);
    assert_int_equal(t.n, 0);
    json_t *v = json_pack("[s, i]", "ok", 3);
    assert_int_equal(srv_tags_parse(v, &t, errmsg), KEEL_EINVAL);
    assert_non_null(strstr(errmsg, "each tag is a string of 1 to 63 bytes"));
    json_decref(v);
    char longer[SRV_TAG_BYTES + 1];
    memset(longer, 'x', SRV_TAG_BYTES);
    longer[SRV_TAG_BYTES] = '\0';
    v = json_pack("[s]", longer);
    assert_int_equal(srv_tags_parse(v, &t, errmsg), KEEL_EINVAL);
    json_decref(v);
}

static void the_error_lists_the_tags_as_nats_server_does(void **state)
{
    (void)state;
    struct srv_tags t;
    char out[64];
    parse("[\"az:9\"]", &t);
    srv_tags_text(&t, out, sizeof out);
    assert_string_equal(out, "['az:9']");
    parse("[\"A\", \"b\"]", &t);
    srv_tags_text(&t, out, sizeof out);
    assert_string_equal(out, "['a', 'b']");
    parse("[]", &t);
    srv_tags_text(&t, out, sizeof out);
    assert_string_equal(out, "[]");
    parse("[\"abcdefghijklmnop\"]", &t);
    srv_tags_text(&t, out, 8); /* cut short, still terminated */
    assert_int_equal(strlen(out), 7);
    json_t *a = srv_tags_json(&t);
    assert_string_equal(json_string_value(json_array_get(a, 0)),
                        "abcdefghijklmnop");
    json_decref(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_asked_tag_must_be_a_server_tag),
        cmocka_unit_test(one_string_is_one_tag_and_null_is_none),
        cmocka_unit_test(the_error_lists_the_tags_as_nats_server_does),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
