/* Subject index: a trie of literal, `*` and `>` nodes (docs/protocol.md §1.7)
 * plus a cache of match results keyed by literal subject. A change removes
 * only the cached results whose subject the changed subscription matches,
 * so request/reply inbox churn does not flush unrelated entries. Matching
 * walks one trie path per token (hash lookups), so its cost does not depend
 * on unrelated subscriptions.
 */
#ifndef SRV_SUBLIST_H
#define SRV_SUBLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"
#include "srv_hmap.h"

struct srv_conn;
struct srv_cmd;

/* An internal subscription's handler (srv_isub.h): the message as a
 * PUB/HPUB command, valid during the call only. */
typedef void (*srv_sub_fn)(void *arg, const struct srv_cmd *msg);

/* A subscription. The sublist borrows it between insert and remove. */
struct srv_sub {
    struct srv_conn *conn; /* NULL: internal (fn) or a remote node's */
    srv_sub_fn fn;         /* internal: called instead of a write */
    void *fn_arg;
    char *subject;
    size_t subject_len;
    char *queue; /* NULL for a plain subscription */
    size_t queue_len;
    char *sid;
    size_t sid_len;
    uint64_t delivered;
    uint64_t max; /* 0 = no limit */
    bool removed; /* set when removed; memory is freed later */
    struct srv_sub *next_free;
};

/* One queue group inside a match result. */
struct srv_sublist_qgroup {
    const char *name;
    size_t name_len;
    struct srv_sub **subs;
    size_t n;
    size_t cursor; /* round-robin position, random at build time */
};

/* Result of a match: shared with the cache and reference counted, so a
 * result stays valid while its deliveries remove subscriptions. */
struct srv_sublist_result {
    unsigned refs;
    char *key; /* the cached subject */
    size_t key_len;
    struct srv_sub **psubs;
    size_t npsubs;
    struct srv_sublist_qgroup *qgroups;
    size_t nqgroups;
};

struct srv_sublist_node;

struct srv_sublist {
    struct srv_sublist_node *root;
    struct srv_hmap cache; /* subject -> struct srv_sublist_result */
    uint64_t seen[SRV_SUBLIST_SEEN_SLOTS]; /* hashes of subjects that
                                              missed once */
    size_t count;
    uint64_t rng; /* xorshift state for queue-group start positions */
    uint64_t matches;
    uint64_t cache_hits;
};

/* Is s a valid subject? Tokens are non-empty with no blanks; with wildcards
 * `*` may be any whole token and `>` the whole last token. */
bool srv_subject_valid(const char *s, size_t len, bool wildcards);

/* Does literal subject `subj` match pattern `pat`? */
bool srv_subject_matches(const char *pat, size_t pat_len, const char *subj,
                         size_t subj_len);

/* Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_sublist_init(struct srv_sublist *sl);

/* Frees nodes and cached results; subscriptions stay the caller's. */
void srv_sublist_close(struct srv_sublist *sl);

/* Add sub (subject already validated). Returns 0, KEEL_EINVAL for a
 * subject with too many tokens, or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_sublist_insert(struct srv_sublist *sl,
                                     struct srv_sub *sub);

/* Remove sub if present; returns 0 or KEEL_ENOENT. */
int srv_sublist_remove(struct srv_sublist *sl, struct srv_sub *sub);

/* Match a literal subject. On 0, *out holds a reference the caller drops
 * with srv_sublist_result_release. Returns KEEL_EINVAL for a subject with
 * too many tokens, KEEL_ENOMEM. */
KEEL_MUST_USE int srv_sublist_match(struct srv_sublist *sl, const char *subj,
                                    size_t len,
                                    struct srv_sublist_result **out);

void srv_sublist_result_release(struct srv_sublist_result *r);

/* Next member of a queue group to deliver to, round-robin, skipping those
 * `skip` rejects (may be NULL). NULL when every member is rejected. */
struct srv_sub *srv_sublist_qgroup_pick(struct srv_sublist_qgroup *g,
                                        bool (*skip)(struct srv_sub *, void *),
                                        void *ud);

#endif
