/* srv_js_xform: subject transforms as nats-server defines them ($N,
 * {{wildcard(N)}}, {{partition(n,...)}}, a carried-over '>'), the
 * destinations it refuses with its texts, and the republish and
 * subject_transform config fields built on them (srv_js_config_xform.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_config.h"
#include "srv_js_xform.h"

static struct srv_js_xform xf;

static const char *xform(const char *src, const char *dest, const char *subj)
{
    static char out[SRV_JS_SUBJECT_BYTES_MAX + 1];
    char err[KEEL_ERRMSG_MAX];
    size_t n = 0;
    assert_int_equal(srv_js_xform_compile(src, dest, &xf, err), 0);
    int rv = srv_js_xform_apply(&xf, subj, strlen(subj), out, sizeof out, &n);
    if (rv == KEEL_ENOENT) {
        return NULL;
    }
    assert_int_equal(rv, 0);
    assert_int_equal(n, strlen(out));
    return out;
}

static void wildcards_literals_and_the_tail_are_mapped(void **state)
{
    (void)state;
    assert_string_equal(xform("orders.*.*", "shop.$2.$1", "orders.eu.42"),
                        "shop.42.eu");
    assert_string_equal(xform("orders.*.*",
                              "shop.{{wildcard(2)}}.x."
                              "{{ Wildcard( 1 ) }}",
                              "orders.eu.42"),
                        "shop.42.x.eu");
    assert_string_equal(xform("a.>", "b.>", "a.x.y.z"), "b.x.y.z");
    assert_string_equal(xform("a.*.>", "b.$1.c.>", "a.x.y.z"), "b.x.c.y.z");
    assert_string_equal(xform("", ">", "any.thing"), "any.thing");
    assert_string_equal(xform(">", "copy.>", "any.thing"), "copy.any.thing");
    assert_string_equal(xform("fixed", "other", "fixed"), "other");
    /* '$' followed by a non-number is a literal token. */
    assert_string_equal(xform("k.*", "$KV.$1.$x", "k.v"), "$KV.v.$x");
    /* Subjects the source does not match are left alone. */
    assert_null(xform("orders.*", "o.$1", "orders.a.b"));
    assert_null(xform("orders.*", "o.$1", "payments.a"));
    assert_null(xform("orders.*", "o.$1", "orders.*"));
}

static void partition_hashes_fnv1a_of_the_tokens(void **state)
{
    (void)state;
    /* FNV-1a 32 of "a" is 0xe40c292c (3826002220): mod 7 is 5. */
    assert_string_equal(xform("p.*", "q.{{partition(7,1)}}.$1", "p.a"),
                        "q.5.a");
    /* partition(n) alone hashes the whole subject: "p.a" is 0x66d39036
     * (1725141046), mod 10 is 6. */
    assert_string_equal(xform("p.*", "q.{{partition(10)}}", "p.a"), "q.6");
    /* Always the same bucket for the same tokens, below n. */
    for (int i = 0; i < 50; i++) {
        char s[32];
        snprintf(s, sizeof s, "p.k%d", i);
        const char *a = xform("p.*", "{{partition(3,1)}}", s);
        assert_int_equal(strlen(a), 1);
        assert_true(a[0] >= '0' && a[0] <= '2');
        char first = a[0];
        assert_int_equal(xform("p.*", "{{partition(3,1)}}", s)[0], first);
    }
    assert_string_equal(xform("p", "{{partition(0)}}", "p"), "0");
}

