/* The keeld server: the libuv loop thread that accepts conns, parses the
 * NATS protocol and routes messages through the sublist. The monitoring
 * thread only reads the stats snapshot published under stats_mu.
 */
#ifndef SRV_SERVER_H
#define SRV_SERVER_H

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "keel/assert.h"
#include "keel/limits.h"
#include "srv_auth.h"
#include "srv_config.h"
#include "srv_outq.h"
#include "srv_sublist.h"

struct srv_conn;
struct srv_cmd;
struct srv_cluster;
struct srv_metrics;

/* ---- How the layers above plug into the NATS core ----
 *
 * The core (this folder) calls no layer above it: it calls the hooks those
 * layers register before the loop runs (main.c wires them). A NULL table
 * is skipped, so a core without them is a plain NATS server.
 */

/* The layer that answers some publishes itself (JetStream: API requests,
 * acks, publishes a stream stores). Every hook runs on the loop thread. */
struct srv_pub_hooks {
    /* A PUB passed the permission checks, before local delivery. True: the
     * layer took it (it still reaches matching subscribers; only "no
     * responders" is not sent for it). c is NULL for a request another
     * node forwarded. */
    bool (*take)(void *arg, struct srv_conn *c, const struct srv_cmd *cmd);
    /* A PUB neither taken nor delivered anywhere: true when the layer
     * keeps it to answer later (its stream may not be created here yet),
     * so no "no responders" is sent. */
    bool (*park)(void *arg, const struct srv_cmd *cmd, bool no_responders);
    /* Lame duck mode: hand the leaderships held here over (start: begin a
     * round); returns how many are still led here. */
    uint32_t (*hand_over)(void *arg, bool start);
    /* The server stops (after the forwarder stopped). */
    void (*stop)(void *arg);
};

/* Per-PUB scratch a forwarder keeps from begin to end (on the stack of
 * the publish path: no allocation per message). */
#define SRV_PUB_FWD_BYTES 128
struct srv_pub_fwd {
    alignas(max_align_t) unsigned char bytes[SRV_PUB_FWD_BYTES];
};

/* The layer that carries messages and interest to other nodes (cluster).
 * Every hook runs on the loop thread. */
struct srv_fwd_hooks {
    /* A PUB is about to be delivered locally: look up remote interest. */
    void (*begin)(void *arg, const struct srv_cmd *cmd, struct srv_pub_fwd *f);
    /* Should the queue group `name` (local_n members here) get this
     * message on another node instead? */
    bool (*queue_remote)(void *arg, struct srv_pub_fwd *f, const char *name,
                         size_t name_len, size_t local_n);
    /* Forward to the nodes with interest; returns how many got it. */
    size_t (*end)(void *arg, struct srv_pub_fwd *f, const struct srv_cmd *cmd);
    /* A client subscription was added / is being buried (sub->conn set). */
    void (*interest_add)(void *arg, const struct srv_sub *sub);
    void (*interest_remove)(void *arg, const struct srv_sub *sub);
    /* The server stops (after monitoring stopped). */
    void (*stop)(void *arg);
};

/* Monitoring: stopped first when the server stops. */
struct srv_mon_hooks {
    void (*stop)(void *arg);
};

struct srv_stats {
    uint64_t in_msgs;
    uint64_t in_bytes;
    uint64_t out_msgs;
    uint64_t out_bytes;
    uint64_t connections;
    uint64_t total_connections;
    uint64_t subscriptions;
    uint64_t slow_consumers;
};

struct srv_server {
    uv_loop_t *loop;
    const struct srv_config *cfg;
    uv_tcp_t listener;
    uv_check_t flush_check;
    uv_signal_t sigterm;
    uv_signal_t sigint;
    bool stopping;
    bool listening;      /* the client port accepts conns (srv_server_listen) */
    bool lame_duck;      /* srv_server_lame_duck ran: stops once handed over */
    uv_signal_t sigusr2; /* lame duck mode */
    uv_timer_t ldm_timer;
    uint64_t ldm_start_ms;
    uint64_t ldm_retry_ms; /* next leadership transfer round */
    struct srv_sublist sublist;
    char server_id[32];
    char host[256];  /* address clients reach, for INFO and the ports file */
    int port;        /* bound client port */
    char *info_json; /* static INFO fields, without the closing brace */
    size_t info_json_len;
    uint64_t next_cid;
    uint64_t start_ms;
    struct srv_conn *conns; /* every conn whose handles are open */
    size_t nconns;
    struct srv_conn **dirty; /* conns with output to flush this iteration */
    size_t ndirty;
    size_t dirty_cap;
    struct srv_sub *graveyard; /* removed subs, freed after the iteration */
    struct srv_conn *stalled;  /* publishers paused for their receivers */
    uv_timer_t stall_timer;
    size_t stall_bytes;
    size_t nbacked;                        /* conns with backed_up set */
    struct srv_outpool outpool;            /* output blocks of every conn */
    const struct srv_pub_hooks *pub_hooks; /* NULL: none registered */
    void *pub_arg;
    const struct srv_fwd_hooks *fwd_hooks;
    void *fwd_arg;
    const struct srv_mon_hooks *mon_hooks;
    void *mon_arg;
    struct srv_auth auth;     /* immutable after init */
    size_t auth_inflight;     /* hash checks on the worker pool */
    uint64_t auth_timeout_ms; /* accept to CONNECT */
    struct srv_tls *tls;      /* NULL without TLS */
    uv_signal_t sighup;       /* reloads the TLS files */
    struct srv_stats stats;
    pthread_mutex_t stats_mu;
    struct srv_stats snapshot; /* copy for the monitoring thread */
    /* The upper layers' handles, kept here so each can find the others'
     * (the core itself never reads them): NULL when off. */
    struct srv_cluster *cluster;
    char *cluster_json; /* /varz "cluster", under stats_mu */
    char *routez_json;  /* /routez, under stats_mu */
    struct srv_metrics *metrics;
    char read_buf[SRV_READ_BYTES];
    char tls_plain[SRV_TLS_CHUNK_BYTES]; /* decrypted input, like read_buf */
};

