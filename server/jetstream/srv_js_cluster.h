/* srv_js_cluster: JetStream across the cluster (docs/design.md §3, §6).
 *
 * - Node identity: a node's raft_node is a stable nonzero hash of its name
 *   (-n); a directory maps raft_node -> name for every node seen.
 * - Raft transport: every replica's send callback encodes the raft_msg
 *   (raft/codec.h) into one SRV_CLUSTER_GROUP frame to the node named by
 *   the directory; inbound frames of a registered group are decoded and
 *   handed to replica_receive. A message to a node without a link is
 *   dropped (Raft retries). AppendEntries larger than one frame are split
 *   into consecutive AppendEntries (each valid on its own).
 * - Meta bootstrap: nodes exchange (name, incarnation, empty/member, seed
 *   set) on SRV_CLUSTER_JS_META at every link-up and every
 *   SRV_JSC_REPORT_MS. A node's seed set is itself plus the node behind
 *   each --routes URL, by the name its handshake told (so nats:// and
 *   nats-route://, a host name and its address name one seed, and lists
 *   of the other nodes only agree with full lists); the meta group is
 *   created only when every seed is connected, empty and agrees on the
 *   seed set (srv_jsc_boot_decide, pure).
 * - Placement: the meta leader picks the peers of a new stream
 *   (srv_jsc_place, pure) and puts them and a random group id into the
 *   committed create entry.
 * - Leader directory: the leader of each group announces (group id, term)
 *   on SRV_CLUSTER_JS_LEADER when it becomes leader and every
 *   SRV_JSC_ANNOUNCE_MS, one frame per link for all groups it leads;
 *   receivers keep the highest term, forget entries not refreshed.
 *
 * Loop thread only.
 */
#ifndef KEEL_SRV_JS_CLUSTER_H
#define KEEL_SRV_JS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"
#include "raft.h"
#include "srv_tags.h"

struct srv_js;
struct srv_jsc;
struct srv_cluster;
struct replica;
struct json_t;

#define SRV_JSC_NAME_BYTES 128 /* = SRV_CLUSTER_NAME_BYTES */
#define SRV_JSC_URL_BYTES 256  /* = SRV_CLUSTER_URL_BYTES */
#define SRV_JSC_GID_BYTES 16

/* What a node reports about its JetStream data directory. */
enum srv_jsc_state {
    SRV_JSC_UNKNOWN = 0,
    SRV_JSC_EMPTY = 1,   /* no meta group on disk */
    SRV_JSC_MEMBER = 2,  /* has the meta group on disk */
    SRV_JSC_WAITING = 3, /* empty, found an existing cluster: waits to be
                            added (issue 9) */
};

/* One node of a placement or configuration. */
struct srv_jsc_member {
    char name[SRV_JSC_NAME_BYTES];
    raft_node node;
    raft_incarnation inc;
    /* The placement changed since the index-1 configuration (a move or a
     * num_replicas change, issue 9): while any member is marked, no placed
     * node bootstraps the group (an empty log waits for the leader's
     * AppendEntries). */
    bool added;
};

/* Where a stream's group lives: committed in the meta create entry. */
struct srv_jsc_placement {
    uint8_t gid[SRV_JSC_GID_BYTES];
    uint32_t n; /* 0: a stream of a node that is not clustered */
    struct srv_jsc_member m[SRV_JS_REPLICAS_MAX];
};

/* ---- pure functions (srv_js_meta_place.c; unit tested) ---- */

/* The raft_node of a node name: xxh3-64 of the name, never 0. */
raft_node srv_jsc_node_id(const char *name);

/* Check --routes: the comma/space-separated URLs normalised to
 * host:port, sorted, deduplicated, comma-joined into out (for messages).
 * Returns 0, KEEL_EINVAL (a URL without host:port; errmsg names it) or
 * KEEL_ELIMIT (more than RAFT_SERVERS_MAX seeds or out too small). */
KEEL_MUST_USE int srv_jsc_seeds_canon(const char *routes, char *out, size_t cap,
                                      char *errmsg);

/* The seed set of node self: self and the n names of the nodes its
 * routes reached (duplicates and self among them allowed), sorted,
 * deduplicated, comma-joined into out. Returns 0, KEEL_EINVAL (a name
 * with a comma) or KEEL_ELIMIT (more than RAFT_SERVERS_MAX nodes, or out
 * too small), with errmsg. */
KEEL_MUST_USE int srv_jsc_seed_set(const char *self, const char *const *names,
                                   size_t n, char *out, size_t cap,
                                   char *errmsg);

