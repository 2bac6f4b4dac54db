/* kill -9 crash safety of JetStream publishes (suite 'integration'): two
 * connections publish asynchronously with acks into one stream; after a
 * random number of acks keeld is SIGKILLed mid-traffic and restarted on the
 * same data directory. Every acked publish must be readable at its acked
 * sequence with its payload, and no sequence may be acked twice for two
 * different payloads (a reused seq). 20 rounds, printed seed (KEEL_SEED=<n>
 * repeats a run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nats/nats.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define CR_ROUNDS 20
#define CR_PUBLISHERS 2
#define CR_ACKS_MAX 1500 /* kill after at most this many acks per round */
#define CR_SEQS_MAX (CR_ROUNDS * (CR_ACKS_MAX + 4096))
#define CR_ID_BYTES 24
#define WAIT_MS 10000

struct cr_state {
    pthread_mutex_t mu;
    char (*ids)[CR_ID_BYTES]; /* acked payload per seq ("" = none) */
    uint64_t acks_round;      /* acks seen this round */
    uint64_t *round_seqs;     /* seqs acked this round */
    uint64_t nround;
    int reused; /* a seq acked for two payloads */
};

static struct cr_state S;
static uint64_t verified; /* acked messages read back, all rounds */

struct cr_pub {
    natsConnection *nc;
    jsCtx *js;
    int round, who;
    volatile int stop;
    pthread_t th;
};

static void on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae,
                   void *closure)
{
    (void)js, (void)closure, (void)pae;
    if (pa != NULL && pa->Sequence > 0 && pa->Sequence < CR_SEQS_MAX) {
        const char *d = natsMsg_GetData(msg);
        int n = natsMsg_GetDataLength(msg);
        pthread_mutex_lock(&S.mu);
        char *slot = S.ids[pa->Sequence];
        if (slot[0] != '\0' &&
            ((int)strlen(slot) != n || memcmp(slot, d, (size_t)n) != 0)) {
            S.reused++;
        }
        if (slot[0] == '\0' && n < CR_ID_BYTES) {
            memcpy(slot, d, (size_t)n);
            slot[n] = '\0';
            S.round_seqs[S.nround++] = pa->Sequence;
        }
        S.acks_round++;
        pthread_mutex_unlock(&S.mu);
    }
    natsMsg_Destroy(msg);
}

static void *publisher(void *arg)
{
    struct cr_pub *p = arg;
    char id[CR_ID_BYTES];
    /* Bounded: stops on the flag, or after CR_ACKS_MAX * 4 sends. */
    for (uint64_t i = 0; !p->stop && i < CR_ACKS_MAX * 4; i++) {
        int n = snprintf(id, sizeof id, "r%d-p%d-%llu", p->round, p->who,
                         (unsigned long long)i);
        if (js_PublishAsync(p->js, "cr.x", id, n, NULL) != NATS_OK &&
            natsConnection_IsClosed(p->nc)) {
            break;
        }
    }
    return NULL;
}

static int pub_open(struct cr_pub *p, const char *url)
{
    natsOptions *o = NULL;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = WAIT_MS;
    jo.PublishAsync.AckHandler = on_ack;
    jo.PublishAsync.MaxPending = 256;
    jo.PublishAsync.StallWait = 50;
    if (natsOptions_Create(&o) != NATS_OK ||
        natsOptions_SetURL(o, url) != NATS_OK ||
        natsOptions_SetAllowReconnect(o, false) != NATS_OK ||
        natsConnection_Connect(&p->nc, o) != NATS_OK ||
        natsConnection_JetStream(&p->js, p->nc, &jo) != NATS_OK) {
        natsOptions_Destroy(o);
        return -1;
    }
    natsOptions_Destroy(o);
    return 0;
}

static void pub_close(struct cr_pub *p)
{
    jsCtx_Destroy(p->js);
    natsConnection_Destroy(p->nc);
    p->js = NULL;
    p->nc = NULL;
}

struct ack_wait {
    uint64_t target;
};

static bool acked_enough(void *arg)
{
    struct ack_wait *w = arg;
    pthread_mutex_lock(&S.mu);
    bool ok = S.acks_round >= w->target;
    pthread_mutex_unlock(&S.mu);
    return ok;
}