/* Bind the client port (cfg->addr, cfg->port; port 0 lets the kernel
 * pick) on loop without accepting yet, and install the SIGTERM/SIGINT
 * handlers. srv->port holds the bound port on return. Returns 0, KEEL_EIO
 * (bind failed, errmsg says which address) or KEEL_ENOMEM.
 */
KEEL_MUST_USE int srv_server_init(struct srv_server *srv, uv_loop_t *loop,
                                  const struct srv_config *cfg, char *errmsg);

/* Start accepting conns on the bound port: keeld calls it once JetStream
 * answers, so the first conn a client makes already reaches it. A no-op
 * once a stop began. Returns 0 or KEEL_EIO (the port is taken, say). */
KEEL_MUST_USE int srv_server_listen(struct srv_server *srv, char *errmsg);

/* Stop signals (SIGTERM, SIGINT) and lame duck (SIGUSR2) stay blocked
 * while keeld starts: main blocks them first thing (threads started
 * meanwhile inherit the mask and never take them) and unblocks them once
 * it runs the loop, which delivers a pending one to its handler then.
 * Start-up steps ask srv_server_stop_pending between steps and in long
 * waits, so a stop during start-up ends it within one step. */
void srv_server_signals_block(void);
void srv_server_signals_unblock(void);
bool srv_server_stop_pending(void);

/* Did a stop signal come again while keeld was stopping (it is noted,
 * not acted on: the stop already under way finishes its syncs)? */
bool srv_server_stop_signal_again(void);

/* Run the loop until a signal stops the server and every conn closed. */
int srv_server_run(struct srv_server *srv);

/* Begin a clean stop: stop accepting, flush and close every conn. Loop
 * thread only. */
void srv_server_stop(struct srv_server *srv);

/* Lame duck mode (SIGUSR2, `keeld --signal ldm=PID`, `keel server
 * lameduck`), as nats-server's: close the client port (new conns are
 * refused), send INFO with "ldm":true to every client so it can move,
 * hand every Raft leadership this node holds to a caught-up peer
 * (the pub hooks' hand_over, retried each SRV_LDM_RETRY_MS, given up after
 * SRV_LDM_HANDOFF_MS_MAX), then stop as on SIGTERM (flush and close the
 * conns, finish the syncs, exit 0). Idempotent; ignored once stopping.
 * Loop thread only. */
void srv_server_lame_duck(struct srv_server *srv);

/* Free what init allocated; the loop must have finished. */
void srv_server_close(struct srv_server *srv);

/* Rebuild INFO with connect_urls (docs/protocol.md §1.10) and send it to
 * every connected client, so clients learn the other nodes. Keeps the old
 * INFO if the new one would not fit SRV_INFO_LINE_BYTES_MAX. */
void srv_server_set_connect_urls(struct srv_server *srv,
                                 const char *const *urls, size_t n);

/* Register the hooks of the layer above (main.c, before the loop runs;
 * hooks and arg must outlive srv). NULL unregisters. */
void srv_server_set_pub_hooks(struct srv_server *srv,
                              const struct srv_pub_hooks *h, void *arg);
void srv_server_set_fwd_hooks(struct srv_server *srv,
                              const struct srv_fwd_hooks *h, void *arg);
void srv_server_set_mon_hooks(struct srv_server *srv,
                              const struct srv_mon_hooks *h, void *arg);

/* Replace the cluster JSON the monitoring thread serves (loop thread):
 * the /varz cluster block and /routez, malloc'd (srv takes them; NULL:
 * none). */
void srv_server_cluster_snapshot(struct srv_server *srv, char *cluster_json,
                                 char *routez_json);

/* Copy of the /varz cluster block (routez false) or of /routez; NULL when
 * not clustered. The caller frees it. Any thread. */
char *srv_server_cluster_json(struct srv_server *srv, bool routez);

/* Copy the latest stats snapshot (any thread). */
void srv_server_stats(struct srv_server *srv, struct srv_stats *out);

/* Loop-thread helpers used by srv_conn. */
void srv_server_mark_dirty(struct srv_server *srv, struct srv_conn *c);
void srv_server_conn_gone(struct srv_server *srv, struct srv_conn *c);
void srv_server_bury_sub(struct srv_server *srv, struct srv_sub *sub);
uint64_t srv_now_ms(void);

/* Pause reading c until a receiver drains or SRV_STALL_MS passes. */
void srv_server_stall(struct srv_server *srv, struct srv_conn *c);

/* Resume every stalled conn. */
void srv_server_resume_stalled(struct srv_server *srv);

#endif
