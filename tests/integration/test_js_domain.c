/* jetstream { domain } through a real keeld with libnats
 * (docs/jetstream-config.md "Domain"): a JetStream context with
 * jsOpts.Domain reaches the API under $JS.<domain>.API, its PubAck and
 * stream info name the domain, and /varz shows it as nats-server 2.9.10
 * does; $JS.API stays answered and another domain reaches nobody. */
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
#include "kv_common.h"

#define WAIT_MS 5000

/* The config file (nats-server has no flag for the domain), written by
 * main before the fixture starts keeld with it. */
static char conf[64];
static const char *const extra[] = {"-c", conf, "-m", "0", NULL};

static int setup(void **state)
{
    return kv_js1_setup(state, extra, WAIT_MS);
}

static void a_domain_context_creates_publishes_and_reads(void **state)
{
    struct kv_js1 *f = *state;
    jsCtx *js = NULL;
    jsOptions jo;
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"d.>"};

    assert_int_equal(jsOptions_Init(&jo), NATS_OK);
    jo.Domain = "HUB";
    jo.Wait = WAIT_MS;
    assert_int_equal(natsConnection_JetStream(&js, f->nc, &jo), NATS_OK);

    jsStreamConfig_Init(&cfg);
    cfg.Name = "D";
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, js, &cfg, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(js_Publish(&pa, js, "d.x", "m", 1, NULL, &jerr),
                         NATS_OK);
        assert_int_equal(pa->Sequence, (uint64_t)i + 1);
        assert_non_null(pa->Domain);
        assert_string_equal(pa->Domain, "HUB");
        jsPubAck_Destroy(pa);
    }
    assert_int_equal(js_GetStreamInfo(&si, js, "D", NULL, &jerr), NATS_OK);
    assert_int_equal(si->State.Msgs, 3);
    jsStreamInfo_Destroy(si);

    /* $JS.API answers too and names the domain; another domain nobody. */
    json_t *o = kv_api_json(f->nc, "$JS.API.STREAM.INFO.D", "", WAIT_MS);
    assert_string_equal(json_string_value(json_object_get(o, "domain")), "HUB");
    json_decref(o);
    natsMsg *reply = NULL;
    assert_int_equal(natsConnection_RequestString(
                         &reply, f->nc, "$JS.OTHER.API.INFO", "", WAIT_MS),
                     NATS_NO_RESPONDERS);

    struct h_varz_wait w = {.port = f->k.http_port,
                            .want = "\"domain\": \"HUB\""};
    assert_true(h_poll(h_varz_has, &w, WAIT_MS));
    jsCtx_Destroy(js);
}

struct want {
    struct kv_js1 *f;
    const char *stream;
    long long n;
};

static bool holds(void *arg)
{
    struct want *w = arg;
    json_t *o = kv_js1_info(w->f, w->stream);
    bool ok = kv_js1_state(o, "messages") == w->n &&
              kv_js1_state(o, "last_seq") == w->n;
    json_decref(o);
    return ok;
}

static void wait_holds(struct kv_js1 *f, const char *stream, long long n)
{
    struct want w = {f, stream, n};
    if (!h_poll(holds, &w, 3 * WAIT_MS)) {
        json_t *o = kv_js1_info(f, stream);
        char *s = json_dumps(o, 0);
        fail_msg("%s never held %lld messages: %s", stream, n, s);
    }
}

/* Message seq of stream: its data, and the origin seq its
 * Nats-Stream-Source header names (0: none). */
static void get(struct kv_js1 *f, const char *stream, long long seq, char *data,
                size_t cap, long long *src)
{
    jsErrCode jerr = 0;
    natsMsg *m = NULL;
    const char *v = NULL;
    assert_int_equal(js_GetMsg(&m, f->js, stream, (uint64_t)seq, NULL, &jerr),
                     NATS_OK);
    snprintf(data, cap, "%.*s", natsMsg_GetDataLength(m), natsMsg_GetData(m));
    *src = 0;
    if (natsMsgHeader_Get(m, "Nats-Stream-Source", &v) == NATS_OK) {
        const char *sp = strrchr(v, ' ');
        *src = sp != NULL ? atoll(sp + 1) : 0;
    }
    natsMsg_Destroy(m);
}

#define ORIGIN_MSGS 300

/* A mirror and a source of an origin reached through $JS.HUB.API (the
 * node's own domain, through the API as nats-server does it): with keeld
 * restarted half way (a new leader term: the consumer is created again
 * from the applied position + 1), each holds every origin message once,
 * in order, no gap: the mirror at the origin's seqs, the source at its
 * own with the origin seq in Nats-Stream-Source. */
static void external_origins_are_copied_exactly_once(void **state)
{
    struct kv_js1 *f = *state;
    char subj[32], data[32], want[32];
    long long src = 0;

    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    for (int i = 1; i <= ORIGIN_MSGS / 2; i++) {
        snprintf(subj, sizeof subj, "o.%d", i % 7);
        snprintf(data, sizeof data, "m%d", i);
        assert_int_equal(kv_js1_publish(f, subj, data, NULL, NULL),
                         (uint64_t)i);
    }
    kv_js1_create(f, "M",
                  "{\"name\":\"M\",\"mirror\":{\"name\":\"O\","
                  "\"external\":{\"api\":\"$JS.HUB.API\"}}}");
    kv_js1_create(f, "S",
                  "{\"name\":\"S\",\"sources\":[{\"name\":\"O\","
                  "\"external\":{\"api\":\"$JS.HUB.API\","
                  "\"deliver\":\"dlv.s\"}}]}");
    kv_js1_restart(f);
    for (int i = ORIGIN_MSGS / 2 + 1; i <= ORIGIN_MSGS; i++) {
        snprintf(subj, sizeof subj, "o.%d", i % 7);
        snprintf(data, sizeof data, "m%d", i);
        assert_int_equal(kv_js1_publish(f, subj, data, NULL, NULL),
                         (uint64_t)i);
    }
    wait_holds(f, "M", ORIGIN_MSGS);
    wait_holds(f, "S", ORIGIN_MSGS);
    for (long long i = 1; i <= ORIGIN_MSGS; i++) {
        snprintf(want, sizeof want, "m%lld", i);
        get(f, "M", i, data, sizeof data, &src);
        assert_string_equal(data, want);
        get(f, "S", i, data, sizeof data, &src);
        assert_string_equal(data, want);
        assert_int_equal(src, i);
    }
    /* The config echoes external; the mirror's info shows it. */
    json_t *o = kv_js1_info(f, "M");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(o, "mirror"), "external"), "api")),
        "$JS.HUB.API");
    json_decref(o);
    /* nats-server's codes: $JS.API itself (10021), a wildcard deliver
     * prefix (10024). */
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.CREATE.X",
                       "{\"name\":\"X\",\"mirror\":{\"name\":\"O\","
                       "\"external\":{\"api\":\"$JS.API\"}}}"),
        10021);
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.CREATE.X",
                       "{\"name\":\"X\",\"mirror\":{\"name\":\"O\","
                       "\"external\":{\"api\":\"$JS.HUB.API\","
                       "\"deliver\":\"d.*\"}}}"),
        10024);
}

int main(void)
{
    char dir[] = "/tmp/keel-domain-XXXXXX";
    if (h_conf_write(dir, "domain.conf", "jetstream { domain: HUB }\n", conf,
                     sizeof conf) != 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_domain_context_creates_publishes_and_reads, setup,
            kv_js1_teardown),
        cmocka_unit_test_setup_teardown(
            external_origins_are_copied_exactly_once, setup, kv_js1_teardown),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    h_conf_remove(dir, conf);
    return rv;
}
