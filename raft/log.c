/* The core's view of the log: the term of every index as (first index, term)
 * runs, and the configuration entries. Payloads stay with the driver. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "keel/assert.h"
#include "keel/bytes.h"
#include "keel/error.h"

#define CONFIG_FORMAT_VERSION 1

raft_term raft_term_at(const struct raft *r, raft_index index)
{
    ASSERT(r->n_runs <= r->runs_cap);
    if (index == 0) {
        return 0;
    }
    if (index == r->snap_index) {
        return r->snap_term;
    }
    if (index < r->snap_index || index > r->last_index) {
        return 0;
    }
    ASSERT(r->n_runs > 0);
    /* Binary search for the last run whose first index is <= index. */
    uint32_t lo = 0;
    uint32_t hi = r->n_runs;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->runs[mid].first <= index) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    ASSERT(r->runs[lo].first <= index);
    return r->runs[lo].term;
}

raft_term raft__log_last_term(const struct raft *r)
{
    ASSERT(r->last_index >= r->snap_index);
    if (r->last_index == r->snap_index) {
        return r->snap_term;
    }
    ASSERT(r->n_runs > 0);
    return r->runs[r->n_runs - 1].term;
}

/* Largest index <= from whose term is <= term (fast backtracking, the
 * follower's and the leader's side alike). Never below the snapshot. */
raft_index raft__log_find_le_term(const struct raft *r, raft_index from,
                                  raft_term term)
{
    ASSERT(from <= r->last_index);
    ASSERT(r->n_runs <= RAFT_LOG_RUNS_MAX);
    if (from <= r->snap_index) {
        return from;
    }
    for (uint32_t i = r->n_runs; i > 0; i--) {
        const struct raft_log_run *run = &r->runs[i - 1];
        if (run->first > from) {
            continue;
        }
        if (run->term <= term) {
            return from;
        }
        from = run->first - 1;
    }
    return from < r->snap_index ? r->snap_index : from;
}

/* Room for one more configuration entry. A leader appends one only once
 * every earlier one in its log committed (rule 3 in
 * raft__change_membership), and log matching carries that to every log:
 * every configuration but the last is committed, so the last but one is
 * at or below the latest committed one, and those before it are what
 * raft__log_configs_committed drops once the commit index is known. A log
 * loaded at start-up (no commit index yet) or caught up from a leader may
 * hold more than RAFT_CONFIGS_MAX of them: the soak's meta group after 28
 * membership changes did, and refused to open (finding F22,
 * docs/faults.md). */
static bool log_configs_room(const struct raft *r)
{
    ASSERT(r->n_configs <= RAFT_CONFIGS_MAX);
    return r->n_configs < RAFT_CONFIGS_MAX ||
           !MUTATED(r, RAFT_MUT_CONFIG_EARLY); /* else the rule fails */
}

static void log_configs_make_room(struct raft *r)
{
    ASSERT(log_configs_room(r));
    if (r->n_configs == RAFT_CONFIGS_MAX) {
        uint32_t drop = r->n_configs - 2;
        memmove(&r->configs[0], &r->configs[drop], 2 * sizeof r->configs[0]);
        r->n_configs = 2;
    }
    ASSERT(r->n_configs < RAFT_CONFIGS_MAX);
}

static int runs_grow(struct raft *r)
{
    ASSERT(r->n_runs == r->runs_cap);
    if (r->runs_cap >= RAFT_LOG_RUNS_MAX) {
        return KEEL_ELIMIT;
    }
    uint32_t cap = r->runs_cap * 2;
    if (cap > RAFT_LOG_RUNS_MAX) {
        cap = RAFT_LOG_RUNS_MAX;
    }
    struct raft_log_run *runs = realloc(r->runs, cap * sizeof *runs);
    if (runs == NULL) {
        return KEEL_ENOMEM;
    }
    r->runs = runs;
    r->runs_cap = cap;
    ASSERT(r->n_runs < r->runs_cap);
    return 0;
}

/* Append the record at index == last + 1. Nothing changes on error. */
int raft__log_append(struct raft *r, raft_index index,
                     const struct raft_entry *e)
{
    struct raft_config c;
    int rv;

    ASSERT(index == r->last_index + 1);
    ASSERT(e->term > 0);
    if (e->type == RAFT_ENTRY_CONFIG) {
        if (!log_configs_room(r)) {
            return KEEL_ELIMIT;
        }
        rv = raft_config_decode(e->buf, e->len, &c);
        if (rv != 0) {
            return rv;
        }
    }
    if (r->n_runs == 0 || r->runs[r->n_runs - 1].term != e->term) {
        if (r->n_runs == r->runs_cap) {
            rv = runs_grow(r);
            if (rv != 0) {
                return rv;
            }
        }
        r->runs[r->n_runs].first = index;
        r->runs[r->n_runs].term = e->term;
        r->n_runs++;
    }
    r->last_index = index;
    if (e->type == RAFT_ENTRY_CONFIG) {
        log_configs_make_room(r);
        r->configs[r->n_configs].index = index;
        r->configs[r->n_configs].config = c;
        r->n_configs++;
        raft__progress_rebuild(r);
    }
    return 0;
}

/* Drop every record >= from. Membership rule 2: a truncated configuration
 * entry stops applying, the previous one applies again. */
