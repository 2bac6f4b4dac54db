/* Integration tests of the monitoring endpoints against a real keeld:
 * /healthz (200, warnings, 503 on a stream that cannot open), /connz
 * counts, /jsz against STREAM.INFO, /metrics parsed line by line, /varz's
 * jetstream block.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <jansson.h>
#include <nats/nats.h>

#include "harness.h"

#define BODY_BYTES 16384
#define POLL_MS 5000

struct fixture {
    struct h_keeld k;
    natsConnection *nc;
    char body[BODY_BYTES];
};

static int connect_named(struct fixture *f, const char *name,
                         natsConnection **nc)
{
    natsOptions *o = NULL;
    natsStatus s = natsOptions_Create(&o);
    if (s == NATS_OK) {
        s = natsOptions_SetURL(o, f->k.url);
    }
    if (s == NATS_OK) {
        s = natsOptions_SetName(o, name);
    }
    if (s == NATS_OK) {
        s = natsConnection_Connect(nc, o);
    }
    natsOptions_Destroy(o);
    return s == NATS_OK ? 0 : -1;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(h_keeld_init(&f->k), 0);
    assert_int_equal(h_keeld_start(&f->k, 0, true, NULL), 0);
    assert_int_equal(connect_named(f, "it-main", &f->nc), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    natsConnection_Destroy(f->nc);
    h_keeld_cleanup(&f->k);
    free(f);
    return 0;
}

static json_t *get_json(struct fixture *f, const char *path, int want_code)
{
    int code = h_http_get(f->k.http_port, path, f->body, sizeof f->body);
    assert_int_equal(code, want_code);
    json_t *o = json_loads(f->body, 0, NULL);
    assert_non_null(o);
    return o;
}

static json_t *js_api(struct fixture *f, const char *subject, const char *body)
{
    natsMsg *m = NULL;
    assert_int_equal(
        natsConnection_RequestString(&m, f->nc, subject, body, 5000), NATS_OK);
    json_t *o = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    assert_non_null(o);
    assert_null(json_object_get(o, "error"));
    return o;
}

static void make_stream(struct fixture *f, const char *name, int msgs)
{
    char subj[64];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.%s", name);
    json_decref(js_api(f, subj, "{\"subjects\":[\"m.>\"]}"));
    for (int i = 0; i < msgs; i++) {
        json_decref(js_api(f, "m.x", "payload-number-ABCDEFGHIJKLMNOP"));
    }
}

static void healthz_answers_ok_on_a_fresh_node(void **state)
{
    struct fixture *f = *state;
    json_t *o = get_json(f, "/healthz", 200);
    assert_string_equal(json_string_value(json_object_get(o, "status")), "ok");
    assert_null(json_object_get(o, "warnings"));
    json_decref(o);
}

static void healthz_warns_about_quarantined_orphans(void **state)
{
    struct fixture *f = *state;
    char path[512];
    snprintf(path, sizeof path, "%s/js/quarantine", f->k.data_dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/js/quarantine/orphans", f->k.data_dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/js/quarantine/orphans/1.snap",
             f->k.data_dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    json_t *o = get_json(f, "/healthz", 200);
    json_t *w = json_object_get(o, "warnings");
    assert_int_equal(json_array_size(w), 1);
    assert_non_null(strstr(json_string_value(json_array_get(w, 0)), "orphan"));
    json_decref(o);
}

static void healthz_is_503_when_a_stream_cannot_open(void **state)
{
    struct fixture *f = *state;
    make_stream(f, "BROKEN", 3);
    natsConnection_Destroy(f->nc);
    f->nc = NULL;
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    assert_int_equal(h_flip_segment_byte(f->k.data_dir, "payload-number"), 0);
    assert_int_equal(h_keeld_start(&f->k, 0, true, NULL), 0);
    json_t *o = get_json(f, "/healthz", 503);
    assert_string_equal(json_string_value(json_object_get(o, "status")),
                        "unavailable");
    const char *err = json_string_value(json_object_get(o, "error"));
    assert_non_null(err);
    assert_non_null(strstr(err, "BROKEN"));
    json_decref(o);
    /* ?js-server-only skips the JetStream checks. */
    json_decref(get_json(f, "/healthz?js-server-only=true", 200));
    h_http_get(f->k.http_port, "/metrics", f->body, sizeof f->body);
    assert_non_null(strstr(f->body, "keel_healthy 0\n"));
}

struct connz_want {
    struct fixture *f;
    int conns;
};

static bool connz_has(void *arg)
{
    struct connz_want *w = arg;
    struct fixture *f = w->f;
    if (h_http_get(f->k.http_port, "/connz", f->body, sizeof f->body) != 200) {
        return false;
    }
    json_t *o = json_loads(f->body, 0, NULL);
    bool ok = (int)json_integer_value(json_object_get(o, "num_connections")) ==
              w->conns;
    json_decref(o);
    return ok;
}

static void connz_lists_each_client_with_its_counters(void **state)
{
    struct fixture *f = *state;
    natsConnection *other = NULL;
    assert_int_equal(connect_named(f, "it-other", &other), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(natsConnection_PublishString(other, "x.y", "hey"),
                         NATS_OK);
    }
    assert_int_equal(natsConnection_Flush(other), NATS_OK);
    struct connz_want w = {f, 2};
    assert_true(h_poll(connz_has, &w, POLL_MS));
    json_t *o = get_json(f, "/connz", 200);
    json_t *list = json_object_get(o, "connections");
    bool seen = false;
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *c = json_array_get(list, i);
        if (strcmp(json_string_value(json_object_get(c, "name")), "it-other") ==
            0) {
            seen = true;
            assert_int_equal(json_integer_value(json_object_get(c, "in_msgs")),
                             3);
            assert_string_equal(json_string_value(json_object_get(c, "lang")),
                                "C");
            assert_string_equal(json_string_value(json_object_get(c, "ip")),
                                "127.0.0.1");
        }
    }
    assert_true(seen);
    json_decref(o);
    o = get_json(f, "/connz?limit=1", 200);
    assert_int_equal(json_array_size(json_object_get(o, "connections")), 1);
    json_decref(o);
    natsConnection_Destroy(other);
    w.conns = 1;
    assert_true(h_poll(connz_has, &w, POLL_MS));
}