static void bad_destinations_are_refused_with_nats_server_texts(void **state)
{
    (void)state;
    char err[KEEL_ERRMSG_MAX];
    const struct {
        const char *src, *dest, *why;
    } bad[] = {
        {"a.*", "b.$2",
         "invalid mapping destination: wildcard index out "
         "of range in $2"},
        {"a.*", "b.{{wildcard(0)}}", "wildcard index out of range"},
        {"a", "b.$1", "wildcard index out of range in $1"},
        {"a.*", "b.{{wildcard()}}", "not enough arguments"},
        {"a.*", "b.{{wildcard(1,2)}}", "too many arguments"},
        {"a.*", "b.{{wildcard(x)}}", "invalid or in the wrong format"},
        {"a.*", "b.{{nosuch(1)}}", "unknown function in {{nosuch(1)}}"},
        {"a.*", "b.{{split(1,-)}}",
         "function split is not supported by "
         "keeld"},
        {"a.*", "b.{{random(5)}}", "function random is not supported"},
        {"a.*", "b.*", "invalid subject"},
        {"a.>", "b", "invalid subject"},
        {"a", "b.>", "invalid subject"},
        {"a.>", "b.>.c", "invalid subject"},
        {"a..b", "c", "invalid subject"},
        {"a", "b..c", "invalid subject"},
        {"a", "", "invalid subject"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(
            srv_js_xform_compile(bad[i].src, bad[i].dest, &xf, err),
            KEEL_EINVAL);
        if (strstr(err, bad[i].why) == NULL) {
            fail_msg("%s -> %s: %s", bad[i].src, bad[i].dest, err);
        }
    }
}

static void a_result_that_does_not_fit_is_refused(void **state)
{
    (void)state;
    char err[KEEL_ERRMSG_MAX];
    char out[8];
    size_t n = 0;
    assert_int_equal(srv_js_xform_compile("a.*", "long.$1.$1", &xf, err), 0);
    assert_int_equal(srv_js_xform_apply(&xf, "a.xyz", 5, out, sizeof out, &n),
                     KEEL_ELIMIT);
    assert_string_equal(out, "");
    char dp[SRV_JS_SUBJECT_BYTES_MAX + 1];
    assert_int_equal(
        srv_js_xform_compile("a.*.>", "x.{{partition(3,1)}}.$1.>", &xf, err),
        0);
    srv_js_xform_dest_pattern(&xf, dp);
    assert_string_equal(dp, "x.*.*.>");
}

/* ---- the config fields ---- */

static int parse(const char *text, struct srv_stream_config *c,
                 enum srv_js_err *jerr, char *err)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    int rv = srv_stream_config_parse(j, c, jerr, err);
    json_decref(j);
    return rv;
}

static void republish_is_checked_and_echoed_as_nats_server(void **state)
{
    (void)state;
    struct srv_stream_config c;
    enum srv_js_err jerr;
    char err[KEEL_ERRMSG_MAX];
    const struct {
        const char *body, *why;
    } bad[] = {
        {"{\"name\":\"S\",\"subjects\":[\"o.>\"],\"republish\":{\"src\":"
         "\"p.>\",\"dest\":\"r.>\"}}",
         "stream configuration for republish source is not valid subset of "
         "subjects"},
        {"{\"name\":\"S\",\"subjects\":[\"o.>\"],\"republish\":{\"dest\":"
         "\"o.x\"}}",
         "stream configuration for republish destination forms a cycle"},
        {"{\"name\":\"S\",\"subjects\":[\"o.*\"],\"republish\":{\"src\":"
         "\"o.*\",\"dest\":\"r.$2\"}}",
         "stream configuration for republish not valid"},
        {"{\"name\":\"S\",\"subjects\":[\"o.*\"],\"republish\":{\"src\":"
         "\"o.*\"}}",
         "stream configuration for republish not valid"},
        {"{\"name\":\"S\",\"subjects\":[\"o.*\"],\"republish\":[]}",
         "republish must be an object"},
        {"{\"name\":\"S\",\"subjects\":[\"o.*\"],\"republish\":{\"dest\":"
         "\"r\",\"headers_only\":1}}",
         "republish headers_only must be a boolean"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse(bad[i].body, &c, &jerr, err), KEEL_EINVAL);
        assert_int_equal(jerr, SRV_JS_ESTREAM_CONFIG);
        assert_string_equal(err, bad[i].why);
    }
    /* No src is '>': every subject, under r. */
    assert_int_equal(parse("{\"name\":\"S\",\"subjects\":[\"o.*\"],"
                           "\"republish\":{\"dest\":\"r.>\"}}",
                           &c, &jerr, err),
                     0);
    assert_string_equal(c.republish->src, ">");
    srv_stream_config_free(&c);
    assert_int_equal(parse("{\"name\":\"S\",\"subjects\":[\"o.*\"],"
                           "\"republish\":{\"src\":\"o.*\",\"dest\":\"r.$1\","
                           "\"headers_only\":true}}",
                           &c, &jerr, err),
                     0);
    assert_non_null(c.republish);
    assert_true(c.republish_headers_only);
    json_t *o = NULL;
    assert_int_equal(srv_stream_config_encode(&c, &o, err), 0);
    json_t *r = json_object_get(o, "republish");
    assert_string_equal(json_string_value(json_object_get(r, "src")), "o.*");
    assert_string_equal(json_string_value(json_object_get(r, "dest")), "r.$1");
    assert_true(json_is_true(json_object_get(r, "headers_only")));
    assert_null(json_object_get(o, "subject_transform"));
    /* Its encoding parses to an equal config (the meta log's copy). */
    struct srv_stream_config back;
    assert_int_equal(srv_stream_config_parse(o, &back, &jerr, err), 0);
    assert_true(srv_stream_config_equal(&c, &back));
    srv_stream_config_free(&back);
    json_decref(o);
    srv_stream_config_free(&c);
}

