/* The discard round (docs/design.md §4.7 R1, discard): a faulty node that hears
 * no leader proves its damaged record was never committed, or keeps it. Never
 * on a timeout alone: only answers given in a fresh term every answering voter
 * adopted durably count, so no leader of an older term can still commit at
 * that index once the round decides. */
#include <string.h>

#include "internal.h"
#include "keel/assert.h"
#include "keel/error.h"

#define ROUND_CONFIGS_MAX (RAFT_CONFIGS_MAX + 1)

/* The configurations a round about index `at` must convince (rule 1c): the
 * one in effect at that index (the latest entry at or below it, else the
 * snapshot's) and every later one in the log: a leader of any of them may
 * have committed `at`. Returns how many (>= 1). */
static uint32_t round_configs(const struct raft *r, raft_index at,
                              const struct raft_config **cfgs)
{
    uint32_t n = 0;
    uint32_t from = 0;
    bool snap = true;
    ASSERT(r->n_configs <= RAFT_CONFIGS_MAX);
    for (uint32_t k = 0; k < r->n_configs; k++) {
        if (r->configs[k].index <= at) {
            from = k;
            snap = false;
        }
    }
    if (snap && r->snap_config.n > 0) {
        cfgs[n++] = &r->snap_config;
    }
    for (uint32_t k = from; k < r->n_configs; k++) {
        cfgs[n++] = &r->configs[k].config;
    }
    if (n == 0) {
        cfgs[n++] = raft_config_current(r);
    }
    ASSERT(n <= ROUND_CONFIGS_MAX);
    return n;
}

static bool round_voter(const struct raft *r, raft_index at, raft_node node,
                        raft_incarnation inc)
{
    const struct raft_config *cfgs[ROUND_CONFIGS_MAX];
    uint32_t n = round_configs(r, at, cfgs);
    for (uint32_t k = 0; k < n; k++) {
        if (raft__config_is_voter(r, cfgs[k], node, inc)) {
            return true;
        }
    }
    return false;
}

/* Send `type` about the first faulty index to every other voter of the
 * round's configurations, once each. */
static void ask_voters(struct raft *r, uint8_t type, struct raft_out *out)
{
    const struct raft_config *cfgs[ROUND_CONFIGS_MAX];
    uint32_t n = round_configs(r, r->faulty, cfgs);
    ASSERT(r->faulty > r->snap_index);
    for (uint32_t k = 0; k < n; k++) {
        const struct raft_config *c = cfgs[k];
        ASSERT(c->n <= RAFT_SERVERS_MAX);
        const struct raft_server *s;
        for (uint32_t i = 0; (s = raft__config_next_peer(r, c, &i)) != NULL;) {
            bool asked = false;
            for (uint32_t j = 0; j < k && !asked; j++) {
                asked =
                    raft__config_is_voter(r, cfgs[j], s->node, s->incarnation);
            }
            if (asked) {
                continue;
            }
            struct raft_msg *m =
                raft__out_msg(out, type, r, s->node, s->incarnation);
            if (m != NULL) {
                m->discard.index = r->faulty;
            }
        }
    }
}

/* Start a round about the first faulty index: term := term + 1 (durable
 * before the requests go out: hs_dirty), then ask every other voter of the
 * configurations in effect at that index and after it. */
void raft__discard_start(struct raft *r, struct raft_out *out)
{
    ASSERT(r->faulty > r->snap_index);
    ASSERT(r->role != RAFT_LEADER);
    raft__become_follower(
        r, MUTATED(r, RAFT_MUT_DISCARD_UNFENCED) ? r->term : r->term + 1, 0,
        out);
    r->discard_index = r->faulty;
    r->discard_term = r->term;
    r->n_discard = 0;
    ask_voters(r, RAFT_MSG_DISCARD, out);
}

/* Leaderless repair: ask every other voter for the first faulty index. */
void raft__fetch_start(struct raft *r, struct raft_out *out)
{
    ASSERT(r->faulty > r->snap_index);
    ASSERT(r->role != RAFT_LEADER);
    ask_voters(r, RAFT_MSG_FETCH, out);
}

/* The answer m (of type) about the index this node asked for (0: it
 * asked none); NULL when it answers about another index. */
static const struct raft_msg_discard_resp *
answer_for(const struct raft_msg *m, uint8_t type, raft_index asked)
{
    ASSERT(m->type == type);
    const struct raft_msg_discard_resp *a = &m->discard_resp;
    return asked != 0 && a->index == asked ? a : NULL;
}

/* A FETCH answer: an intact copy of our term is handed to the store to
 * verify and write (out.repairs); the store reports the next fault. */
void raft__recv_fetch_resp(struct raft *r, const struct raft_msg *m,
                           struct raft_out *out)
{
    const struct raft_msg_discard_resp *a =
        answer_for(m, RAFT_MSG_FETCH_RESP, r->faulty);
    ASSERT(out->n_repairs <= RAFT_OUT_REPAIRS_MAX);
    if (a == NULL || a->status != RAFT_DISCARD_HAS || a->entry == NULL ||
        a->entry->term != raft_term_at(r, a->index)) {
        return;
    }
    r->fetch_held = true;
    if (out->n_repairs < RAFT_OUT_REPAIRS_MAX) {
        out->repairs[out->n_repairs++] =
            (struct raft_repair){.index = a->index, .entry = *a->entry};
    }
}

