#include "srv_sublist.h"

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/grow.h"
#include "keel/limits.h"

struct sub_vec {
    struct srv_sub **v;
    size_t n;
    size_t cap;
};

struct qnode {
    char *name;
    size_t len;
    struct sub_vec subs;
};

struct srv_sublist_node {
    struct srv_hmap children; /* literal token -> node */
    struct srv_sublist_node *pwc;
    struct srv_sublist_node *fwc;
    struct sub_vec psubs;
    struct qnode *q;
    size_t nq;
    size_t capq;
};

struct token {
    const char *ptr;
    size_t len;
};

static size_t tokenize(const char *s, size_t len, struct token *t)
{
    size_t n = 0;
    size_t start = 0;

    for (size_t i = 0; i <= len; i++) {
        if (i == len || s[i] == '.') {
            if (n == SRV_SUBJECT_TOKENS_MAX) {
                return SRV_SUBJECT_TOKENS_MAX + 1;
            }
            t[n].ptr = s + start;
            t[n].len = i - start;
            n++;
            start = i + 1;
        }
    }
    return n;
}

static bool is_tok(const struct token *t, char c)
{
    return t->len == 1 && t->ptr[0] == c;
}

bool srv_subject_valid(const char *s, size_t len, bool wildcards)
{
    struct token t[SRV_SUBJECT_TOKENS_MAX + 1];
    size_t n;

    if (len == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
            return false;
        }
    }
    n = tokenize(s, len, t);
    if (n > SRV_SUBJECT_TOKENS_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i].len == 0) {
            return false;
        }
        bool wc = is_tok(&t[i], '*') || is_tok(&t[i], '>');
        if (wc && !wildcards) {
            return false;
        }
        if (is_tok(&t[i], '>') && i != n - 1) {
            return false;
        }
    }
    return true;
}

bool srv_subject_matches(const char *pat, size_t pat_len, const char *subj,
                         size_t subj_len)
{
    struct token p[SRV_SUBJECT_TOKENS_MAX + 1];
    struct token s[SRV_SUBJECT_TOKENS_MAX + 1];
    size_t np = tokenize(pat, pat_len, p);
    size_t ns = tokenize(subj, subj_len, s);

    if (np > SRV_SUBJECT_TOKENS_MAX || ns > SRV_SUBJECT_TOKENS_MAX) {
        return false;
    }
    for (size_t i = 0; i < np; i++) {
        if (is_tok(&p[i], '>') && i == np - 1) {
            return ns > i;
        }
        if (i >= ns) {
            return false;
        }
        if (is_tok(&p[i], '*')) {
            continue;
        }
        if (p[i].len != s[i].len || memcmp(p[i].ptr, s[i].ptr, p[i].len) != 0) {
            return false;
        }
    }
    return np == ns;
}

static int vec_push(struct sub_vec *v, struct srv_sub *sub)
{
    int rv = keel_grow(&v->v, &v->cap, v->n, sizeof *v->v, 4);

    if (rv == 0) {
        v->v[v->n++] = sub;
    }
    return rv;
}

static bool vec_remove(struct sub_vec *v, struct srv_sub *sub)
{
    for (size_t i = 0; i < v->n; i++) {
        if (v->v[i] == sub) {
            /* Keep order: round-robin and fan-out order stay stable. */
            memmove(&v->v[i], &v->v[i + 1], (v->n - i - 1) * sizeof *v->v);
            v->n--;
            return true;
        }
    }
    return false;
}

static struct srv_sublist_node *node_new(void)
{
    struct srv_sublist_node *n = calloc(1, sizeof *n);
    if (n != NULL) {
        srv_hmap_init(&n->children);
    }
    return n;
}

static bool node_empty(const struct srv_sublist_node *n)
{
    return n->children.count == 0 && n->pwc == NULL && n->fwc == NULL &&
           n->psubs.n == 0 && n->nq == 0;
}

static void node_free(struct srv_sublist_node *n)
{
    size_t pos = 0;
    struct srv_hmap_slot *s;

    if (n == NULL) {
        return;
    }
    while ((s = srv_hmap_next(&n->children, &pos)) != NULL) {
        node_free(s->value);
    }
    srv_hmap_close(&n->children);
    node_free(n->pwc);
    node_free(n->fwc);
    free(n->psubs.v);
    for (size_t i = 0; i < n->nq; i++) {
        free(n->q[i].name);
        free(n->q[i].subs.v);
    }
    free(n->q);
    free(n);
}

void srv_sublist_result_release(struct srv_sublist_result *r)
{
    ASSERT(r->refs > 0);
    if (--r->refs > 0) {
        return;
    }
    for (size_t i = 0; i < r->nqgroups; i++) {
        free(r->qgroups[i].subs);
    }
    free(r->qgroups);
    free(r->psubs);
    free(r->key);
    free(r);
}