static void subject_transform_errors_are_10155_and_10156(void **state)
{
    (void)state;
    struct srv_stream_config c;
    enum srv_js_err jerr;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(parse("{\"name\":\"S\",\"subjects\":[\"o.*\"],"
                           "\"subject_transform\":{\"src\":\"o..x\","
                           "\"dest\":\"t\"}}",
                           &c, &jerr, err),
                     KEEL_EINVAL);
    assert_int_equal(jerr, SRV_JS_ETRANSFORM_SOURCE);
    assert_string_equal(err, "invalid subject o..x");
    assert_int_equal(parse("{\"name\":\"S\",\"subjects\":[\"o.*\"],"
                           "\"subject_transform\":{\"src\":\"o.*\","
                           "\"dest\":\"t.$3\"}}",
                           &c, &jerr, err),
                     KEEL_EINVAL);
    assert_int_equal(jerr, SRV_JS_ETRANSFORM_DEST);
    assert_string_equal(err, "invalid mapping destination: wildcard index "
                             "out of range in $3");
    assert_int_equal(parse("{\"name\":\"S\",\"subjects\":[\"o.*\"],"
                           "\"subject_transform\":{\"src\":\"o.*\"}}",
                           &c, &jerr, err),
                     KEEL_EINVAL);
    assert_int_equal(jerr, SRV_JS_ETRANSFORM_DEST);
    assert_int_equal(parse("{\"name\":\"S\",\"subjects\":[\"o.*\"],"
                           "\"subject_transform\":{\"src\":\"o.*\","
                           "\"dest\":\"t.{{wildcard(1)}}\"}}",
                           &c, &jerr, err),
                     0);
    json_t *o = NULL;
    assert_int_equal(srv_stream_config_encode(&c, &o, err), 0);
    json_t *t = json_object_get(o, "subject_transform");
    assert_string_equal(json_string_value(json_object_get(t, "src")), "o.*");
    assert_string_equal(json_string_value(json_object_get(t, "dest")),
                        "t.{{wildcard(1)}}");
    json_decref(o);
    srv_stream_config_free(&c);
}

/* A mirror's and each source's subject_transforms, nats-server 2.10's
 * rules and codes. */