static bool stream_visible(void *arg)
{
    struct cr_pub *p = arg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    if (js_GetStreamInfo(&si, p->js, "CR", NULL, &jerr) != NATS_OK) {
        return false;
    }
    jsStreamInfo_Destroy(si);
    return true;
}

/* Every seq acked this round reads back with its payload. */
static void verify_round(struct cr_pub *p)
{
    for (uint64_t i = 0; i < S.nround; i++) {
        uint64_t seq = S.round_seqs[i];
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        if (js_GetMsg(&m, p->js, "CR", seq, NULL, &jerr) != NATS_OK) {
            fail_msg("acked seq %llu (%s) lost (err %d)",
                     (unsigned long long)seq, S.ids[seq], (int)jerr);
        }
        const char *want = S.ids[seq];
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(want));
        assert_memory_equal(natsMsg_GetData(m), want, strlen(want));
        natsMsg_Destroy(m);
        verified++;
    }
}

static void kill_mid_traffic(struct h_keeld *k, int round, uint64_t target)
{
    struct cr_pub pubs[CR_PUBLISHERS];
    memset(pubs, 0, sizeof pubs);
    for (int i = 0; i < CR_PUBLISHERS; i++) {
        pubs[i].round = round;
        pubs[i].who = i;
        assert_int_equal(pub_open(&pubs[i], k->url), 0);
        assert_int_equal(pthread_create(&pubs[i].th, NULL, publisher, &pubs[i]),
                         0);
    }
    struct ack_wait w = {target};
    (void)h_poll(acked_enough, &w, WAIT_MS);
    int status = 0;
    assert_int_equal(kill(k->pid, SIGKILL), 0);
    assert_int_equal(h_wait_pid(k->pid, H_STOP_TIMEOUT_MS, &status), 0);
    k->pid = 0;
    for (int i = 0; i < CR_PUBLISHERS; i++) {
        pubs[i].stop = 1;
        pthread_join(pubs[i].th, NULL);
        pub_close(&pubs[i]);
    }
}

static void acked_publishes_survive_kill_9(void **state)
{
    (void)state;
    struct h_keeld k;
    const char *env = getenv("KEEL_SEED");
    unsigned seed =
        env != NULL ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("test_js_stream_crash: KEEL_SEED=%u\n", seed);
    srand(seed);
    pthread_mutex_init(&S.mu, NULL);
    S.ids = calloc(CR_SEQS_MAX, CR_ID_BYTES);
    S.round_seqs = calloc(CR_ACKS_MAX * 8, sizeof *S.round_seqs);
    assert_non_null(S.ids);
    assert_non_null(S.round_seqs);
    assert_int_equal(h_keeld_init(&k), 0);
    for (int round = 0; round <= CR_ROUNDS; round++) {
        struct cr_pub v;
        memset(&v, 0, sizeof v);
        assert_int_equal(h_keeld_start(&k, 0, false, NULL), 0);
        assert_int_equal(pub_open(&v, k.url), 0);
        if (round == 0) {
            jsStreamConfig cfg;
            jsStreamInfo *si = NULL;
            jsErrCode jerr = 0;
            const char *subj[] = {"cr.>"};
            jsStreamConfig_Init(&cfg);
            cfg.Name = "CR";
            cfg.Subjects = subj;
            cfg.SubjectsLen = 1;
            assert_int_equal(js_AddStream(&si, v.js, &cfg, NULL, &jerr),
                             NATS_OK);
            jsStreamInfo_Destroy(si);
        } else {
            /* After a crash: the stream and every acked message are back. */
            assert_true(h_poll(stream_visible, &v, WAIT_MS));
            verify_round(&v);
        }
        pub_close(&v);
        if (round == CR_ROUNDS) {
            break;
        }
        S.acks_round = 0;
        S.nround = 0;
        kill_mid_traffic(&k, round, 1 + (uint64_t)rand() % CR_ACKS_MAX);
        assert_int_equal(S.reused, 0);
    }
    printf("test_js_stream_crash: %llu acked publishes read back after %d "
           "kills\n",
           (unsigned long long)verified, CR_ROUNDS);
    assert_true(verified > 0);
    assert_int_equal(h_keeld_stop(&k, NULL), 0);
    h_keeld_cleanup(&k);
    free(S.ids);
    free(S.round_seqs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(acked_publishes_survive_kill_9),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