static void cache_clear(struct srv_sublist *sl)
{
    size_t pos = 0;
    struct srv_hmap_slot *s;

    while ((s = srv_hmap_next(&sl->cache, &pos)) != NULL) {
        srv_sublist_result_release(s->value);
    }
    srv_hmap_close(&sl->cache);
    srv_hmap_init(&sl->cache);
}

int srv_sublist_init(struct srv_sublist *sl)
{
    memset(sl, 0, sizeof *sl);
    srv_hmap_init(&sl->cache);
    sl->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)sl;
    sl->root = node_new();
    return sl->root == NULL ? KEEL_ENOMEM : 0;
}

void srv_sublist_close(struct srv_sublist *sl)
{
    cache_clear(sl);
    node_free(sl->root);
    sl->root = NULL;
}

/* Drop the cached results that a change to pattern `pat` affects. */
static void cache_invalidate(struct srv_sublist *sl, const char *pat,
                             size_t len)
{
    struct srv_sublist_result *hit[64];
    struct token t[SRV_SUBJECT_TOKENS_MAX + 1];
    size_t nt = tokenize(pat, len, t);
    bool wild = nt > SRV_SUBJECT_TOKENS_MAX;
    size_t n;

    for (size_t i = 0; i < nt && !wild; i++) {
        wild = is_tok(&t[i], '*') || is_tok(&t[i], '>');
    }
    if (!wild) {
        /* A literal subscription affects exactly one cached subject: skip
         * the scan (inbox SUB/UNSUB churn stays O(1)). */
        struct srv_sublist_result *r = srv_hmap_del(&sl->cache, pat, len);
        if (r != NULL) {
            srv_sublist_result_release(r);
        }
        return;
    }
    do {
        size_t pos = 0;
        struct srv_hmap_slot *s;
        n = 0;
        while (n < 64 && (s = srv_hmap_next(&sl->cache, &pos)) != NULL) {
            if (srv_subject_matches(pat, len, s->key, s->key_len)) {
                hit[n++] = s->value;
            }
        }
        for (size_t i = 0; i < n; i++) {
            srv_hmap_del(&sl->cache, hit[i]->key, hit[i]->key_len);
            srv_sublist_result_release(hit[i]);
        }
        /* A full batch may have left more; SRV_SUBLIST_CACHE_MAX bounds
         * the number of rounds. */
    } while (n == 64);
}

static struct srv_sublist_node **child_slot(struct srv_sublist_node *n,
                                            const struct token *t)
{
    if (is_tok(t, '*')) {
        return &n->pwc;
    }
    if (is_tok(t, '>')) {
        return &n->fwc;
    }
    return NULL;
}

static int child_get_or_add(struct srv_sublist_node *n, const struct token *t,
                            struct srv_sublist_node **out)
{
    struct srv_sublist_node **slot = child_slot(n, t);
    struct srv_sublist_node *c;
    int rv;

    c = slot != NULL ? *slot : srv_hmap_get(&n->children, t->ptr, t->len);
    if (c == NULL) {
        c = node_new();
        if (c == NULL) {
            return KEEL_ENOMEM;
        }
        if (slot != NULL) {
            *slot = c;
        } else {
            rv = srv_hmap_put(&n->children, t->ptr, t->len, c);
            if (rv != 0) {
                node_free(c);
                return rv;
            }
        }
    }
    *out = c;
    return 0;
}

static int node_add_sub(struct srv_sublist_node *n, struct srv_sub *sub)
{
    if (sub->queue == NULL) {
        return vec_push(&n->psubs, sub);
    }
    for (size_t i = 0; i < n->nq; i++) {
        if (n->q[i].len == sub->queue_len &&
            memcmp(n->q[i].name, sub->queue, sub->queue_len) == 0) {
            return vec_push(&n->q[i].subs, sub);
        }
    }
    if (n->nq == SRV_QUEUE_GROUPS_MAX) {
        return KEEL_ELIMIT;
    }
    if (keel_grow(&n->q, &n->capq, n->nq, sizeof *n->q, 2) != 0) {
        return KEEL_ENOMEM;
    }
    struct qnode *q = &n->q[n->nq];
    memset(q, 0, sizeof *q);
    q->name = strndup(sub->queue, sub->queue_len);
    if (q->name == NULL) {
        return KEEL_ENOMEM;
    }
    q->len = sub->queue_len;
    n->nq++;
    return vec_push(&q->subs, sub);
}