static void feed_transforms_parse_encode_and_compare(void **state)
{
    (void)state;
    struct srv_stream_config c, d;
    enum srv_js_err jerr;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(
        parse("{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\","
              "\"subject_transforms\":[{\"src\":\"a.*\",\"dest\":\"x.$1\"},"
              "{\"src\":\"b.>\"}]},{\"name\":\"B\"}]}",
              &c, &jerr, err),
        0);
    assert_int_equal(c.sources[0].nxf, 2);
    assert_non_null(c.sources[0].xf[0].x);
    assert_null(c.sources[0].xf[1].x); /* no dest: a filter only */
    assert_int_equal(c.sources[1].nxf, 0);
    const char *fl[SRV_JS_FEED_XFORMS_MAX];
    assert_int_equal(srv_stream_mirror_filters(&c.sources[0], fl), 2);
    assert_string_equal(fl[0], "a.*");
    assert_string_equal(fl[1], "b.>");
    assert_int_equal(srv_stream_mirror_filters(&c.sources[1], fl), 0);
    json_t *o = NULL;
    assert_int_equal(srv_stream_config_encode(&c, &o, err), 0);
    const json_t *t = json_object_get(
        json_array_get(json_object_get(o, "sources"), 0), "subject_transforms");
    assert_int_equal(json_array_size(t), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(t, 0), "dest")),
        "x.$1");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(t, 1), "dest")), "");
    assert_int_equal(srv_stream_config_parse(o, &d, &jerr, err), 0);
    assert_true(srv_stream_config_equal(&c, &d));
    srv_stream_config_free(&d);
    json_decref(o);
    srv_stream_config_free(&c);
    /* A mirror's; another transform is another mirror (an update may not
     * change it, 10055), and "" as a src reads every subject. */
    assert_int_equal(parse("{\"name\":\"M\",\"mirror\":{\"name\":\"O\","
                           "\"subject_transforms\":[{\"src\":\"\","
                           "\"dest\":\"m.>\"}]}}",
                           &c, &jerr, err),
                     0);
    assert_int_equal(parse("{\"name\":\"M\",\"mirror\":{\"name\":\"O\","
                           "\"subject_transforms\":[{\"src\":\">\","
                           "\"dest\":\"n.>\"}]}}",
                           &d, &jerr, err),
                     0);
    assert_int_equal(srv_stream_mirror_filters(&c.mirror, fl), 0);
    assert_false(srv_stream_mirror_equal(&c, &d));
    assert_true(srv_stream_mirror_equal(&c, &c));
    srv_stream_config_free(&d);
    srv_stream_config_free(&c);
}

static void the_first_matching_transform_names_the_stored_subject(void **state)
{
    (void)state;
    struct srv_stream_config c;
    enum srv_js_err jerr;
    char err[KEEL_ERRMSG_MAX];
    char out[SRV_JS_SUBJECT_BYTES_MAX + 1];
    size_t n = 0;
    /* a.* and *.b overlap (neither a subset): a source may have both. */
    assert_int_equal(parse("{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\","
                           "\"subject_transforms\":[{\"src\":\"a.*\"},"
                           "{\"src\":\"*.b\",\"dest\":\"to.$1\"},"
                           "{\"src\":\"c.>\",\"dest\":\"see.>\"}]}]}",
                           &c, &jerr, err),
                     0);
    const struct srv_stream_mirror *mi = &c.sources[0];
    /* The filter-only a.* is looked past, as nats-server does. */
    assert_true(srv_stream_mirror_xform(mi, "a.b", 3, out, &n));
    assert_string_equal(out, "to.a");
    assert_int_equal(n, 4);
    assert_false(srv_stream_mirror_xform(mi, "a.c", 3, out, &n));
    assert_true(srv_stream_mirror_xform(mi, "c.d.e", 5, out, &n));
    assert_string_equal(out, "see.d.e");
    /* Not NUL terminated: the length bounds it. */
    assert_true(srv_stream_mirror_xform(mi, "c.xyz", 3, out, &n));
    assert_string_equal(out, "see.x");
    /* Too long once transformed: stored as it is. */
    char big[SRV_JS_SUBJECT_BYTES_MAX + 1];
    memset(big, 'q', sizeof big - 1);
    big[0] = 'c';
    big[1] = '.';
    big[sizeof big - 1] = '\0';
    assert_false(srv_stream_mirror_xform(mi, big, strlen(big), out, &n));
    srv_stream_config_free(&c);
}

