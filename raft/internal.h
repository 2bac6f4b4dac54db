/* Functions shared by the files of the Raft core. Not part of the API: they
 * carry the raft__ prefix (two underscores) so they cannot clash with the
 * public raft_ API or with the driver, and the prefix lint accepts them. */
#ifndef KEEL_RAFT_INTERNAL_H
#define KEEL_RAFT_INTERNAL_H

#include "raft.h"

#ifdef RAFT_MUTATIONS
#define MUTATED(r, m) (((r)->mutations & (m)) != 0)
#else
#define MUTATED(r, m) ((void)(r), 0)
#endif

/* A received message's handler: recv_msg (raft.c) checks the term and
 * the role, then hands m to the one for its type. */
typedef void raft__recv_fn(struct raft *r, const struct raft_msg *m,
                           struct raft_out *out);

/* log.c: term runs and configuration tracking. */
int raft__log_append(struct raft *r, raft_index index,
                     const struct raft_entry *e);
void raft__log_truncate(struct raft *r, raft_index from);
raft_term raft__log_last_term(const struct raft *r);
raft_index raft__log_find_le_term(const struct raft *r, raft_index from,
                                  raft_term term);
void raft__log_configs_committed(struct raft *r);
void raft__log_compact(struct raft *r, raft_index index, raft_term term);

/* membership.c */
bool raft__config_is_voter(const struct raft *r, const struct raft_config *c,
                           raft_node node, raft_incarnation inc);
bool raft__config_is_member(const struct raft *r, const struct raft_config *c,
                            raft_node node, raft_incarnation inc);
uint32_t raft__config_n_voters(const struct raft_config *c);
/* The voters of c other than this node, one a call (*i starts at 0);
 * NULL when none is left. */
const struct raft_server *raft__config_next_peer(const struct raft *r,
                                                 const struct raft_config *c,
                                                 uint32_t *i);
/* This node is named a voter in c (any incarnation). */
bool raft__config_self_votes(const struct raft *r, const struct raft_config *c);
void raft__progress_rebuild(struct raft *r);
struct raft_progress *raft__progress_find(struct raft *r, raft_node node,
                                          raft_incarnation inc);
/* Leader: the progress of the follower that sent the answer m (of this
 * term), marked active and heard now; NULL for an incarnation the
 * configuration does not name (rule 1: the answer is ignored). */
struct raft_progress *raft__progress_heard(struct raft *r,
                                           const struct raft_msg *m);
int raft__change_membership(struct raft *r, const struct raft_in *in,
                            struct raft_out *out);
int raft__transfer_start(struct raft *r, raft_node to, struct raft_out *out);
void raft__transfer_check(struct raft *r, struct raft_progress *p,
                          struct raft_out *out);

/* raft.c */
/* The group's deterministic pseudo-random stream (seeded by the driver):
 * election jitter and the choice of a transfer target. */
uint64_t raft__random(struct raft *r);
struct raft_msg *raft__out_msg(struct raft_out *out, uint8_t type,
                               const struct raft *r, raft_node to,
                               raft_incarnation to_inc);
void raft__become_follower(struct raft *r, raft_term term, raft_node leader,
                           struct raft_out *out);
void raft__campaign(struct raft *r, bool pre, bool transfer,
                    struct raft_out *out);

/* discard.c */
void raft__discard_start(struct raft *r, struct raft_out *out);
void raft__fetch_start(struct raft *r, struct raft_out *out);
raft__recv_fn raft__recv_fetch_resp;
raft__recv_fn raft__recv_discard;
raft__recv_fn raft__recv_discard_resp;

/* replication.c */
void raft__send_append(struct raft *r, struct raft_progress *p, bool heartbeat,
                       struct raft_out *out);
void raft__broadcast_append(struct raft *r, bool heartbeat,
                            struct raft_out *out);
raft__recv_fn raft__recv_append;
raft__recv_fn raft__recv_append_resp;
int raft__propose(struct raft *r, const struct raft_in *in,
                  struct raft_out *out);
void raft__on_persisted(struct raft *r, raft_index index, raft_term term,
                        struct raft_out *out);
void raft__maybe_commit(struct raft *r, struct raft_out *out);
raft_index raft__follower_match(const struct raft *r);
/* Follower with a known leader: answer it with success and
 * raft__follower_match (type APPEND_RESP, or SNAPSHOT_RESP once a snapshot
 * is installed); otherwise nothing. */
void raft__ack_leader(struct raft *r, uint8_t type, struct raft_out *out);
int raft__read_index(struct raft *r, uint64_t id, struct raft_out *out);
void raft__reads_fail(struct raft *r, int status, struct raft_out *out);
int raft__leader_append(struct raft *r, const struct raft_entry *e, uint32_t n,
                        struct raft_out *out);

/* snapshot.c */
void raft__send_snapshot(struct raft *r, struct raft_progress *p,
                         bool heartbeat, struct raft_out *out);
raft__recv_fn raft__recv_snapshot;
raft__recv_fn raft__recv_snapshot_resp;
void raft__snapshot_refused(struct raft *r, raft_index index, raft_term term,
                            struct raft_out *out);
void raft__snapshot_installed(struct raft *r, raft_index index, raft_term term,
                              const struct raft_config *config,
                              raft_index faulty, struct raft_out *out);
void raft__snapshot_done(struct raft *r, struct raft_progress *p,
                         struct raft_out *out);

#endif