int srv_sublist_insert(struct srv_sublist *sl, struct srv_sub *sub)
{
    struct token t[SRV_SUBJECT_TOKENS_MAX + 1];
    size_t nt = tokenize(sub->subject, sub->subject_len, t);
    struct srv_sublist_node *n = sl->root;
    int rv;

    ASSERT(sl->root != NULL);
    if (nt > SRV_SUBJECT_TOKENS_MAX) {
        return KEEL_EINVAL;
    }
    for (size_t i = 0; i < nt; i++) {
        rv = child_get_or_add(n, &t[i], &n);
        if (rv != 0) {
            return rv;
        }
    }
    rv = node_add_sub(n, sub);
    if (rv != 0) {
        return rv;
    }
    sub->removed = false;
    sl->count++;
    cache_invalidate(sl, sub->subject, sub->subject_len);
    return 0;
}

static bool node_remove_sub(struct srv_sublist_node *n, struct srv_sub *sub)
{
    if (sub->queue == NULL) {
        return vec_remove(&n->psubs, sub);
    }
    for (size_t i = 0; i < n->nq; i++) {
        struct qnode *q = &n->q[i];
        if (q->len != sub->queue_len ||
            memcmp(q->name, sub->queue, q->len) != 0) {
            continue;
        }
        if (!vec_remove(&q->subs, sub)) {
            return false;
        }
        if (q->subs.n == 0) {
            free(q->name);
            free(q->subs.v);
            n->q[i] = n->q[--n->nq];
        }
        return true;
    }
    return false;
}

/* Unlink the empty nodes of a path, deepest first. */
static void prune(struct srv_sublist_node **path, const struct token *t,
                  size_t nt)
{
    for (size_t i = nt; i > 0; i--) {
        struct srv_sublist_node *n = path[i];
        struct srv_sublist_node *parent = path[i - 1];
        if (!node_empty(n)) {
            return;
        }
        struct srv_sublist_node **slot = child_slot(parent, &t[i - 1]);
        if (slot != NULL) {
            *slot = NULL;
        } else {
            srv_hmap_del(&parent->children, t[i - 1].ptr, t[i - 1].len);
        }
        node_free(n);
    }
}

int srv_sublist_remove(struct srv_sublist *sl, struct srv_sub *sub)
{
    struct token t[SRV_SUBJECT_TOKENS_MAX + 1];
    struct srv_sublist_node *path[SRV_SUBJECT_TOKENS_MAX + 1];
    size_t nt = tokenize(sub->subject, sub->subject_len, t);

    ASSERT(sl->root != NULL);
    if (nt > SRV_SUBJECT_TOKENS_MAX || sub->removed) {
        return KEEL_ENOENT;
    }
    path[0] = sl->root;
    for (size_t i = 0; i < nt; i++) {
        struct srv_sublist_node **slot = child_slot(path[i], &t[i]);
        path[i + 1] =
            slot != NULL ? *slot
                         : srv_hmap_get(&path[i]->children, t[i].ptr, t[i].len);
        if (path[i + 1] == NULL) {
            return KEEL_ENOENT;
        }
    }
    if (!node_remove_sub(path[nt], sub)) {
        return KEEL_ENOENT;
    }
    prune(path, t, nt);
    ASSERT(sl->count > 0);
    sl->count--;
    sub->removed = true;
    cache_invalidate(sl, sub->subject, sub->subject_len);
    return 0;
}

struct collect {
    struct sub_vec p;
    struct srv_sublist_qgroup *q;
    size_t nq;
    size_t capq;
    int rv;
};

static struct srv_sublist_qgroup *collect_group(struct collect *c,
                                                const struct qnode *qn)
{
    for (size_t i = 0; i < c->nq; i++) {
        if (c->q[i].name_len == qn->len &&
            memcmp(c->q[i].name, qn->name, qn->len) == 0) {
            return &c->q[i];
        }
    }
    if (keel_grow(&c->q, &c->capq, c->nq, sizeof *c->q, 2) != 0) {
        return NULL;
    }
    struct srv_sublist_qgroup *g = &c->q[c->nq++];
    memset(g, 0, sizeof *g);
    g->name = qn->name;
    g->name_len = qn->len;
    return g;
}

static void collect_node(struct collect *c, const struct srv_sublist_node *n)
{
    for (size_t i = 0; i < n->psubs.n && c->rv == 0; i++) {
        c->rv = vec_push(&c->p, n->psubs.v[i]);
    }
    for (size_t i = 0; i < n->nq && c->rv == 0; i++) {
        struct srv_sublist_qgroup *g = collect_group(c, &n->q[i]);
        if (g == NULL) {
            c->rv = KEEL_ENOMEM;
            return;
        }
        /* A group's members may sit on several trie nodes (foo.* and
         * foo.bar in group q); they form one group. */
        struct sub_vec v = {g->subs, g->n, g->n};
        for (size_t j = 0; j < n->q[i].subs.n && c->rv == 0; j++) {
            c->rv = vec_push(&v, n->q[i].subs.v[j]);
        }
        g->subs = v.v;
        g->n = v.n;
    }
}

