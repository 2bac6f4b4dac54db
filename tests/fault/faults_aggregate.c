/* The aggregate workload of keel-faults (--aggregate, docs/faults.md
 * "Aggregate"): on top of the mirror workload, an R1 stream F_AGG that
 * sources both the origin and its mirror. Once healed and the mirror
 * caught up, it must hold every origin message exactly twice, once from
 * each source, each under its own Nats-Stream-Source, in origin order per
 * source: no gap, no duplicate, no reorder, nothing extra
 * (docs/decisions/0035-sources-share-the-mirror-pump.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"

/* The two sources of F_AGG, the mirror first: a stream is placed on its
 * first source's nodes when it can be. Its node is hit as one of the
 * origin's minority when it holds an origin replica, and on its own every
 * third event when it does not (faults_main.c). */
static const char *const agg_sources[F_AGG_SOURCES] = {F_MIRROR, F_STREAM};

int f_agg_create(struct f_run_ctx *c, const char *url)
{
    json_t *src = json_array();
    for (int i = 0; src != NULL && i < F_AGG_SOURCES; i++) {
        json_array_append_new(src, json_pack("{s:s}", "name", agg_sources[i]));
    }
    return f_create_named(c, url, F_AGG,
                          json_pack("{s:s, s:i, s:s, s:o}", "name", F_AGG,
                                    "num_replicas", 1, "storage", "file",
                                    "sources", src));
}

/* Does F_AGG hold as many messages as origin and mirror together? */
static bool caught_up(jsCtx *js)
{
    jsStreamInfo *si[F_AGG_SOURCES + 1] = {NULL};
    jsErrCode jerr = 0;
    uint64_t want = 0;
    bool ok = true;
    for (int i = 0; ok && i < F_AGG_SOURCES; i++) {
        ok = js_GetStreamInfo(&si[i], js, agg_sources[i], NULL, &jerr) ==
             NATS_OK;
        want += ok ? si[i]->State.Msgs : 0;
    }
    ok = ok && js_GetStreamInfo(&si[F_AGG_SOURCES], js, F_AGG, NULL, &jerr) ==
                   NATS_OK;
    ok = ok && si[F_AGG_SOURCES]->State.Msgs == want;
    for (int i = 0; i <= F_AGG_SOURCES; i++) {
        jsStreamInfo_Destroy(si[i]);
    }
    return ok;
}

/* "<name> <seq>" into the source's index and seq; false when it is not
 * one of F_AGG's. */
static bool parse_source(const char *h, int *src, uint64_t *seq)
{
    for (int i = 0; h != NULL && i < F_AGG_SOURCES; i++) {
        size_t n = strlen(agg_sources[i]);
        char *end = NULL;
        if (strncmp(h, agg_sources[i], n) == 0 && h[n] == ' ') {
            unsigned long long v = strtoull(h + n + 1, &end, 10);
            if (end != h + n + 1 && (*end == '\0' || *end == ' ') && v > 0 &&
                v < F_SEQS_MAX + 1024) {
                *src = i;
                *seq = v;
                return true;
            }
        }
    }
    return false;
}

void f_agg_count(const struct f_run_ctx *c, const struct f_view *origin,
                 const struct f_agg_msg *m, uint64_t n, struct f_agg_result *ar)
{
    uint8_t *seen[F_AGG_SOURCES];
    uint64_t last[F_AGG_SOURCES] = {0};
    for (int i = 0; i < F_AGG_SOURCES; i++) {
        seen[i] = calloc(F_SEQS_MAX + 1024, 1);
    }
    ar->read = n;
    for (uint64_t k = 0; k < n; k++) {
        const struct f_agg_msg *x = &m[k];
        if (x->src == F_AGG_UNREAD) {
            ar->bad++;
            continue;
        }
        if (x->src < 0 || x->slot == 0 || seen[x->src] == NULL) {
            ar->alien++;
            continue;
        }
        uint32_t want = x->oseq < origin->n ? origin->slot_at[x->oseq] : 0;
        ar->mismatch += x->slot != want;
        ar->reorder += x->oseq <= last[x->src];
        last[x->src] = x->oseq > last[x->src] ? x->oseq : last[x->src];
        ar->dup += seen[x->src][x->oseq]++ > 0;
    }
    for (uint32_t a = 0; a < F_SEQS_MAX; a++) {
        const struct f_attempt *t = &c->att[a];
        for (int i = 0; t->outcome == F_ACKED && i < F_AGG_SOURCES; i++) {
            ar->missing += seen[i] == NULL || t->seq >= F_SEQS_MAX + 1024 ||
                           seen[i][t->seq] == 0;
        }
    }
    for (int i = 0; i < F_AGG_SOURCES; i++) {
        free(seen[i]);
    }
}

/* Every message of F_AGG, in seq order, as its source, origin seq and
 * value slot (bounded by F_READ_MS_MAX). */
static int read_agg(jsCtx *js, struct f_agg_msg **out, uint64_t *n)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    *out = NULL;
    *n = 0;
    if (js_GetStreamInfo(&si, js, F_AGG, NULL, &jerr) != NATS_OK) {
        return -1;
    }
    uint64_t first = si->State.FirstSeq, last = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
    if (last >= first && last - first + 1 > 2 * (uint64_t)F_SEQS_MAX) {
        return -1;
    }
    uint64_t cap = last >= first && first > 0 ? last - first + 1 : 0;
    struct f_agg_msg *m = calloc(cap > 0 ? cap : 1, sizeof *m);
    if (m == NULL) {
        return -1;
    }
    long long t0 = h_now_ms();
    for (uint64_t seq = first; cap > 0 && seq <= last; seq++) {
        natsMsg *msg = NULL;
        const char *h = NULL;
        if (h_now_ms() - t0 > F_READ_MS_MAX) {
            free(m);
            return -1;
        }
        struct f_agg_msg *x = &m[(*n)++];
        if (js_GetMsg(&msg, js, F_AGG, seq, NULL, &jerr) != NATS_OK) {
            x->src = F_AGG_UNREAD; /* a gap: counted, the read goes on */
            continue;
        }
        if (natsMsgHeader_Get(msg, "Nats-Stream-Source", &h) != NATS_OK ||
            !parse_source(h, &x->src, &x->oseq)) {
            x->src = -1;
        }
        x->slot = f_slot_of(natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
        natsMsg_Destroy(msg);
    }
    *out = m;
    return 0;
}

int f_agg_check(struct f_run_ctx *c, const char *urls,
                const struct f_view *origin, struct f_agg_result *ar)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    struct f_agg_msg *m = NULL;
    uint64_t n = 0;
    memset(ar, 0, sizeof *ar);
    ar->catchup_ms = -1;
    if (f_connect_js(urls, &nc, &js) != 0) {
        return -1;
    }
    ar->catchup_ms = f_wait_js(js, caught_up, &ar->caught_up);
    int rv = read_agg(js, &m, &n);
    char leader[32];
    f_peers_of(js, F_AGG, ar->placement, sizeof ar->placement, leader,
               sizeof leader);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    if (rv == 0) {
        f_agg_count(c, origin, m, n, ar);
    }
    free(m);
    ar->pass = rv == 0 && ar->caught_up && ar->missing == 0 &&
               ar->mismatch == 0 && ar->dup == 0 && ar->reorder == 0 &&
               ar->alien == 0 && ar->bad == 0;
    return rv;
}
