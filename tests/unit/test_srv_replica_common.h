/* Fixture shared by the replica tests: a temp data directory, a store whose
 * wakeup drives a replica host, one group of one, and bounded loop waits
 * (uv_run ONCE until a condition; never sleeps). */
#ifndef KEEL_TEST_SRV_REPLICA_COMMON_H
#define KEEL_TEST_SRV_REPLICA_COMMON_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "meta.h"
#include "replica.h"

#define TR_APPLIED_MAX 4096
#define TR_LOOP_ROUNDS_MAX 200000

struct tr_applied {
    uint64_t index;
    uint64_t term;
    uint8_t type;
    uint64_t ctx;
    char payload[64];
    uint64_t store_persisted; /* store's persisted index at apply time */
    uint64_t hs_term;         /* durable hard-state term at apply time */
};

struct tr {
    char dir[256];
    uv_loop_t loop;
    struct replica_host *host;
    struct store *s;
    struct store_node_report node;
    struct replica *r;
    struct store_group_id gid;
    struct raft_config cfg;
    struct replica_options opt;
    uint32_t n_applied;
    struct tr_applied applied[TR_APPLIED_MAX];
};

static inline int tr_rm(const char *p, const struct stat *sb, int f,
                        struct FTW *w)
{
    (void)sb;
    (void)f;
    (void)w;
    return remove(p);
}

static inline uint64_t tr_hs_term(struct tr *t)
{
    uint64_t term = 0;
    uint8_t vote[STORE_VOTE_BYTES_MAX];
    size_t vlen = sizeof(vote);
    if (store_meta_hs_get(store_debug_meta(t->s), t->gid.b, &term, vote,
                          &vlen) != 0) {
        return 0;
    }
    return term;
}

static inline void tr_apply(struct replica *r, uint64_t index, uint64_t term,
                            uint8_t type, const void *payload, uint32_t len,
                            uint64_t ctx, void *arg)
{
    struct tr *t = arg;
    struct store_group_info gi;
    store_group_info(replica_store_group(r), &gi);
    if (t->n_applied >= TR_APPLIED_MAX) {
        return;
    }
    struct tr_applied *a = &t->applied[t->n_applied++];
    memset(a, 0, sizeof(*a));
    a->index = index;
    a->term = term;
    a->type = type;
    a->ctx = ctx;
    a->store_persisted = gi.persisted_index;
    a->hs_term = tr_hs_term(t);
    if (type == RAFT_ENTRY_NORMAL) {
        memcpy(a->payload, payload, len < 63 ? len : 63);
    }
}

static const struct replica_callbacks tr_cbs_tmpl = {.apply = tr_apply};

static inline int tr_store_open(struct tr *t)
{
    char err[KEEL_ERRMSG_MAX];
    struct store_config sc = {.data_dir = t->dir,
                              .wakeup_cb = replica_host_wakeup,
                              .wakeup_arg = t->host,
                              .no_prealloc = true,
                              .segment_bytes = 1024 * 1024};
    return store_open(&sc, &t->s, &t->node, err);
}

static inline int tr_replica_open(struct tr *t)
{
    char err[KEEL_ERRMSG_MAX];
    struct replica_callbacks cbs = tr_cbs_tmpl;
    cbs.arg = t;
    t->opt.incarnation = replica_incarnation_of(t->node.incarnation);
    t->cfg.n = 1;
    t->cfg.servers[0] = (struct raft_server){
        .node = 1, .incarnation = t->opt.incarnation, .role = RAFT_VOTER};
    t->opt.self = 1;
    t->opt.bootstrap = &t->cfg;
    t->opt.election_timeout_ms = 30;
    t->opt.heartbeat_ms = 10;
    int rv = replica_open(t->host, &t->gid, &t->opt, &cbs, &t->r, err);
    if (rv != 0) {
        fprintf(stderr, "replica_open: %s\n", err);
    }
    return rv;
}

/* Start host + store + replica in t->dir (which must exist). */
static inline int tr_start(struct tr *t)
{
    char err[KEEL_ERRMSG_MAX];
    uv_loop_init(&t->loop);
    if (replica_host_create(&t->loop, &t->host, err) != 0) {
        return -1;
    }
    if (tr_store_open(t) != 0) {
        return -1;
    }
    replica_host_attach(t->host, t->s);
    return tr_replica_open(t);
}

/* Stop everything; clean=false simulates a crash of the store. */
static inline void tr_stop(struct tr *t, bool clean)
{
    if (t->r != NULL) {
        replica_close(t->r);
        t->r = NULL;
    }
    if (t->s != NULL) {
        store_close(t->s, clean);
        t->s = NULL;
    }
    replica_host_destroy(t->host);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    uv_loop_close(&t->loop);
}

typedef bool (*tr_cond)(struct tr *t, uint64_t arg);

static inline bool tr_wait(struct tr *t, tr_cond c, uint64_t arg)
{
    for (int i = 0; i < TR_LOOP_ROUNDS_MAX; i++) {
        if (c(t, arg)) {
            return true;
        }
        uv_run(&t->loop, UV_RUN_ONCE);
    }
    return c(t, arg);
}

static inline bool tr_is_leader(struct tr *t, uint64_t arg)
{
    (void)arg;
    struct replica_info ri;
    replica_info(t->r, &ri);
    return ri.role == RAFT_LEADER && ri.applied >= ri.commit &&
           ri.commit == ri.last_index;
}

static inline bool tr_applied_ge(struct tr *t, uint64_t idx)
{
    return t->n_applied > 0 && t->applied[t->n_applied - 1].index >= idx;
}

#endif
