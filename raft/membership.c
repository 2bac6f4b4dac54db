/* Membership (docs/design.md §3.2 M1-M4) and leadership transfer. */
#include <string.h>

#include "internal.h"
#include "keel/assert.h"
#include "keel/error.h"

static bool same_incarnation(const struct raft *r, raft_incarnation a,
                             raft_incarnation b)
{
    if (MUTATED(r, RAFT_MUT_NO_INCARNATION)) {
        return true; /* the mutation: voters named by node only */
    }
    return a == b;
}

bool raft__config_is_voter(const struct raft *r, const struct raft_config *c,
                           raft_node node, raft_incarnation inc)
{
    const struct raft_server *s = raft_config_find(c, node);
    ASSERT(c->n <= RAFT_SERVERS_MAX);
    ASSERT(node != 0);
    return s != NULL && s->role == RAFT_VOTER &&
           same_incarnation(r, s->incarnation, inc);
}

/* Named with this incarnation, as a voter or as a learner. */
bool raft__config_is_member(const struct raft *r, const struct raft_config *c,
                            raft_node node, raft_incarnation inc)
{
    const struct raft_server *s = raft_config_find(c, node);
    ASSERT(c->n <= RAFT_SERVERS_MAX);
    ASSERT(node != 0);
    return s != NULL && same_incarnation(r, s->incarnation, inc);
}

const struct raft_server *raft__config_next_peer(const struct raft *r,
                                                 const struct raft_config *c,
                                                 uint32_t *i)
{
    ASSERT(c->n <= RAFT_SERVERS_MAX);
    while (*i < c->n) {
        const struct raft_server *s = &c->servers[(*i)++];
        if (s->role == RAFT_VOTER && s->node != r->id) {
            return s;
        }
    }
    return NULL;
}

bool raft__config_self_votes(const struct raft *r, const struct raft_config *c)
{
    const struct raft_server *s = raft_config_find(c, r->id);
    return s != NULL && s->role == RAFT_VOTER;
}

uint32_t raft__config_n_voters(const struct raft_config *c)
{
    uint32_t n = 0;
    ASSERT(c->n <= RAFT_SERVERS_MAX);
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->servers[i].role == RAFT_VOTER) {
            n++;
        }
    }
    ASSERT(n <= c->n);
    return n;
}

struct raft_progress *raft__progress_find(struct raft *r, raft_node node,
                                          raft_incarnation inc)
{
    ASSERT(r->n_progress <= RAFT_SERVERS_MAX);
    ASSERT(node != 0);
    for (uint32_t i = 0; i < r->n_progress; i++) {
        struct raft_progress *p = &r->progress[i];
        if (p->node == node && same_incarnation(r, p->incarnation, inc)) {
            return p;
        }
    }
    return NULL;
}

struct raft_progress *raft__progress_heard(struct raft *r,
                                           const struct raft_msg *m)
{
    struct raft_progress *p =
        raft__progress_find(r, m->from, m->from_incarnation);

    ASSERT(r->role == RAFT_LEADER);
    ASSERT(m->term == r->term);
    if (p != NULL) {
        p->active = true;
        p->heard_ms = r->now_ms;
    }
    return p;
}

/* Follow the configuration in effect: keep what we know of servers that stay
 * (same node and incarnation), start probing new ones. */
void raft__progress_rebuild(struct raft *r)
{
    const struct raft_config *c = raft_config_current(r);
    struct raft_progress old[RAFT_SERVERS_MAX];
    uint32_t n_old = r->n_progress;

    ASSERT(n_old <= RAFT_SERVERS_MAX);
    memcpy(old, r->progress, n_old * sizeof old[0]);
    r->n_progress = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        const struct raft_server *s = &c->servers[i];
        if (s->node == r->id) {
            continue;
        }
        struct raft_progress *p = &r->progress[r->n_progress++];
        bool found = false;
        for (uint32_t j = 0; j < n_old; j++) {
            if (old[j].node == s->node &&
                old[j].incarnation == s->incarnation) {
                *p = old[j];
                found = true;
                break;
            }
        }
        if (!found) {
            memset(p, 0, sizeof *p);
            p->node = s->node;
            p->incarnation = s->incarnation;
            p->next = r->last_index + 1;
            p->probe = true;
            p->heard_ms = r->now_ms;
        }
        p->role = s->role;
    }
    ASSERT(r->n_progress <= c->n);
}