static void jsz_matches_stream_info(void **state)
{
    struct fixture *f = *state;
    make_stream(f, "ORDERS", 10);
    json_t *info = js_api(f, "$JS.API.STREAM.INFO.ORDERS", "");
    json_t *st = json_object_get(info, "state");
    json_t *o = get_json(f, "/jsz?streams=true", 200);
    assert_int_equal(json_integer_value(json_object_get(o, "streams")), 1);
    assert_int_equal(json_integer_value(json_object_get(o, "messages")), 10);
    json_t *d = json_array_get(json_object_get(o, "stream_detail"), 0);
    json_t *ds = json_object_get(d, "state");
    assert_string_equal(json_string_value(json_object_get(d, "name")),
                        "ORDERS");
    const char *keys[] = {"messages", "bytes", "first_seq", "last_seq"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        assert_int_equal(json_integer_value(json_object_get(ds, keys[i])),
                         json_integer_value(json_object_get(st, keys[i])));
    }
    json_t *g = json_object_get(d, "group");
    assert_string_equal(json_string_value(json_object_get(g, "role")),
                        "leader");
    assert_true(json_integer_value(json_object_get(g, "applied")) >= 10);
    json_decref(o);
    json_decref(info);
    o = get_json(f, "/varz", 200);
    json_t *js = json_object_get(json_object_get(o, "jetstream"), "stats");
    assert_int_equal(json_integer_value(json_object_get(js, "messages")), 10);
    json_decref(o);
}

/* Value of the sample line starting with `prefix` ("name{...} "); HELP
 * and TYPE lines name the family too, so match at a line start. */
static double sample(const char *text, const char *prefix)
{
    char key[256];
    snprintf(key, sizeof key, "\n%s", prefix);
    const char *p = strstr(text, key);
    assert_non_null(p);
    return strtod(p + strlen(key), NULL);
}

static void metrics_parse_and_count_publishes(void **state)
{
    struct fixture *f = *state;
    make_stream(f, "M", 7);
    assert_int_equal(
        h_http_get(f->k.http_port, "/metrics", f->body, sizeof f->body), 200);
    /* Every line: a comment, or name[{labels}] value. */
    for (char *line = f->body; *line != '\0';) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        if (line[0] != '#') {
            char *sp = memchr(line, ' ', (size_t)(nl - line));
            assert_non_null(sp);
            assert_true(isalpha((unsigned char)line[0]));
            char *end = NULL;
            strtod(sp + 1, &end);
            assert_ptr_equal(end, nl);
        }
        line = nl + 1;
    }
    assert_int_equal((int)sample(f->body, "keel_js_messages "), 7);
    assert_true(sample(f->body, "keel_js_puback_latency_seconds_count ") >= 7);
    assert_true(sample(f->body, "keel_store_fdatasyncs_total ") >= 1);
    assert_int_equal((int)sample(f->body, "keel_raft_leader{group=\"M\"} "), 1);
    assert_int_equal((int)sample(f->body, "keel_healthy "), 1);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

struct log_want {
    const char *path;
    const char *text;
};

static bool log_has(void *arg)
{
    struct log_want *w = arg;
    return h_file_has(w->path, w->text);
}

static void sighup_rereads_log_level_from_the_config_file(void **state)
{
    struct fixture *f = *state;
    struct h_keeld k;
    char conf[300];
    natsConnection *nc = NULL;
    (void)f;
    assert_int_equal(h_keeld_init(&k), 0);
    snprintf(conf, sizeof conf, "%s/keeld.conf", k.dir);
    write_file(conf, "log_level: warn\n");
    const char *extra[] = {"-c", conf, NULL};
    assert_int_equal(h_keeld_start(&k, 0, false, extra), 0);
    struct log_want debug = {k.log_path, "DEBUG [conn]"};
    struct log_want hup = {k.log_path, "received SIGHUP"};
    assert_int_equal(natsConnection_ConnectTo(&nc, k.url), NATS_OK);
    natsConnection_Destroy(nc);
    assert_false(log_has(&hup));
    assert_false(log_has(&debug)); /* warn: no INFO, no DEBUG */
    write_file(conf, "log_level: debug\n");
    assert_int_equal(kill(k.pid, SIGHUP), 0);
    assert_true(h_poll(log_has, &hup, POLL_MS));
    assert_int_equal(natsConnection_ConnectTo(&nc, k.url), NATS_OK);
    natsConnection_Destroy(nc);
    assert_true(h_poll(log_has, &debug, POLL_MS));
    h_keeld_cleanup(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(healthz_answers_ok_on_a_fresh_node,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(healthz_warns_about_quarantined_orphans,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            healthz_is_503_when_a_stream_cannot_open, setup, teardown),
        cmocka_unit_test_setup_teardown(
            connz_lists_each_client_with_its_counters, setup, teardown),
        cmocka_unit_test_setup_teardown(jsz_matches_stream_info, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(metrics_parse_and_count_publishes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            sighup_rereads_log_level_from_the_config_file, setup, teardown),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
