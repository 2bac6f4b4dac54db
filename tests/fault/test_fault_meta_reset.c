/* A keeld without a cluster whose meta.lmdb is reset (suite 'fault';
 * docs/faults.md F3, docs/decisions/0025). A reset (rule 3, last part:
 * the file moves to quarantine/, a new incarnation starts) used to leave
 * every segment file uncatalogued, so they moved to quarantine/ too, the
 * meta group started empty and the stream's directory went to
 * quarantine/orphans: every acked message unserved, although each was on
 * disk (the meta nemesis, seed 5). A node of one holds the only copy of
 * its groups, so it catalogues its segment files again and keeps the
 * incarnation its logs name. This test resets meta.lmdb the way a
 * run-time LMDB assertion does (the meta.lmdb.assert marker) and asserts
 * that every acked message is served after the restart, that the stream
 * takes new publishes, and that /healthz says what was rebuilt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MR_MSGS 50

struct fx {
    struct h_keeld k;
    natsConnection *nc;
    jsCtx *js;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_int_equal(h_keeld_init(&f->k), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    jsCtx_Destroy(f->js);
    natsConnection_Destroy(f->nc);
    h_keeld_cleanup(&f->k);
    free(f);
    return 0;
}

static void connect_js(struct fx *f)
{
    jsCtx_Destroy(f->js);
    natsConnection_Destroy(f->nc);
    f->js = NULL;
    f->nc = NULL;
    assert_int_equal(natsConnection_ConnectTo(&f->nc, f->k.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&f->js, f->nc, NULL), NATS_OK);
}

static void publish(struct fx *f, int i, uint64_t want_seq)
{
    char v[32];
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    int n = snprintf(v, sizeof v, "mr-value-%04d", i);
    assert_int_equal(js_Publish(&pa, f->js, "mr.x", v, n, NULL, &jerr),
                     NATS_OK);
    assert_non_null(pa);
    assert_int_equal(pa->Sequence, want_seq);
    jsPubAck_Destroy(pa);
}

static void create_and_publish(struct fx *f)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subj[] = {"mr.>"};
    connect_js(f);
    jsStreamConfig_Init(&cfg);
    cfg.Name = "MR";
    cfg.Subjects = subj;
    cfg.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, f->js, &cfg, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    for (int i = 0; i < MR_MSGS; i++) {
        publish(f, i, (uint64_t)i + 1);
    }
}

/* What keeld's LMDB assertion hook leaves: the next start resets the file
 * (store/FORMAT.md). */
static void mark_meta_for_reset(struct fx *f)
{
    char path[600];
    snprintf(path, sizeof path, "%s/js/meta.lmdb.assert", f->k.data_dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "test: reset meta.lmdb at the next start\n");
    assert_int_equal(fclose(fp), 0);
}

static void served(struct fx *f, int i)
{
    char want[32];
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    int n = snprintf(want, sizeof want, "mr-value-%04d", i);
    assert_int_equal(js_GetMsg(&m, f->js, "MR", (uint64_t)i + 1, NULL, &jerr),
                     NATS_OK);
    assert_int_equal(natsMsg_GetDataLength(m), n);
    assert_memory_equal(natsMsg_GetData(m), want, (size_t)n);
    natsMsg_Destroy(m);
}

static void
a_node_of_one_serves_every_acked_message_after_a_meta_reset(void **state)
{
    struct fx *f = *state;
    char body[8192];
    assert_int_equal(h_keeld_start(&f->k, 0, true, NULL), 0);
    create_and_publish(f);
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    mark_meta_for_reset(f);
    assert_int_equal(h_keeld_start(&f->k, 0, true, NULL), 0);
    assert_true(h_file_has(f->k.log_path, "store metadata was reset"));
    connect_js(f);
    for (int i = 0; i < MR_MSGS; i++) {
        served(f, i);
    }
    publish(f, MR_MSGS, MR_MSGS + 1); /* it still leads and takes writes */
    assert_true(h_http_get(f->k.http_port, "/healthz", body, sizeof body) >= 0);
    assert_non_null(strstr(body, "rebuilt"));
    assert_true(h_file_has(f->k.log_path, "stream MR: catalogue rebuilt"));
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_node_of_one_serves_every_acked_message_after_a_meta_reset, setup,
            teardown),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