/* A node's report as the bootstrap decision sees it. */
struct srv_jsc_report {
    const char *name;
    const char *url; /* its advertised cluster URL, host:port */
    raft_incarnation inc;
    enum srv_jsc_state state;
    /* srv_jsc_seed_set; "" while some route's node is not known yet
     * (never for self: the caller waits for its own set first). */
    const char *seeds;
    uint64_t fp; /* MEMBER: srv_jsc_config_fp of its configuration */
};

/* Fingerprint of a configuration's (node, incarnation) list, never 0. */
uint64_t srv_jsc_config_fp(const struct raft_config *cfg);

enum srv_jsc_boot {
    SRV_JSC_BOOT_WAIT = 1,   /* not every seed reported yet */
    SRV_JSC_BOOT_CREATE = 2, /* every seed empty and agreeing: bootstrap */
    SRV_JSC_BOOT_JOIN = 3,   /* a peer already has the meta group */
    SRV_JSC_BOOT_REFUSE = 4, /* seed sets disagree */
    /* A solo seed (its set is only itself) of this node's set is linked:
     * it bootstraps alone, its leader adds this node (docs/design.md
     * "Cluster formation"). */
    SRV_JSC_BOOT_JOIN_SEED = 5,
};

/* Is name in the seed set seeds (srv_jsc_seed_set form)? */
bool srv_jsc_set_has(const char *seeds, const char *name);
/* A solo seed: a node whose seed set is known and is only itself (its
 * routes all reached itself, or it has none). */
bool srv_jsc_report_solo(const struct srv_jsc_report *r);

/* The bootstrap decision of an empty node self given the reports of the
 * peers it is linked to now; seeds are compared by name. An empty peer
 * whose seed set is not known yet only delays (WAIT when it is a seed).
 * A MEMBER peer with the same seed set whose
 * fingerprint equals the configuration computed here bootstrapped in the
 * same round: it counts as a seed (everyone writes the same index-1
 * entry); any other MEMBER peer means JOIN. A node that is not a solo
 * seed and links a solo seed of its set (empty or member) gets
 * JOIN_SEED; a solo seed ignores the empty nodes that name it and
 * creates a group of itself alone (the caller adds the wait of
 * SRV_JSC_SOLO_WAIT_MS). CREATE fills cfg with every seed as
 * a voter (node, incarnation), in seed-list order (the same on every seed). why
 * (SRV_JSC_WHY_BYTES) says what is awaited or wrong, for the log. */
#define SRV_JSC_WHY_BYTES 512
enum srv_jsc_boot srv_jsc_boot_decide(const struct srv_jsc_report *self,
                                      const struct srv_jsc_report *peers,
                                      size_t npeers, struct raft_config *cfg,
                                      char *why);

/* Placement: choose r of the n candidates, fewest hosted groups first,
 * ties by name; chosen[] gets candidate indexes sorted by name. Returns 0
 * or KEEL_ELIMIT (r == 0 or r > n). */
KEEL_MUST_USE int srv_jsc_place(const struct srv_jsc_member *cand, size_t n,
                                const uint32_t *hosted, uint32_t r,
                                size_t *chosen);

/* The placement as members of a meta create entry e: "group" (32 hex
 * digits) and "placement" ([{name, node, inc}], 16 hex digits each).
 * Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_jsc_placement_to_json(const struct srv_jsc_placement *pl,
                                            struct json_t *e);
/* Parse them back from a committed entry; an entry without "group" (a
 * stream of a node that is not clustered) gives pl->n 0. Returns 0 or
 * KEEL_EPROTO (malformed: the same on every node). */
KEEL_MUST_USE int srv_jsc_placement_from_json(const struct json_t *e,
                                              struct srv_jsc_placement *pl);

/* ---- the cluster layer (srv_js_cluster.c) ---- */

/* Create the layer for node name (non-empty) with incarnation inc and
 * the --routes seeds. The cluster is attached later (srv_jsc_attach),
 * once keeld started its links. Returns 0, KEEL_ENOMEM or KEEL_ECONFIG
 * (bad seed list) with errmsg. */
KEEL_MUST_USE int srv_jsc_create(struct srv_js *js, const char *name,
                                 raft_incarnation inc, const char *routes,
                                 bool member, struct srv_jsc **out,
                                 char *errmsg);
/* Stop the timer and unregister every handler (loop thread; the loop
 * then finishes the handle close). */
void srv_jsc_stop(struct srv_jsc *jc);
/* Free (after the loop finished). */
void srv_jsc_free(struct srv_jsc *jc);