static void match_level(struct collect *c, const struct srv_sublist_node *n,
                        const struct token *t, size_t i, size_t nt)
{
    ASSERT(i <= nt);
    if (n->fwc != NULL && i < nt) {
        collect_node(c, n->fwc);
    }
    if (i == nt) {
        collect_node(c, n);
        return;
    }
    if (n->pwc != NULL) {
        match_level(c, n->pwc, t, i + 1, nt);
    }
    const struct srv_sublist_node *lit =
        srv_hmap_get(&n->children, t[i].ptr, t[i].len);
    if (lit != NULL) {
        match_level(c, lit, t, i + 1, nt);
    }
}

/* The result for subj; keyed (for the cache) when keyed. */
static int result_build(struct srv_sublist *sl, const char *subj, size_t len,
                        bool keyed, struct srv_sublist_result **out)
{
    struct token t[SRV_SUBJECT_TOKENS_MAX + 1];
    size_t nt = tokenize(subj, len, t);
    struct collect c;
    struct srv_sublist_result *r;

    if (nt > SRV_SUBJECT_TOKENS_MAX) {
        return KEEL_EINVAL;
    }
    memset(&c, 0, sizeof c);
    match_level(&c, sl->root, t, 0, nt);
    r = calloc(1, sizeof *r);
    if (r == NULL || c.rv != 0 ||
        (keyed && (r->key = strndup(subj, len)) == NULL)) {
        free(c.p.v);
        for (size_t i = 0; i < c.nq; i++) {
            free(c.q[i].subs);
        }
        free(c.q);
        free(r);
        return KEEL_ENOMEM;
    }
    /* Start each group at a random member: results are rebuilt whenever
     * the cache drops them, and a fixed start would favour member 0. */
    for (size_t i = 0; i < c.nq; i++) {
        sl->rng ^= sl->rng << 13;
        sl->rng ^= sl->rng >> 7;
        sl->rng ^= sl->rng << 17;
        c.q[i].cursor = (size_t)(sl->rng % c.q[i].n);
    }
    r->key_len = keyed ? len : 0;
    r->refs = 1;
    r->psubs = c.p.v;
    r->npsubs = c.p.n;
    r->qgroups = c.q;
    r->nqgroups = c.nq;
    *out = r;
    return 0;
}

int srv_sublist_match(struct srv_sublist *sl, const char *subj, size_t len,
                      struct srv_sublist_result **out)
{
    struct srv_sublist_result *r;
    int rv;

    ASSERT(sl->root != NULL);
    sl->matches++;
    r = srv_hmap_get(&sl->cache, subj, len);
    if (r != NULL) {
        sl->cache_hits++;
        r->refs++;
        *out = r;
        return 0;
    }
    /* A subject enters the cache at its second miss. Request-reply
     * subjects are unique (every JetStream PubAck goes to a new inbox
     * subject, matched up to three times per node on its way): caching
     * each cost a key copy and an insert, and every SRV_SUBLIST_CACHE_MAX
     * of them cleared the whole cache, the repeated subjects with it
     * (docs/bench.md, "Where a replicated publish goes"). */
    uint64_t h = srv_hmap_hash(subj, len);
    uint64_t *seen = &sl->seen[h % SRV_SUBLIST_SEEN_SLOTS];
    bool again = *seen == h;
    *seen = again ? 0 : h;
    rv = result_build(sl, subj, len, again, &r);
    if (rv != 0 || !again) {
        *out = rv == 0 ? r : NULL; /* uncached: freed at its release */
        return rv;
    }
    if (sl->cache.count >= SRV_SUBLIST_CACHE_MAX) {
        /* Bounded cache: start over rather than track recency. */
        cache_clear(sl);
    }
    if (srv_hmap_put(&sl->cache, subj, len, r) == 0) {
        r->refs++; /* the cache's reference */
    }
    *out = r;
    return 0;
}

struct srv_sub *srv_sublist_qgroup_pick(struct srv_sublist_qgroup *g,
                                        bool (*skip)(struct srv_sub *, void *),
                                        void *ud)
{
    for (size_t i = 0; i < g->n; i++) {
        struct srv_sub *s = g->subs[g->cursor % g->n];
        g->cursor = (g->cursor + 1) % g->n;
        if (!s->removed && (skip == NULL || !skip(s, ud))) {
            return s;
        }
    }
    return NULL;
}
