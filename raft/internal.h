/* Functions shared by the files of the Raft core. Not part of the API. */
#ifndef KEEL_RAFT_INTERNAL_H
#define KEEL_RAFT_INTERNAL_H

#include "raft.h"

#ifdef RAFT_MUTATIONS
#define MUTATED(r, m) (((r)->mutations & (m)) != 0)
#else
#define MUTATED(r, m) ((void)(r), 0)
/* snapshot.c */
void send_snapshot(struct raft *r, struct raft_progress *p, bool heartbeat,
                   struct raft_out *out);
void recv_snapshot(struct raft *r, const struct raft_msg *m,
                   struct raft_out *out);
void recv_snapshot_resp(struct raft *r, const struct raft_msg *m,
                        struct raft_out *out);
void snapshot_installed(struct raft *r, raft_index index, raft_term term,
                        const struct raft_config *config, raft_index faulty,
                        struct raft_out *out);
void snapshot_done(struct raft *r, struct raft_progress *p,
                   struct raft_out *out);

#endif

/* log.c: term runs and configuration tracking. */
int log_append(struct raft *r, raft_index index, const struct raft_entry *e);
void log_truncate(struct raft *r, raft_index from);
raft_term log_last_term(const struct raft *r);
raft_index log_find_le_term(const struct raft *r, raft_index from,
                            raft_term term);
void log_configs_committed(struct raft *r);
bool log_configs_full(const struct raft *r);
void log_compact(struct raft *r, raft_index index, raft_term term);

/* membership.c */
bool config_is_voter(const struct raft *r, const struct raft_config *c,
                     raft_node node, raft_incarnation inc);
bool config_is_member(const struct raft *r, const struct raft_config *c,
                      raft_node node, raft_incarnation inc);
uint32_t config_n_voters(const struct raft_config *c);
void progress_rebuild(struct raft *r);
struct raft_progress *progress_find(struct raft *r, raft_node node,
                                    raft_incarnation inc);
int change_membership(struct raft *r, const struct raft_in *in,
                      struct raft_out *out);
int transfer_start(struct raft *r, raft_node to, struct raft_out *out);
void transfer_check(struct raft *r, struct raft_progress *p,
                    struct raft_out *out);

/* raft.c */
struct raft_msg *out_msg(struct raft_out *out, uint8_t type,
                         const struct raft *r, raft_node to,
                         raft_incarnation to_inc);
void become_follower(struct raft *r, raft_term term, raft_node leader,
                     struct raft_out *out);
void reset_election_timer(struct raft *r);
void campaign(struct raft *r, bool pre, bool transfer, struct raft_out *out);

/* discard.c */
void discard_start(struct raft *r, struct raft_out *out);
void fetch_start(struct raft *r, struct raft_out *out);
void recv_fetch_resp(struct raft *r, const struct raft_msg *m,
                     struct raft_out *out);
void recv_discard(struct raft *r, const struct raft_msg *m,
                  struct raft_out *out);
void recv_discard_resp(struct raft *r, const struct raft_msg *m,
                       struct raft_out *out);

/* replication.c */
void send_append(struct raft *r, struct raft_progress *p, bool heartbeat,
                 struct raft_out *out);
void broadcast_append(struct raft *r, bool heartbeat, struct raft_out *out);
void recv_append(struct raft *r, const struct raft_msg *m,
                 struct raft_out *out);
void recv_append_resp(struct raft *r, const struct raft_msg *m,
                      struct raft_out *out);
int propose(struct raft *r, const struct raft_in *in, struct raft_out *out);
void on_persisted(struct raft *r, raft_index index, raft_term term,
                  struct raft_out *out);
void maybe_commit(struct raft *r, struct raft_out *out);
raft_index follower_match(const struct raft *r);
int read_index(struct raft *r, uint64_t id, struct raft_out *out);
void reads_fail(struct raft *r, int status, struct raft_out *out);
int leader_append(struct raft *r, const struct raft_entry *e, uint32_t n,
                  struct raft_out *out);

/* snapshot.c */
void send_snapshot(struct raft *r, struct raft_progress *p, bool heartbeat,
                   struct raft_out *out);
void recv_snapshot(struct raft *r, const struct raft_msg *m,
                   struct raft_out *out);
void recv_snapshot_resp(struct raft *r, const struct raft_msg *m,
                        struct raft_out *out);
void snapshot_installed(struct raft *r, raft_index index, raft_term term,
                        const struct raft_config *config, raft_index faulty,
                        struct raft_out *out);
void snapshot_done(struct raft *r, struct raft_progress *p,
                   struct raft_out *out);

#endif
