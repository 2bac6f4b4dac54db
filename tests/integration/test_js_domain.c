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

int main(void)
{
    char dir[] = "/tmp/keel-domain-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        return 1;
    }
    snprintf(conf, sizeof conf, "%s/domain.conf", dir);
    FILE *fp = fopen(conf, "w");
    if (fp == NULL || fputs("jetstream { domain: HUB }\n", fp) < 0 ||
        fclose(fp) != 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_domain_context_creates_publishes_and_reads, setup,
            kv_js1_teardown),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(conf);
    rmdir(dir);
    return rv;
}
