/* The discard round (DESIGN §4 rule 1c): a faulty node that hears no leader
 * proves its damaged record was never committed, or keeps it. Never on a
 * timeout alone: only answers given in a fresh term every answering voter
 * adopted durably count, so no leader of an older term can still commit at
 * that index once the round decides. */
#include <string.h>

#include "internal.h"
#include "keel/assert.h"
#include "keel/error.h"

/* Start a round about the first faulty index: term := term + 1 (durable
 * before the requests go out: hs_dirty), then ask every other voter of the
 * configuration in effect. */
void discard_start(struct raft *r, struct raft_out *out)
{
    const struct raft_config *c = raft_config_current(r);
    ASSERT(r->faulty > r->snap_index);
    ASSERT(r->role != RAFT_LEADER);
    become_follower(
        r, MUTATED(r, RAFT_MUT_DISCARD_UNFENCED) ? r->term : r->term + 1, 0,
        out);
    r->discard_index = r->faulty;
    r->discard_term = r->term;
    r->n_discard = 0;
    for (uint32_t i = 0; i < c->n && i < RAFT_SERVERS_MAX; i++) {
        const struct raft_server *s = &c->servers[i];
        if (s->role != RAFT_VOTER || s->node == r->id) {
            continue;
        }
        struct raft_msg *m =
            out_msg(out, RAFT_MSG_DISCARD, r, s->node, s->incarnation);
        if (m != NULL) {
            m->discard.index = r->faulty;
        }
    }
}

/* Leaderless repair: ask every other voter for the first faulty index. */
void fetch_start(struct raft *r, struct raft_out *out)
{
    const struct raft_config *c = raft_config_current(r);
    ASSERT(r->faulty > r->snap_index);
    ASSERT(c->n <= RAFT_SERVERS_MAX);
    for (uint32_t i = 0; i < c->n; i++) {
        const struct raft_server *s = &c->servers[i];
        if (s->role != RAFT_VOTER || s->node == r->id) {
            continue;
        }
        struct raft_msg *m =
            out_msg(out, RAFT_MSG_FETCH, r, s->node, s->incarnation);
        if (m != NULL) {
            m->discard.index = r->faulty;
        }
    }
}

/* A FETCH answer: an intact copy of our term is handed to the store to
 * verify and write (out.repairs); the store reports the next fault. */
void recv_fetch_resp(struct raft *r, const struct raft_msg *m,
                     struct raft_out *out)
{
    const struct raft_msg_discard_resp *a = &m->discard_resp;
    ASSERT(m->type == RAFT_MSG_FETCH_RESP);
    ASSERT(out->n_repairs <= RAFT_OUT_REPAIRS_MAX);
    if (r->faulty == 0 || a->index != r->faulty ||
        a->status != RAFT_DISCARD_HAS || a->entry == NULL ||
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
void recv_discard(struct raft *r, const struct raft_msg *m,
                  struct raft_out *out)
{
    raft_index i = m->discard.index;
    ASSERT(m->type == RAFT_MSG_DISCARD || m->type == RAFT_MSG_FETCH);
    ASSERT(m->type == RAFT_MSG_FETCH || m->term <= r->term);
    struct raft_msg *resp = out_msg(
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

/* Decide once enough answers are in: discard when n - q + 1 voters that are
 * not faulty there answered none/different, or every voter answered and none
 * holds an intact copy of our term. */
static void discard_decide(struct raft *r, struct raft_out *out)
{
    const struct raft_config *c = raft_config_current(r);
    uint32_t n = config_n_voters(c);
    uint32_t q = n / 2 + 1;
    uint32_t lack = 0;
    bool held = false;
    ASSERT(r->n_discard <= RAFT_SERVERS_MAX);
    ASSERT(r->discard_index == r->faulty);
    for (uint32_t k = 0; k < r->n_discard; k++) {
        uint8_t st = r->discard_status[k] & 3u;
        bool same = st == RAFT_DISCARD_HAS && (r->discard_status[k] >> 2) != 0;
        if (st == RAFT_DISCARD_NONE || (st == RAFT_DISCARD_HAS && !same)) {
            lack++;
        }
        held = held || same;
    }
    bool all = r->n_discard + 1 >= n;
    if (!(lack >= n - q + 1 || (all && !held))) {
        return;
    }
    if (r->discard_index <= r->commit) {
        return; /* committed as far as we know: never discard */
    }
    raft_index at = r->discard_index;
    r->discard_index = 0;
    log_truncate(r, at);
    out->truncate_from = at;
    r->extent_index = 0;
    r->extent_term = 0;
}

void recv_discard_resp(struct raft *r, const struct raft_msg *m,
                       struct raft_out *out)
{
    const struct raft_msg_discard_resp *a = &m->discard_resp;
    ASSERT(m->type == RAFT_MSG_DISCARD_RESP);
    ASSERT(r->n_discard <= RAFT_SERVERS_MAX);
    if (r->discard_index == 0 || a->index != r->discard_index ||
        r->faulty != r->discard_index) {
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
    if (!config_is_voter(r, raft_config_current(r), m->from,
                         m->from_incarnation)) {
        return; /* only voters of the configuration in effect count */
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