void raft__log_truncate(struct raft *r, raft_index from)
{
    ASSERT(from > r->snap_index);
    ASSERT(from <= r->last_index);
    ASSERT(from > r->commit);
    while (r->n_runs > 0 && r->runs[r->n_runs - 1].first >= from) {
        r->n_runs--;
    }
    r->last_index = from - 1;
    if (r->persisted > from - 1) {
        r->persisted = from - 1;
    }
    if (r->leader_match > from - 1) {
        r->leader_match = from - 1;
    }
    if (r->faulty >= from) {
        /* Discard rule (a): the leader's different entry replaces the
         * damaged record and everything after it. */
        r->faulty = 0;
    }
    bool reverted = false;
    while (r->n_configs > 0 && r->configs[r->n_configs - 1].index >= from) {
        r->n_configs--;
        reverted = true;
    }
    if (reverted) {
        raft__progress_rebuild(r);
    }
}

/* Forget configurations older than the latest committed one. */
void raft__log_configs_committed(struct raft *r)
{
    uint32_t keep = 0;
    ASSERT(r->n_configs <= RAFT_CONFIGS_MAX);
    for (uint32_t i = 0; i < r->n_configs; i++) {
        if (r->configs[i].index <= r->commit) {
            keep = i;
        }
    }
    if (keep == 0) {
        return;
    }
    memmove(&r->configs[0], &r->configs[keep],
            (r->n_configs - keep) * sizeof r->configs[0]);
    r->n_configs -= keep;
    ASSERT(r->n_configs > 0);
}

/* Drop the terms of records <= index: a snapshot covers them. */
void raft__log_compact(struct raft *r, raft_index index, raft_term term)
{
    ASSERT(index <= r->last_index);
    ASSERT(raft_term_at(r, index) == term);
    if (index <= r->snap_index) {
        return;
    }
    if (r->faulty != 0 && r->faulty <= index) {
        /* Discard rule (b): a committed retention cut covers the damage
         * (the record was applied before it was damaged). */
        r->faulty = 0;
    }
    uint32_t drop = 0;
    while (drop + 1 < r->n_runs && r->runs[drop + 1].first <= index + 1) {
        drop++;
    }
    memmove(&r->runs[0], &r->runs[drop], (r->n_runs - drop) * sizeof *r->runs);
    r->n_runs -= drop;
    if (index == r->last_index) {
        r->n_runs = 0;
    } else {
        r->runs[0].first = index + 1;
    }
    while (r->n_configs > 0 && r->configs[0].index <= index) {
        r->snap_config = r->configs[0].config;
        r->snap_config_index = r->configs[0].index;
        memmove(&r->configs[0], &r->configs[1],
                (r->n_configs - 1) * sizeof r->configs[0]);
        r->n_configs--;
    }
    r->snap_index = index;
    r->snap_term = term;
}

const struct raft_config *raft_config_current(const struct raft *r)
{
    ASSERT(r->n_configs <= RAFT_CONFIGS_MAX);
    if (r->n_configs > 0) {
        return &r->configs[r->n_configs - 1].config;
    }
    return &r->snap_config;
}

raft_index raft_config_current_index(const struct raft *r)
{
    ASSERT(r->n_configs <= RAFT_CONFIGS_MAX);
    if (r->n_configs > 0) {
        return r->configs[r->n_configs - 1].index;
    }
    return r->snap_config_index;
}

const struct raft_server *raft_config_find(const struct raft_config *c,
                                           raft_node node)
{
    ASSERT(c->n <= RAFT_SERVERS_MAX);
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->servers[i].node == node) {
            return &c->servers[i];
        }
    }
    return NULL;
}

uint32_t raft_config_encode(const struct raft_config *c, uint8_t *buf,
                            uint32_t cap)
{
    ASSERT(c->n <= RAFT_SERVERS_MAX);
    ASSERT(cap >= 2 + 17 * c->n);
    buf[0] = CONFIG_FORMAT_VERSION;
    buf[1] = (uint8_t)c->n;
    for (uint32_t i = 0; i < c->n; i++) {
        uint8_t *p = buf + 2 + 17 * i;
        keel_put_le64(p, c->servers[i].node);
        keel_put_le64(p + 8, c->servers[i].incarnation);
        p[16] = c->servers[i].role;
    }
    return 2 + 17 * c->n;
}

int raft_config_decode(const void *buf, uint32_t len, struct raft_config *c)
{
    const uint8_t *b = buf;
    if (b == NULL || len < 2 || b[0] != CONFIG_FORMAT_VERSION) {
        return KEEL_ECORRUPT;
    }
    if (b[1] > RAFT_SERVERS_MAX || len != 2u + 17u * b[1]) {
        return KEEL_ECORRUPT;
    }
    memset(c, 0, sizeof *c);
    c->n = b[1];
    for (uint32_t i = 0; i < c->n; i++) {
        const uint8_t *p = b + 2 + 17 * i;
        struct raft_server *s = &c->servers[i];
        s->node = keel_get_le64(p);
        s->incarnation = keel_get_le64(p + 8);
        s->role = p[16];
        if (s->node == 0 ||
            (s->role != RAFT_VOTER && s->role != RAFT_LEARNER)) {
            return KEEL_ECORRUPT;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (c->servers[j].node == s->node) {
                return KEEL_ECORRUPT;
            }
        }
    }
    ASSERT(c->n <= RAFT_SERVERS_MAX);
    return 0;
}
