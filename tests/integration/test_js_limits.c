/* keeld started as nats-server users start it (-js, a jetstream { } block
 * with max_memory_store and max_file_store), through the real libnats
 * client: $JS.API.INFO and /jsz report the limits, a stream whose
 * max_bytes does not fit is refused with 10047 (file) or 10028 (memory),
 * and a publish once the streams hold more than the limit gets 10023, the
 * answers nats-server 2.9.10 gives for the same config. */
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

#include "harness.h"

#define WAIT_MS 10000
#define FILE_LIMIT 10240     /* max_file_store: "10K" */
#define MEMORY_LIMIT 1048576 /* max_memory_store: 1048576 */
#define BODY_BYTES 4000

struct fixture {
    struct h_keeld k;
    char conf[320];
    natsConnection *nc;
    jsCtx *js;
};

static int write_conf(struct fixture *f)
{
    snprintf(f->conf, sizeof f->conf, "%s/js.conf", f->k.dir);
    FILE *fp = fopen(f->conf, "w");
    if (fp == NULL) {
        return -1;
    }
    fprintf(fp,
            "jetstream {\n  max_file_store: \"10K\"\n"
            "  max_memory_store: %d\n}\n",
            MEMORY_LIMIT);
    return fclose(fp);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    jsOptions o;
    if (f == NULL || h_keeld_init(&f->k) != 0 || write_conf(f) != 0) {
        return -1;
    }
    const char *extra[] = {"-js", "-c", f->conf, NULL};
    jsOptions_Init(&o);
    o.Wait = WAIT_MS;
    if (h_keeld_start(&f->k, 0, true, extra) != 0 ||
        natsConnection_ConnectTo(&f->nc, f->k.url) != NATS_OK ||
        natsConnection_JetStream(&f->js, f->nc, &o) != NATS_OK) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    jsCtx_Destroy(f->js);
    natsConnection_Destroy(f->nc);
    int rv = h_keeld_stop(&f->k, NULL);
    h_keeld_cleanup(&f->k);
    free(f);
    return rv;
}

/* A raw API request; the parsed reply (caller decrefs). */
static json_t *api(struct fixture *f, const char *subj, const char *body)
{
    natsMsg *m = NULL;
    assert_int_equal(natsConnection_RequestString(
                         &m, f->nc, subj, body != NULL ? body : "", WAIT_MS),
                     NATS_OK);
    json_t *r = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    assert_non_null(r);
    return r;
}

static json_int_t err_code(json_t *r)
{
    return json_integer_value(
        json_object_get(json_object_get(r, "error"), "err_code"));
}

static json_int_t path_int(json_t *r, const char *obj, const char *key)
{
    json_t *o = obj != NULL ? json_object_get(r, obj) : r;
    assert_non_null(json_object_get(o, key));
    return json_integer_value(json_object_get(o, key));
}

static void create_code(struct fixture *f, const char *name,
                        const char *extra_fields, json_int_t want)
{
    char subj[128], body[512];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.%s", name);
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"subjects\":[\"%s\"]%s}",
             name, name, extra_fields);
    json_t *r = api(f, subj, body);
    assert_int_equal(err_code(r), want);
    json_decref(r);
}

static void info_and_jsz_report_the_limits(void **state)
{
    struct fixture *f = *state;
    char body[16384];
    json_t *r = api(f, "$JS.API.INFO", NULL);
    assert_int_equal(path_int(r, "limits", "max_storage"), FILE_LIMIT);
    assert_int_equal(path_int(r, "limits", "max_memory"), MEMORY_LIMIT);
    json_decref(r);
    assert_int_equal(h_http_get(f->k.http_port, "/jsz", body, sizeof body),
                     200);
    r = json_loads(body, 0, NULL);
    assert_non_null(r);
    assert_int_equal(path_int(r, "config", "max_storage"), FILE_LIMIT);
    assert_int_equal(path_int(r, "config", "max_memory"), MEMORY_LIMIT);
    json_decref(r);
}

static void a_stream_whose_max_bytes_does_not_fit_is_refused(void **state)
{
    struct fixture *f = *state;
    create_code(f, "BIG", ",\"max_bytes\":20000", 10047);
    create_code(f, "HALF", ",\"max_bytes\":6000", 0);
    /* 6000 reserved: 5000 more does not fit in 10240, 4000 does. */
    create_code(f, "MORE", ",\"max_bytes\":5000", 10047);
    create_code(f, "FITS", ",\"max_bytes\":4000", 0);
    create_code(f, "MEM", ",\"storage\":\"memory\",\"max_bytes\":2000000",
                10028);
    create_code(f, "MEMOK", ",\"storage\":\"memory\",\"max_bytes\":1000", 0);
    json_t *r = api(f, "$JS.API.INFO", NULL);
    assert_int_equal(path_int(r, NULL, "reserved_storage"), 10000);
    assert_int_equal(path_int(r, NULL, "reserved_memory"), 1000);
    json_decref(r);
    /* An update is checked too, against the others' reservations. */
    r = api(f, "$JS.API.STREAM.UPDATE.HALF",
            "{\"name\":\"HALF\",\"subjects\":[\"HALF\"],\"max_bytes\":7000}");
    assert_int_equal(err_code(r), 10047);
    json_decref(r);
}

static void
a_publish_past_max_file_store_gets_insufficient_resources(void **state)
{
    struct fixture *f = *state;
    static char data[BODY_BYTES];
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    memset(data, 'x', sizeof data);
    create_code(f, "B", "", 0);
    /* Stored while the streams hold at most the limit: 3 x ~4 KB. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(
            js_Publish(&pa, f->js, "B", data, sizeof data, NULL, &jerr),
            NATS_OK);
        assert_int_equal(pa->Sequence, (uint64_t)i + 1);
        jsPubAck_Destroy(pa);
        pa = NULL;
    }
    assert_int_not_equal(
        js_Publish(&pa, f->js, "B", data, sizeof data, NULL, &jerr), NATS_OK);
    assert_int_equal(jerr, JSInsufficientResourcesErr);
    assert_null(pa);
    json_t *r = api(f, "$JS.API.STREAM.INFO.B", NULL);
    assert_int_equal(path_int(json_object_get(r, "state"), NULL, "messages"),
                     3);
    json_decref(r);
    /* Purging makes room again. */
    r = api(f, "$JS.API.STREAM.PURGE.B", NULL);
    json_decref(r);
    assert_int_equal(
        js_Publish(&pa, f->js, "B", data, sizeof data, NULL, &jerr), NATS_OK);
    assert_int_equal(pa->Sequence, 4);
    jsPubAck_Destroy(pa);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(info_and_jsz_report_the_limits),
        T(a_stream_whose_max_bytes_does_not_fit_is_refused),
        T(a_publish_past_max_file_store_gets_insufficient_resources),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