/* Is the server of p healthy (membership rule 4): caught up to commit
 * and heard within an election timeout? */
static bool progress_healthy(const struct raft *r,
                             const struct raft_progress *p)
{
    return p->match >= r->commit &&
           r->now_ms < p->heard_ms + r->election_timeout_ms;
}

/* Membership rule 4: after the change, a majority of the new voters must be
 * healthy (heard within an election timeout, match >= commit). */
static bool change_is_safe(struct raft *r, const struct raft_config *next)
{
    uint32_t healthy = 0;
    uint32_t voters = raft__config_n_voters(next);
    ASSERT(voters > 0);
    healthy += raft__config_self_votes(r, next);
    const struct raft_server *s;
    for (uint32_t i = 0; (s = raft__config_next_peer(r, next, &i)) != NULL;) {
        struct raft_progress *p =
            raft__progress_find(r, s->node, s->incarnation);
        if (p != NULL && progress_healthy(r, p)) {
            healthy++;
        }
    }
    ASSERT(healthy <= voters);
    return healthy * 2 > voters;
}

static int change_build(struct raft *r, const struct raft_in *in,
                        struct raft_config *next)
{
    const struct raft_config *c = raft_config_current(r);
    raft_node node = in->change.node;
    raft_incarnation inc = in->change.incarnation;
    *next = *c;
    struct raft_server *s = NULL;
    for (uint32_t i = 0; i < next->n; i++) {
        if (next->servers[i].node == node) {
            s = &next->servers[i];
        }
    }
    ASSERT(next->n <= RAFT_SERVERS_MAX);
    switch (in->change.op) {
    case RAFT_CHANGE_ADD_LEARNER:
        if (s != NULL || node == 0) {
            return KEEL_EEXIST; /* remove the old incarnation first */
        }
        if (next->n == RAFT_SERVERS_MAX) {
            return KEEL_ELIMIT;
        }
        next->servers[next->n++] = (struct raft_server){
            .node = node, .incarnation = inc, .role = RAFT_LEARNER};
        return 0;
    case RAFT_CHANGE_PROMOTE: {
        if (s == NULL || s->incarnation != inc || s->role != RAFT_LEARNER) {
            return KEEL_EINVAL;
        }
        struct raft_progress *p = raft__progress_find(r, node, inc);
        if (p == NULL || !progress_healthy(r, p)) {
            return KEEL_EBUSY; /* not caught up to commit, or not heard */
        }
        s->role = RAFT_VOTER;
        return 0;
    }
    case RAFT_CHANGE_REMOVE:
        if (s == NULL || s->incarnation != inc) {
            return KEEL_ENOENT;
        }
        if (node == r->id) {
            return KEEL_EINVAL; /* rule 4: transfer leadership first */
        }
        *s = next->servers[next->n - 1];
        next->n--;
        return 0;
    default:
        return KEEL_EINVAL;
    }
}

/* Propose one configuration change (single-server, Raft thesis §4.1).
 * Rule 3: only once an entry of this term has committed and no other
 * configuration entry is uncommitted. Returns KEEL_ENOTLEADER, KEEL_EBUSY
 * (wait and retry), KEEL_EINVAL/KEEL_EEXIST/KEEL_ENOENT (bad request). */
int raft__change_membership(struct raft *r, const struct raft_in *in,
                            struct raft_out *out)
{
    struct raft_config next;
    int rv;

