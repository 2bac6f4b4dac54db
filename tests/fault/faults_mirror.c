/* The mirror workload of keel-faults (docs/faults.md "Mirrors"): once every
 * fault is healed and the origin read back, wait (bounded) until the
 * mirror holds as many messages up to the same last seq, read it back in
 * full through the server and compare: every acked origin value at the
 * same seq of the mirror, and every seq of the mirror holding the origin's
 * value (no gap, no duplicate, no reorder, nothing extra).
 * docs/decisions/0032-mirrors-pull-into-the-log.md is what it checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "faults.h"

/* Time, not synchronisation: the pace of the bounded poll below. */
static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void f_peers_of(jsCtx *js, const char *stream, char *out, size_t len,
                char *leader, size_t llen)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    out[0] = '\0';
    leader[0] = '\0';
    if (js_GetStreamInfo(&si, js, stream, NULL, &jerr) != NATS_OK) {
        return;
    }
    const jsClusterInfo *ci = si->Cluster;
    if (ci != NULL && ci->Leader != NULL) {
        snprintf(leader, llen, "%s", ci->Leader);
        snprintf(out, len, "%s*", ci->Leader);
    }
    for (int i = 0; ci != NULL && i < ci->ReplicasLen; i++) {
        size_t used = strlen(out);
        snprintf(out + used, len - used, ",%s", ci->Replicas[i]->Name);
    }
    jsStreamInfo_Destroy(si);
}

/* Is name one of the comma-separated peers (a trailing * aside)? */
static bool among(const char *peers, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = peers; len > 0 && (p = strstr(p, name)) != NULL;
         p += len) {
        bool start = p == peers || p[-1] == ',';
        bool end = p[len] == '\0' || p[len] == ',' || p[len] == '*';
        if (start && end) {
            return true;
        }
    }
    return false;
}

int f_leader_node(struct f_run_ctx *c, const char *urls, const char *stream)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    char peers[80], leader[32];
    if (f_connect_js(urls, &nc, &js) != 0) {
        return -1;
    }
    f_peers_of(js, stream, peers, sizeof peers, leader, sizeof leader);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return f_node_of(c, leader[0] != '\0' ? leader : NULL);
}

/* Same last seq and message count in origin and mirror. */
static bool same_state(jsCtx *js)
{
    jsStreamInfo *o = NULL, *m = NULL;
    jsErrCode jerr = 0;
    bool same = js_GetStreamInfo(&o, js, F_STREAM, NULL, &jerr) == NATS_OK &&
                js_GetStreamInfo(&m, js, F_MIRROR, NULL, &jerr) == NATS_OK &&
                o->State.LastSeq == m->State.LastSeq &&
                o->State.Msgs == m->State.Msgs;
    jsStreamInfo_Destroy(o);
    jsStreamInfo_Destroy(m);
    return same;
}

void f_mirror_compare(const struct f_run_ctx *c, const struct f_view *origin,
                      const struct f_view *mv, struct f_mirror_result *mr)
{
    uint64_t n = origin->n > mv->n ? origin->n : mv->n;
    uint8_t *seen = calloc(F_SEQS_MAX + 1, 1);
    for (uint64_t s = 1; s < n; s++) {
        uint32_t o = s < origin->n ? origin->slot_at[s] : 0;
        uint32_t m = s < mv->n ? mv->slot_at[s] : 0;
        mr->mismatch += o != m;
        if (seen != NULL && m > 0 && m <= F_SEQS_MAX && seen[m]++ > 0) {
            mr->dup++;
        }
    }
    free(seen);
    for (uint32_t a = 0; a < F_SEQS_MAX; a++) {
        const struct f_attempt *t = &c->att[a];
        if (t->outcome == F_ACKED &&
            (t->seq >= mv->n || mv->slot_at[t->seq] != a + 1)) {
            mr->missing++;
        }
    }
    mr->alien = mv->alien;
    mr->read = mv->n > 0 ? mv->n - 1 : 0;
}

long long f_wait_js(jsCtx *js, bool (*done)(jsCtx *js), bool *reached)
{
    long long t0 = h_now_ms();
    while (!(*reached = done(js)) && h_now_ms() - t0 < F_CONVERGE_MS_MAX) {
        pause_ms(200); /* a pump catching up: poll, bounded */
    }
    return *reached ? h_now_ms() - t0 : -1;
}

int f_mirror_check(struct f_run_ctx *c, const char *urls,
                   const struct f_view *origin, struct f_mirror_result *mr)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    struct f_view mv = {0};
    memset(mr, 0, sizeof *mr);
    mr->catchup_ms = -1;
    if (f_connect_js(urls, &nc, &js) != 0) {
        return -1;
    }
    mr->catchup_ms = f_wait_js(js, same_state, &mr->caught_up);
    char op[80], mp[80], ol[32], ml[32];
    f_peers_of(js, F_STREAM, op, sizeof op, ol, sizeof ol);
    f_peers_of(js, F_MIRROR, mp, sizeof mp, ml, sizeof ml);
    mr->leader_off = ml[0] != '\0' && !among(op, ml);
    snprintf(mr->placement, sizeof mr->placement, "origin %s mirror %s", op,
             mp);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    int rv = f_read_named(c, urls, F_MIRROR, &mv);
    if (rv == 0) {
        f_mirror_compare(c, origin, &mv, mr);
    }
    f_view_free(&mv);
    mr->pass = rv == 0 && mr->caught_up && mr->missing == 0 &&
               mr->mismatch == 0 && mr->dup == 0 && mr->alien == 0;
    return rv;
}
