/* keel-raft-bench: throughput of the Raft core alone. Five cores exchange
 * messages through an instant in-memory FIFO, every write is "persisted" the
 * moment it is asked for, and the leader is fed batches of proposals; the
 * figure is entries committed per second of CPU spent in the cores and this
 * minimal driver. Not a test: run it and read the number.
 *
 *   keel-raft-bench [--entries N] [--batch B]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/assert.h"
#include "raft.h"

#define NODES 5
#define QUEUE_MAX 8192
#define WINDOW 8192 /* uncommitted entries the client keeps in flight */

struct item {
    bool persist; /* a completed sync rather than a message */
    uint32_t node;
    raft_index index;
    raft_term term;
    struct raft_msg msg;
    struct raft_entry entries[RAFT_APPEND_ENTRIES_MAX];
};

static struct raft nodes[NODES];
static struct raft_out out;
static struct item *queue;
static uint32_t q_head, q_len;
static uint64_t payload = 42;
static uint64_t messages;

static struct item *push(void)
{
    ASSERT(q_len < QUEUE_MAX);
    struct item *it = &queue[(q_head + q_len) % QUEUE_MAX];
    q_len++;
    return it;
}

/* What a driver does with one step's output, minus the I/O. */
static void drain(uint32_t i)
{
    for (uint32_t k = 0; k < out.n_msgs; k++) {
        const struct raft_msg *m = &out.msgs[k];
        struct item *it = push();
        it->persist = false;
        it->node = (uint32_t)m->to - 1;
        it->msg = *m;
        if (m->type == RAFT_MSG_APPEND) {
            for (uint32_t e = 0; e < m->append.n_entries; e++) {
                raft_index idx = m->append.prev_index + 1 + e;
                it->entries[e] =
                    (struct raft_entry){raft_term_at(&nodes[i], idx),
                                        RAFT_ENTRY_NORMAL, 8, &payload};
            }
            it->msg.append.entries = it->entries;
        }
        messages++;
    }
    if (out.n_entries > 0) {
        struct item *it = push();
        it->persist = true;
        it->node = i;
        it->index = out.entries_first + out.n_entries - 1;
        it->term = out.entries[out.n_entries - 1].term;
    }
}

static void step(uint32_t i, struct raft_in *in)
{
    in->now_ms = 1000;
    (void)raft_step(&nodes[i], in, &out);
    drain(i);
}

static void run_queue(void)
{
    while (q_len > 0) {
        struct item *it = &queue[q_head];
        q_head = (q_head + 1) % QUEUE_MAX;
        q_len--;
        struct raft_in in;
        if (it->persist) {
            in = (struct raft_in){.type = RAFT_IN_PERSISTED};
            in.persisted.index = it->index;
            in.persisted.term = it->term;
        } else {
            in = (struct raft_in){.type = RAFT_IN_RECEIVE, .msg = &it->msg};
        }
        step(it->node, &in);
    }
}

static void boot(void)
{
    struct raft_config cfg = {.n = NODES};
    uint8_t buf[RAFT_CONFIG_BYTES_MAX];
    for (uint32_t i = 0; i < NODES; i++) {
        cfg.servers[i] = (struct raft_server){i + 1, 1, RAFT_VOTER};
    }
    uint32_t len = raft_config_encode(&cfg, buf, sizeof buf);
    for (uint32_t i = 0; i < NODES; i++) {
        struct raft_params p = {.id = i + 1,
                                .incarnation = 1,
                                .seed = i + 1,
                                .election_timeout_ms = 150,
                                .heartbeat_ms = 30};
        struct raft_entry c = {1, RAFT_ENTRY_CONFIG, len, buf};
        ASSERT(raft_init(&nodes[i], &p) == 0);
        raft_load_hard_state(&nodes[i], 1, 0);
        ASSERT(raft_load_entry(&nodes[i], 1, &c) == 0);
        raft_start(&nodes[i], 0);
    }
    struct raft_in tick = {.type = RAFT_IN_TICK};
    step(0, &tick);
    run_queue();
    ASSERT(nodes[0].role == RAFT_LEADER);
}

int main(int argc, char **argv)
{
    uint64_t target = 2000000;
    uint32_t batch = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--entries") == 0) {
            target = strtoull(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--batch") == 0) {
            batch = (uint32_t)atoi(argv[i + 1]);
        }
    }
    if (batch == 0 || batch > RAFT_PROPOSE_ENTRIES_MAX) {
        fprintf(stderr, "usage: keel-raft-bench [--entries N] [--batch B]\n");
        return 2;
    }
    queue = calloc(QUEUE_MAX, sizeof *queue);
    ASSERT(queue != NULL);
    boot();
    struct raft_entry e[RAFT_PROPOSE_ENTRIES_MAX];
    for (uint32_t k = 0; k < batch; k++) {
        e[k] = (struct raft_entry){0, RAFT_ENTRY_NORMAL, 8, &payload};
    }
    struct raft *l = &nodes[0];
    raft_index start = l->commit;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (l->commit - start < target) {
        while (l->last_index - l->commit < WINDOW) {
            struct raft_in in = {.type = RAFT_IN_PROPOSE};
            in.propose.n = batch;
            in.propose.entries = e;
            step(0, &in);
            if (q_len > QUEUE_MAX / 2) {
                break;
            }
        }
        run_queue();
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    uint64_t done = l->commit - start;
    printf("5-node core, instant network and disk, batch %u: %llu entries "
           "committed in %.3f s = %.0f entries/s (%llu messages, %.0f "
           "msgs/s)\n",
           batch, (unsigned long long)done, s, (double)done / s,
           (unsigned long long)messages, (double)messages / s);
    for (uint32_t i = 0; i < NODES; i++) {
        raft_close(&nodes[i]);
    }
    free(queue);
    return 0;
}