const char *srv_jsc_self_name(const struct srv_jsc *jc);
raft_node srv_jsc_self_node(const struct srv_jsc *jc);
enum srv_jsc_state srv_jsc_state(const struct srv_jsc *jc);

/* The name of node, or NULL when never seen. */
const char *srv_jsc_name_of(const struct srv_jsc *jc, raft_node node);
/* Remember node names learned from committed entries (placements). */
void srv_jsc_learn(struct srv_jsc *jc, const char *name, raft_incarnation inc);

/* Raft transport: route inbound frames of gid to replica_receive(*slot)
 * (slot must stay valid until unregister; *slot may be NULL: dropped). */
KEEL_MUST_USE int srv_jsc_group_register(struct srv_jsc *jc, const uint8_t *gid,
                                         struct replica **slot);
void srv_jsc_group_unregister(struct srv_jsc *jc, const uint8_t *gid);
/* The send callback's body: encode m and send it to m->to. */
void srv_jsc_send(struct srv_jsc *jc, const uint8_t *gid,
                  const struct raft_msg *m);

/* Leader directory. srv_jsc_led: this node leads gid in term (or, with
 * leader false, no longer does); the directory and the next announcement
 * follow. srv_jsc_leader_name: the leader's name or NULL. */
void srv_jsc_led(struct srv_jsc *jc, const uint8_t *gid, uint64_t term,
                 bool leader);
const char *srv_jsc_leader_name(const struct srv_jsc *jc, const uint8_t *gid);
/* A node hosting gid learned its leader from Raft (term, node). */
void srv_jsc_leader_seen(struct srv_jsc *jc, const uint8_t *gid, uint64_t term,
                         raft_node leader);

/* Placement of a new stream of r replicas among the meta voters (the
 * meta leader only): fills pl (random gid), taking the members of prefer
 * (may be NULL) first: a mirror goes where its origin is, as its leader
 * reads the origin there (docs/decisions/0032-mirrors-pull-into-the-log.md).
 * Only voters whose server_tags hold every tag of want are candidates
 * (docs/cluster.md, "Placement tags"). Returns 0, KEEL_ELIMIT (r larger
 * than the voters linked now: it passes) or, with tags asked for,
 * KEEL_ENOENT (too few voters carry them; errmsg says so as nats-server's
 * "no suitable peers for placement" does). */
KEEL_MUST_USE int srv_jsc_place_stream(struct srv_jsc *jc, uint32_t r,
                                       const struct srv_jsc_placement *prefer,
                                       const struct srv_tags *want,
                                       struct srv_jsc_placement *pl,
                                       char *errmsg);

/* One node to take a replica of a stream placed on cur (the meta leader
 * only): the least loaded meta voter up, not in cur, whose tags hold
 * want, marked added. Returns 0, KEEL_ELIMIT (none up; errmsg says what
 * to do) or KEEL_ENOENT (none with the tags asked for). */
KEEL_MUST_USE int srv_jsc_place_replacement(struct srv_jsc *jc,
                                            const struct srv_jsc_placement *cur,
                                            const struct srv_tags *want,
                                            struct srv_jsc_member *out,
                                            char *errmsg);

/* This node's server_tags (none when keeld runs without a config). */
const struct srv_tags *srv_jsc_self_tags(const struct srv_jsc *jc);
/* The server_tags node name last reported (its own for this node), or
 * NULL while it has not reported on its current link. */
const struct srv_tags *srv_jsc_tags_of(const struct srv_jsc *jc,
                                       const char *name);

/* Link state of a node by name (stream info "offline"). */
bool srv_jsc_peer_up(const struct srv_jsc *jc, const char *name);

/* What node name last reported on its link (membership changes). */
struct srv_jsc_peer_report {
    bool up;
    raft_incarnation inc;
    enum srv_jsc_state state;
};
/* Returns false when name was never seen on a link. */
bool srv_jsc_peer_report(const struct srv_jsc *jc, const char *name,
                         struct srv_jsc_peer_report *out);

/* The meta leader's next node to add without an operator: linked, joining
 * through a solo seed, with an empty meta log, not in cfg; the smallest
 * name. Fills name (cap bytes) and inc; false when none. */
bool srv_jsc_next_joiner(const struct srv_jsc *jc,
                         const struct raft_config *cfg, char *name, size_t cap,
                         raft_incarnation *inc);
/* This node joins through a solo seed (reported as such). */
bool srv_jsc_joining(const struct srv_jsc *jc);

/* The meta group applied configuration cfg: a waiting node named in it
 * becomes a member (issue 9), and says so on its links. */
void srv_jsc_config_applied(struct srv_jsc *jc, const struct raft_config *cfg);

#endif
