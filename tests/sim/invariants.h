/* Safety invariants, checked after every step of the simulation. */
#ifndef KEEL_SIM_INVARIANTS_H
#define KEEL_SIM_INVARIANTS_H

#include "sim.h"

uint64_t inv_entry_hash(uint64_t prev, uint64_t index,
                        const struct sim_entry *e);
void inv_created(struct sim *s, uint32_t node, uint64_t index,
                 const struct sim_entry *e);
void inv_truncate(struct sim *s, uint32_t node, uint64_t from);
void inv_leader(struct sim *s, uint32_t node);
/* A faulty leader's own commit (beyond what it may apply): still held
 * durably by a majority of the voters, the leader counted only below its
 * fault. */
void inv_faulty_leader_commit(struct sim *s, uint32_t node, uint64_t commit);
void inv_commit(struct sim *s, uint32_t node, uint64_t commit);
void inv_read_request(struct sim *s, uint64_t id);
void inv_read(struct sim *s, uint32_t node, const struct raft_read *rd);
void inv_converged(struct sim *s);
void inv_durable_chain(struct sim *s, uint32_t node, uint64_t top);
/* Rule 3 exit: a node leaving amnesia durably holds every committed entry
 * its lost tail held (acks it sent for them may have been counted). */
void inv_amnesia_exit(struct sim *s, uint32_t node);

#endif