static void feed_transform_errors_carry_nats_server_codes(void **state)
{
    (void)state;
    const struct {
        const char *body;
        enum srv_js_err jerr;
        const char *why;
    } bad[] = {
        {"{\"name\":\"M\",\"mirror\":{\"name\":\"O\",\"filter_subject\":"
         "\"a\",\"subject_transforms\":[{\"src\":\"b\",\"dest\":\"c\"}]}}",
         SRV_JS_EMIRROR_MULTI_FILTERS,
         "mirror with multiple subject transforms cannot also have a single "
         "subject filter"},
        {"{\"name\":\"M\",\"mirror\":{\"name\":\"O\",\"subject_transforms\":"
         "[{\"src\":\"a..b\",\"dest\":\"c\"}]}}",
         SRV_JS_EMIRROR_XFORM_SOURCE, "invalid subject a..b"},
        {"{\"name\":\"M\",\"mirror\":{\"name\":\"O\",\"subject_transforms\":"
         "[{\"src\":\"a.*\",\"dest\":\"c.$2\"}]}}",
         SRV_JS_EMIRROR_XFORM_DEST,
         "invalid mapping destination: wildcard index out of range in $2"},
        {"{\"name\":\"M\",\"mirror\":{\"name\":\"O\",\"subject_transforms\":"
         "[{\"src\":\"a.*\",\"dest\":\"x\"},{\"src\":\"*.b\",\"dest\":\"y\"}]"
         "}}",
         SRV_JS_EMIRROR_XFORM_OVERLAP,
         "mirror subject filters can not overlap"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"O\",\"filter_subject\":"
         "\"a\",\"subject_transforms\":[{\"src\":\"b\",\"dest\":\"c\"}]}]}",
         SRV_JS_ESOURCE_MULTI_FILTERS,
         "source with multiple subject transforms cannot also have a single "
         "subject filter"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"O\",\"subject_transforms\":"
         "[{\"src\":\"a b\",\"dest\":\"c\"}]}]}",
         SRV_JS_ESOURCE_XFORM_SOURCE, "invalid subject a b"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"O\",\"subject_transforms\":"
         "[{\"src\":\"a\",\"dest\":\"{{split(1)}}\"}]}]}",
         SRV_JS_ESOURCE_XFORM_DEST, "invalid mapping destination"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"O\",\"subject_transforms\":"
         "[{\"src\":\"a.*\",\"dest\":\"x\"},{\"src\":\"a.b\",\"dest\":\"y\"}]"
         "}]}",
         SRV_JS_ESOURCE_XFORM_OVERLAP, "source filters can not overlap"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"O\",\"subject_transforms\":"
         "{\"src\":\"a\"}}]}",
         SRV_JS_ESTREAM_CONFIG, "subject_transforms must be an array"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"O\",\"subject_transforms\":"
         "[\"a\"]}]}",
         SRV_JS_ESTREAM_CONFIG, "each subject transform must be an object"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"O\",\"subject_transforms\":"
         "[{\"src\":1}]}]}",
         SRV_JS_ESTREAM_CONFIG, "src"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct srv_stream_config c;
        enum srv_js_err jerr = SRV_JS_OK;
        char err[KEEL_ERRMSG_MAX];
        assert_int_equal(parse(bad[i].body, &c, &jerr, err), KEEL_EINVAL);
        if (jerr != bad[i].jerr || strstr(err, bad[i].why) == NULL) {
            fail_msg("case %zu: %d %s", i, (int)jerr, err);
        }
        srv_stream_config_free(&c);
    }
    /* More than SRV_JS_FEED_XFORMS_MAX. */
    json_t *a = json_array();
    for (int i = 0; i <= SRV_JS_FEED_XFORMS_MAX; i++) {
        char src[16];
        snprintf(src, sizeof src, "s%d", i);
        json_array_append_new(a,
                              json_pack("{s:s, s:s}", "src", src, "dest", "d"));
    }
    json_t *j = json_pack("{s:s, s:{s:s, s:o}}", "name", "M", "mirror", "name",
                          "O", "subject_transforms", a);
    struct srv_stream_config c;
    enum srv_js_err jerr = SRV_JS_OK;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(srv_stream_config_parse(j, &c, &jerr, err), KEEL_EINVAL);
    assert_int_equal(jerr, SRV_JS_ESTREAM_CONFIG);
    assert_non_null(strstr(err, "too many subject transforms"));
    srv_stream_config_free(&c);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wildcards_literals_and_the_tail_are_mapped),
        cmocka_unit_test(partition_hashes_fnv1a_of_the_tokens),
        cmocka_unit_test(bad_destinations_are_refused_with_nats_server_texts),
        cmocka_unit_test(a_result_that_does_not_fit_is_refused),
        cmocka_unit_test(republish_is_checked_and_echoed_as_nats_server),
        cmocka_unit_test(subject_transform_errors_are_10155_and_10156),
        cmocka_unit_test(feed_transforms_parse_encode_and_compare),
        cmocka_unit_test(the_first_matching_transform_names_the_stored_subject),
        cmocka_unit_test(feed_transform_errors_carry_nats_server_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