    ASSERT(in->type == RAFT_IN_CHANGE);
    if (r->role != RAFT_LEADER) {
        return KEEL_ENOTLEADER;
    }
    ASSERT(r->term_start > 0);
    if (r->transfer_to != 0) {
        return KEEL_EBUSY;
    }
    if (!MUTATED(r, RAFT_MUT_CONFIG_EARLY) &&
        (r->commit < r->term_start ||
         raft_config_current_index(r) > r->commit)) {
        return KEEL_EBUSY;
    }
    rv = change_build(r, in, &next);
    if (rv != 0) {
        return rv;
    }
    if (!(in->change.force && in->change.op != RAFT_CHANGE_PROMOTE) &&
        !change_is_safe(r, &next)) {
        return KEEL_EBUSY;
    }
    uint32_t len =
        raft_config_encode(&next, r->config_buf, sizeof r->config_buf);
    struct raft_entry e = {.term = r->term,
                           .type = RAFT_ENTRY_CONFIG,
                           .len = len,
                           .buf = r->config_buf};
    return raft__leader_append(r, &e, 1, out);
}

static void send_timeout_now(struct raft *r, struct raft_progress *p,
                             struct raft_out *out)
{
    ASSERT(r->role == RAFT_LEADER);
    ASSERT(p->match == r->last_index);
    (void)raft__out_msg(out, RAFT_MSG_TIMEOUT_NOW, r, p->node, p->incarnation);
}

/* The target of a transfer with no target named: a healthy voter picked
 * at random, else the most caught-up voter; NULL when there is no other
 * voter. At random, as nats-server's step-down takes any healthy peer:
 * taking the first of equally caught-up voters made repeated step-downs of
 * an idle group cycle between two nodes, so the third never led (finding
 * F20, docs/faults.md). */
static struct raft_progress *transfer_pick(struct raft *r,
                                           const struct raft_config *c)
{
    struct raft_progress *best = NULL;
    struct raft_progress *healthy[RAFT_SERVERS_MAX];
    uint32_t n_healthy = 0;
    for (uint32_t i = 0; i < r->n_progress; i++) {
        struct raft_progress *p = &r->progress[i];
        if (!raft__config_is_voter(r, c, p->node, p->incarnation)) {
            continue;
        }
        if (best == NULL || p->match > best->match) {
            best = p;
        }
        if (progress_healthy(r, p)) {
            ASSERT(n_healthy < RAFT_SERVERS_MAX);
            healthy[n_healthy++] = p;
        }
    }
    if (n_healthy > 0) {
        return healthy[raft__random(r) % n_healthy];
    }
    return best;
}

/* Hand leadership to a voter (thesis §3.10): stop proposals, bring the
 * target up to date, then tell it to campaign at once. to == 0 names no
 * target (transfer_pick). */
int raft__transfer_start(struct raft *r, raft_node to, struct raft_out *out)
{
    const struct raft_config *c = raft_config_current(r);
    struct raft_progress *best = NULL;

    ASSERT(c->n <= RAFT_SERVERS_MAX);
    if (r->role != RAFT_LEADER) {
        return KEEL_ENOTLEADER;
    }
    if (to == 0 && r->transfer_to != 0) {
        /* A transfer runs: keep its target. Picking again at every ask
         * (a leader leaving its group asks at every tick) would send
         * TimeoutNow to two voters, whose campaigns split the vote. */
        to = r->transfer_to;
    }
    if (to == 0) {
        best = transfer_pick(r, c);
    }
    for (uint32_t i = 0; to != 0 && i < r->n_progress; i++) {
        struct raft_progress *p = &r->progress[i];
        if (p->node == to &&
            raft__config_is_voter(r, c, p->node, p->incarnation)) {
            best = p;
        }
    }
    if (best == NULL) {
        return KEEL_EINVAL;
    }
    ASSERT(best->node != r->id);
    r->transfer_to = best->node;
    r->transfer_deadline_ms = r->now_ms + r->election_timeout_ms;
    if (best->match == r->last_index) {
        send_timeout_now(r, best, out);
    } else {
        raft__send_append(r, best, false, out);
    }
    return 0;
}

void raft__transfer_check(struct raft *r, struct raft_progress *p,
                          struct raft_out *out)
{
    ASSERT(r->role == RAFT_LEADER);
    ASSERT(p != NULL);
    if (r->transfer_to == p->node && p->match == r->last_index) {
        send_timeout_now(r, p, out);
    }
}