/* Answer about one index (FETCH or DISCARD). For DISCARD the caller adopted
 * the term (durably, with no vote) before this answer goes out. */
void raft__recv_discard(struct raft *r, const struct raft_msg *m,
                        struct raft_out *out)
{
    raft_index i = m->discard.index;
    ASSERT(m->type == RAFT_MSG_DISCARD || m->type == RAFT_MSG_FETCH);
    ASSERT(m->type == RAFT_MSG_FETCH || m->term <= r->term);
    struct raft_msg *resp = raft__out_msg(
        out,
        m->type == RAFT_MSG_FETCH ? RAFT_MSG_FETCH_RESP : RAFT_MSG_DISCARD_RESP,
        r, m->from, m->from_incarnation);
    if (resp == NULL) {
        return;
    }
    resp->discard_resp.index = i;
    if (i > r->last_index && r->amnesiac) {
        /* Rule 3: it may have held i before the loss; "none" from it would
         * count toward a discard (health is not on the wire). */
        resp->discard_resp.status = RAFT_DISCARD_FAULTY;
    } else if (i > r->last_index) {
        resp->discard_resp.status = RAFT_DISCARD_NONE;
    } else if (r->faulty != 0 && i >= r->faulty) {
        resp->discard_resp.status = MUTATED(r, RAFT_MUT_FAULTY_ANSWERS_NONE)
                                        ? RAFT_DISCARD_NONE
                                        : RAFT_DISCARD_FAULTY;
    } else {
        /* At or below a snapshot the entry is committed: its term. */
        resp->discard_resp.status = RAFT_DISCARD_HAS;
        resp->discard_resp.term =
            i <= r->snap_index ? r->snap_term : raft_term_at(r, i);
        if (i < r->snap_index) {
            resp->discard_resp.term = 0; /* unknown, but certainly held */
        }
    }
}

/* One configuration is convinced when n - q + 1 of its voters that are not
 * faulty there answered none/different, or every voter answered (this node,
 * faulty there, included) and none holds an intact copy of our term. */
static bool config_convinced(const struct raft *r, const struct raft_config *c)
{
    uint32_t n = raft__config_n_voters(c);
    uint32_t q = n / 2 + 1;
    uint32_t lack = 0;
    uint32_t answered = 0;
    bool held = false;
    ASSERT(c->n <= RAFT_SERVERS_MAX);
    ASSERT(r->n_discard <= RAFT_SERVERS_MAX);
    answered += raft__config_self_votes(r, c);
    const struct raft_server *s;
    for (uint32_t i = 0; (s = raft__config_next_peer(r, c, &i)) != NULL;) {
        for (uint32_t k = 0; k < r->n_discard; k++) {
            if (r->discard_from[k] != s->node) {
                continue;
            }
            uint8_t st = r->discard_status[k] & 3u;
            bool same = st == RAFT_DISCARD_HAS && (r->discard_status[k] >> 2);
            lack +=
                st == RAFT_DISCARD_NONE || (st == RAFT_DISCARD_HAS && !same);
            held = held || same;
            answered++;
        }
    }
    return n > 0 && (lack >= n - q + 1 || (answered >= n && !held));
}

/* Decide once enough answers are in: every configuration of the round must
 * be convinced. */
static void discard_decide(struct raft *r, struct raft_out *out)
{
    const struct raft_config *cfgs[ROUND_CONFIGS_MAX];
    uint32_t n = round_configs(r, r->discard_index, cfgs);
    ASSERT(r->n_discard <= RAFT_SERVERS_MAX);
    ASSERT(r->discard_index == r->faulty);
    for (uint32_t k = 0; k < n; k++) {
        if (!config_convinced(r, cfgs[k])) {
            return;
        }
    }
    if (r->discard_index <= r->commit) {
        return; /* committed as far as we know: never discard */
    }
    raft_index at = r->discard_index;
    r->discard_index = 0;
    raft__log_truncate(r, at);
    out->truncate_from = at;
    r->extent_index = 0;
    r->extent_term = 0;
}

void raft__recv_discard_resp(struct raft *r, const struct raft_msg *m,
                             struct raft_out *out)
{
    const struct raft_msg_discard_resp *a =
        answer_for(m, RAFT_MSG_DISCARD_RESP, r->discard_index);
    ASSERT(r->n_discard <= RAFT_SERVERS_MAX);
    if (a == NULL || r->faulty != r->discard_index) {
        return;
    }
    if (m->term != r->discard_term && !MUTATED(r, RAFT_MUT_DISCARD_UNFENCED)) {
        return; /* only answers in the round's term count */
    }
    for (uint32_t k = 0; k < r->n_discard; k++) {
        if (r->discard_from[k] == m->from) {
            return;
        }
    }
    if (!round_voter(r, a->index, m->from, m->from_incarnation)) {
        return; /* only voters of the round's configurations count */
    }
    if (r->n_discard == RAFT_SERVERS_MAX || a->status < RAFT_DISCARD_NONE ||
        a->status > RAFT_DISCARD_HAS) {
        return;
    }
    bool same = a->status == RAFT_DISCARD_HAS &&
                (a->term == 0 || a->term == raft_term_at(r, a->index));
    r->discard_from[r->n_discard] = m->from;
    r->discard_status[r->n_discard] = (uint8_t)(a->status | (same ? 4u : 0u));
    r->n_discard++;
    discard_decide(r, out);
}
