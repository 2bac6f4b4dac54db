/* Cluster links: one TCP link per node pair carrying length-prefixed
 * msgpack frames (kind, group id, payload). Core NATS interest and
 * forwarded messages ride on them (srv_cluster_interest.c), and so do the
 * frames of the Raft groups, which register a handler per group id.
 *
 * A node is known by its name (-n, unique in the cluster). Links are
 * dialed to the seed URLs (--routes) and to the URLs learned by gossip;
 * a seed that turns out to be this node is recognised by its id in the
 * handshake and skipped. When two nodes dial each other at once, the link
 * dialed by the node with the smaller name is kept on both sides. Loop
 * thread only.
 */
#ifndef SRV_CLUSTER_H
#define SRV_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "keel/assert.h"
#include "keel/limits.h"
#include "srv_hmap.h"
#include "srv_outq.h"
#include "srv_parser.h"
#include "srv_sublist.h"

struct srv_server;

#define SRV_CLUSTER_GROUP_ID_BYTES 16
#define SRV_CLUSTER_URL_BYTES 256
#define SRV_CLUSTER_NAME_BYTES 128

/* Frame kinds. Core kinds have an empty group id. */
enum srv_cluster_kind {
    SRV_CLUSTER_HELLO = 1, /* JSON: id, name, cluster, client_url, url */
    SRV_CLUSTER_PING = 2,
    SRV_CLUSTER_PONG = 3,
    SRV_CLUSTER_GOSSIP = 4,   /* JSON array of known cluster URLs */
    SRV_CLUSTER_INTEREST = 5, /* [subject, queue, count]; count 0 = gone */
    SRV_CLUSTER_MSG = 6,      /* [subject, reply, hdr_bytes, queues, data] */
    SRV_CLUSTER_GROUP = 7,    /* group id + opaque bytes (raft_msg codec) */
    /* Extension kinds: the layer above registers a handler for each
     * (srv_cluster_register_kind); a frame of an unregistered extension
     * kind is dropped, not a protocol error, so nodes of different
     * versions keep their links. */
    SRV_CLUSTER_JS_FWD = 8,    /* JetStream request forwarded to a leader */
    SRV_CLUSTER_JS_LEADER = 9, /* group leader announcements */
    SRV_CLUSTER_JS_META = 10,  /* meta bootstrap / membership exchange */
    /* [gid, raft msg, gid, raft msg, ...] of several groups
     * (srv_cluster_batch.c); handled by the core, not a registered kind. */
    SRV_CLUSTER_GROUP_BATCH = 11,
    SRV_CLUSTER_JS_MIRROR = 12, /* a mirror's reads of an origin elsewhere */
    SRV_CLUSTER_KIND_MAX = 12,
};
#define SRV_CLUSTER_KIND_EXT_MIN 8

/* Inbound frame of a registered group: from is the sender's node name. */
typedef void (*srv_cluster_group_cb)(void *arg, const char *from,
                                     const uint8_t *data, size_t len);
/* Inbound frame of a registered extension kind (payload only). */
typedef void (*srv_cluster_kind_cb)(void *arg, const char *from,
                                    const uint8_t *data, size_t len);
/* A peer's link came up (up = true) or went down. */
typedef void (*srv_cluster_peer_cb)(void *arg, const char *name, bool up);

struct srv_cluster_settings {
    const char *listen; /* "nats://host:port" or "host:port"; port 0 ok */
    const char *name;   /* cluster name; "" = "keel" */
    const char *routes; /* comma-separated seed URLs, may include self */
    const char *node_name;
    const char *node_id;
    const char *client_url; /* "host:port" clients reach this node on */
    /* Link security (srv_cluster_tls.c): a shared route secret (user and
     * password; NULL/"" = none, then a route URL's user:pass@ is used)
     * and mutual TLS (cert, key and CA files; "" = plain TCP). */
    const char *auth_user;
    const char *auth_pass;
    const char *tls_cert;
    const char *tls_key;
    const char *tls_ca;
};

struct srv_cluster_node {
    bool used;
    bool self; /* a URL that reached this node itself: never dialed */
    bool seed; /* named in --routes (not learned by gossip) */
    char url[SRV_CLUSTER_URL_BYTES];   /* host:port */
    char name[SRV_CLUSTER_NAME_BYTES]; /* once a handshake told it */
    struct srv_cluster_link *dialing;
    /* A host name being resolved (uv_getaddrinfo, one at a time per
     * node; the request is freed by its callback). */
    struct srv_cluster_resolve *resolving;
    bool unresolved; /* the last lookup failed (logged once) */
    uint64_t next_dial_ms;
    uint32_t backoff_ms;
    bool refused; /* last handshake refused (cluster name mismatch) */
};

struct srv_cluster_link {
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    struct srv_cluster *cl;
    int slot;                      /* index in cl->links */
    struct srv_cluster_node *node; /* dialed node; NULL for accepted */
    bool outbound;
    bool connected;   /* TCP up */
    bool established; /* HELLO received and accepted */
    bool closing;
    bool writing;
    bool replaced;  /* closed for a newer link to the same peer */
    bool replacing; /* took over from an older link to the same peer */
    char peer_id[64];
    char peer_name[SRV_CLUSTER_NAME_BYTES];
    char peer_url[SRV_CLUSTER_URL_BYTES];        /* its cluster URL */
    char peer_client_url[SRV_CLUSTER_URL_BYTES]; /* its client URL */
    struct srv_outq out;
    uint8_t *rbuf; /* bytes of an incomplete frame */
    size_t rlen;
    size_t rcap;
    uint64_t opened_ms;
    uint64_t last_rx_ms;
    uint64_t last_ping_ms;
    uint64_t frames_in, frames_out, bytes_in, bytes_out;
    size_t out_peak;    /* most bytes the outbound queue held */
    uint64_t held_back; /* bulk group frames held back (send_bulk) */
    /* Group frames waiting to go as one GROUP_BATCH (srv_cluster_batch.c):
     * batch_n items in batch_len bytes after a 5-byte header slot. */
    uint8_t *batch;
    size_t batch_len, batch_cap;
    uint32_t batch_n;
    uint64_t batch_items_out; /* group messages sent in batches */
    struct srv_hmap rsubs;    /* "subject\0queue" -> struct srv_cluster_rsub */
    struct srv_cluster_link_sec *sec; /* auth + TLS state; NULL = none */
};

/* Interest of a remote node, kept in cl->rsublist. sub must stay first:
 * the sublist hands out &rsub->sub. sub.conn is NULL. */
struct srv_cluster_rsub {
    struct srv_sub sub;
    struct srv_cluster_link *link;
    uint64_t count;
};

struct srv_cluster_group {
    uint8_t id[SRV_CLUSTER_GROUP_ID_BYTES];
    srv_cluster_group_cb cb;
    void *arg;
};

struct srv_cluster {
    uv_loop_t *loop;
    struct srv_server *srv; /* NULL in transport-only tests */
    uv_tcp_t listener;
    uv_timer_t tick;
    uv_check_t check;
    uv_prepare_t prepare; /* flushes batches and links before the loop blocks */
    struct srv_outpool pool; /* link output blocks */
    bool stopping;
    bool listener_inited;
    bool timers_inited;
    int handles_open;
    char name[SRV_CLUSTER_NAME_BYTES]; /* cluster name */
    char node_name[SRV_CLUSTER_NAME_BYTES];
    char node_id[64];
    char client_url[SRV_CLUSTER_URL_BYTES];
    char url[SRV_CLUSTER_URL_BYTES]; /* advertised cluster host:port */
    char listen_host[SRV_CLUSTER_URL_BYTES - 16];
    int port; /* bound cluster port */
    struct srv_cluster_node nodes[SRV_CLUSTER_NODES_MAX];
    struct srv_cluster_link *links[SRV_CLUSTER_LINKS_MAX];
    int resolves; /* lookups in flight, abandoned ones too */
    /* Registered groups by id (16 bytes -> a malloc'ed struct
     * srv_cluster_group): a frame finds its group in one lookup, however
     * many groups the node hosts. */
    struct srv_hmap groups;
    srv_cluster_kind_cb kind_cb[SRV_CLUSTER_KIND_MAX + 1];
    void *kind_arg[SRV_CLUSTER_KIND_MAX + 1];
    srv_cluster_peer_cb peer_cb;
    void *peer_arg;
    struct srv_hmap interest; /* local "subject\0queue" -> count */
    struct srv_sublist rsublist;
    uint64_t rng;
    uint8_t *scratch; /* frame building */
    size_t scratch_cap;
    uint64_t msgs_forwarded;
    uint64_t msgs_received;
    bool snapshot_dirty;
    uint64_t snapshot_ms;        /* last /varz /routez snapshot */
    uint64_t tick_ms;            /* loop time of the last tick */
    uint64_t late_ticks;         /* ticks after a long loop turn */
    struct srv_cluster_sec *sec; /* route secret + TLS; NULL = none */
};

/* Parse "nats://host:port" (also nats-route://, route://, bare host:port,
 * and user:pass@ which is ignored) into host and port. Returns 0 or
 * KEEL_EINVAL. */
KEEL_MUST_USE int srv_cluster_parse_url(const char *url, char *host,
                                        size_t host_len, int *port);

/* Listen on s->listen and start dialing the seeds. srv may be NULL (no
 * core NATS, transport only). cl must stay at a fixed address until
 * srv_cluster_close. Returns 0, KEEL_EUSAGE (bad URL), KEEL_EIO (cannot
 * listen) or KEEL_ENOMEM, with errmsg saying what to change. */
KEEL_MUST_USE int srv_cluster_start(struct srv_cluster *cl, uv_loop_t *loop,
                                    struct srv_server *srv,
                                    const struct srv_cluster_settings *s,
                                    char *errmsg);

/* Add a seed URL after start (same forms as --routes). Returns 0 or
 * KEEL_EINVAL (bad URL or table full). */
KEEL_MUST_USE int srv_cluster_add_route(struct srv_cluster *cl,
                                        const char *url);

/* Close the listener, every link and the timer; the loop then ends once
 * their close callbacks ran. Idempotent. */
void srv_cluster_stop(struct srv_cluster *cl);

/* Free what start allocated, after the loop finished. */
void srv_cluster_close(struct srv_cluster *cl);

/* Send one frame of group_id to the node named node: up to
 * SRV_CLUSTER_BATCH_ITEM_BYTES_MAX bytes it joins the link's batch (one
 * GROUP_BATCH frame per loop iteration, srv_cluster_batch.c), larger ones go
 * as a GROUP frame of their own, after the batch. Returns 0 (queued),
 * KEEL_ENOENT (no link to that node now: the caller treats it as a lost
 * message, Raft retries), KEEL_ETOOBIG (over SRV_CLUSTER_FRAME_BYTES_MAX)
 * or KEEL_ELIMIT (the link's queue was full: the link is dropped and
 * reconnects). */
KEEL_MUST_USE int srv_cluster_send(struct srv_cluster *cl, const char *node,
                                   const uint8_t *group_id, const void *data,
                                   size_t len);
/* The same with the frame's payload in two parts, a then b (a may be
 * empty): a message whose parts are encoded apart is not joined first. */
KEEL_MUST_USE int srv_cluster_send2(struct srv_cluster *cl, const char *node,
                                    const uint8_t *group_id, const void *a,
                                    size_t alen, const void *b, size_t blen);

/* srv_cluster_send2 for a frame that carries bulk data the group sends
 * again when it is lost (AppendEntries with entries, InstallSnapshot
 * chunks): held back, KEEL_EAGAIN, while the link to node already queues
 * SRV_CLUSTER_LINK_GROUP_BYTES_MAX, so a peer that reads slower than this
 * node sends gets a bounded backlog rather than a link dropped with its
 * queue full (docs/cluster.md, "Flow control"). */
KEEL_MUST_USE int srv_cluster_send_bulk(struct srv_cluster *cl,
                                        const char *node,
                                        const uint8_t *group_id, const void *a,
                                        size_t alen, const void *b,
                                        size_t blen);

/* Route inbound frames of group_id to cb(arg, ...). Returns 0, KEEL_EEXIST
 * or KEEL_ELIMIT (SRV_CLUSTER_GROUPS_MAX). */
KEEL_MUST_USE int srv_cluster_register_group(struct srv_cluster *cl,
                                             const uint8_t *group_id,
                                             srv_cluster_group_cb cb,
                                             void *arg);

/* Stop routing group_id; returns 0 or KEEL_ENOENT. */
int srv_cluster_unregister_group(struct srv_cluster *cl,
                                 const uint8_t *group_id);

/* Route inbound frames of extension kind (SRV_CLUSTER_KIND_EXT_MIN ..
 * SRV_CLUSTER_KIND_MAX) to cb(arg, ...); one handler per kind, NULL
 * clears. Returns 0, KEEL_EINVAL (not an extension kind) or KEEL_EEXIST
 * (another handler is registered). */
KEEL_MUST_USE int srv_cluster_register_kind(struct srv_cluster *cl,
                                            unsigned kind,
                                            srv_cluster_kind_cb cb, void *arg);

/* Send one frame of extension kind to the node named node. Returns 0,
 * KEEL_ENOENT (no link now), KEEL_ETOOBIG or KEEL_ELIMIT as
 * srv_cluster_send. */
KEEL_MUST_USE int srv_cluster_send_kind(struct srv_cluster *cl,
                                        const char *node, unsigned kind,
                                        const void *data, size_t len);

/* Send one frame of extension kind on every established link; returns
 * how many links queued it. */
size_t srv_cluster_broadcast_kind(struct srv_cluster *cl, unsigned kind,
                                  const void *data, size_t len);

/* Set the peer up/down callback (one; NULL to clear). */
void srv_cluster_set_peer_cb(struct srv_cluster *cl, srv_cluster_peer_cb cb,
                             void *arg);

/* The identities of the --routes seeds, learned on their links: names
 * gets the name of every seed URL whose handshake told it (this node's
 * own name for a URL that reached this node), up to max, *n their count;
 * returns the first seed URL not identified yet, or NULL when every seed
 * is known. Two URLs of one node (nats:// and nats-route://, a host name
 * and its address) give the same name twice. */
const char *srv_cluster_seed_names(const struct srv_cluster *cl,
                                   const char **names, size_t max, size_t *n);

/* Names of the nodes with an established link, up to max; returns the
 * count. */
size_t srv_cluster_peers(const struct srv_cluster *cl, const char **names,
                         size_t max);

/* JSON for /varz "cluster" (routez false) or for /routez (true); the
 * caller frees it. NULL when out of memory. */
char *srv_cluster_json(const struct srv_cluster *cl, bool routez);

/* ---- internal, shared by srv_cluster.c and srv_cluster_interest.c ---- */

/* Queue a frame on an established link; on overflow the link is dropped
 * and KEEL_ELIMIT returned. */
int srv_cluster_link_send(struct srv_cluster_link *l, unsigned kind,
                          const uint8_t *group, size_t group_len,
                          const void *payload, size_t len);
/* The same with the payload in two parts, a then b. */
int srv_cluster_link_send2(struct srv_cluster_link *l, unsigned kind,
                           const uint8_t *group, size_t group_len,
                           const void *a, size_t alen, const void *b,
                           size_t blen);
/* The established link to the node named name, or NULL. */
struct srv_cluster_link *srv_cluster_peer_link(const struct srv_cluster *cl,
                                               const char *name);
/* Drop a link (it reconnects if this node dialed it). */
void srv_cluster_link_fail(struct srv_cluster_link *l, const char *why);
/* Dispatch one group's message to its registered handler (none: dropped,
 * Raft retries). */
void srv_cluster_on_group(struct srv_cluster *cl, struct srv_cluster_link *l,
                          const uint8_t *g, size_t glen, const uint8_t *p,
                          size_t len);
/* Batching of group frames (srv_cluster_batch.c). add: queue one group
 * message (len <= SRV_CLUSTER_BATCH_ITEM_BYTES_MAX) on l's batch, 0 or
 * KEEL_ENOENT (link down) / KEEL_ENOMEM; flush: send the batch as one
 * frame (nothing when empty); on_group_batch: an inbound GROUP_BATCH
 * payload, 0 or KEEL_EPROTO. */
int srv_cluster_batch_add(struct srv_cluster_link *l, const uint8_t *gid,
                          const void *data, size_t len);
int srv_cluster_batch_add2(struct srv_cluster_link *l, const uint8_t *gid,
                           const void *a, size_t alen, const void *b,
                           size_t blen);
void srv_cluster_batch_flush(struct srv_cluster_link *l);
int srv_cluster_on_group_batch(struct srv_cluster *cl,
                               struct srv_cluster_link *l, const uint8_t *p,
                               size_t len);
/* xorshift64 of the cluster (queue-group choice, backoff jitter). */
uint64_t srv_cluster_rand(struct srv_cluster *cl);
/* Scratch buffer of at least n bytes, or NULL. */
uint8_t *srv_cluster_scratch(struct srv_cluster *cl, size_t n);

/* ---- core NATS interest and forwarding (srv_cluster_interest.c) ---- */

/* What keeld registers with the NATS core (srv_server_set_fwd_hooks, arg
 * the struct srv_cluster): interest and publishes reach the links through
 * these. */
struct srv_fwd_hooks;
extern const struct srv_fwd_hooks srv_cluster_fwd_hooks;

/* A local subscription was added / removed (sub->conn != NULL). */
void srv_cluster_interest_add(struct srv_cluster *cl,
                              const struct srv_sub *sub);
void srv_cluster_interest_remove(struct srv_cluster *cl,
                                 const struct srv_sub *sub);
/* Send every local interest key on a just established link. */
void srv_cluster_interest_resend(struct srv_cluster *cl,
                                 struct srv_cluster_link *l);
/* Forget every interest l's peer told (link down). */
void srv_cluster_interest_drop(struct srv_cluster *cl,
                               struct srv_cluster_link *l);
/* Inbound INTEREST / MSG frame payloads. Return 0 or KEEL_EPROTO. */
int srv_cluster_on_interest(struct srv_cluster *cl, struct srv_cluster_link *l,
                            const uint8_t *p, size_t len);
int srv_cluster_on_msg(struct srv_cluster *cl, struct srv_cluster_link *l,
                       const uint8_t *p, size_t len);

/* One publish being routed: remote interest matched at begin, queue
 * groups decided between local members and remote nodes, frames sent at
 * end (once per node). */
struct srv_cluster_pub {
    struct srv_sublist_result *r; /* remote match, NULL if none */
    int8_t choice[SRV_CLUSTER_QUEUES_PER_MSG_MAX]; /* per r->qgroups */
};

void srv_cluster_pub_begin(struct srv_cluster *cl, const struct srv_cmd *cmd,
                           struct srv_cluster_pub *p);
/* Should the queue group `name` with local_n local members get this
 * message on another node? Decides by weight (members per node). */
bool srv_cluster_pub_queue_remote(struct srv_cluster *cl,
                                  struct srv_cluster_pub *p, const char *name,
                                  size_t name_len, size_t local_n);
/* Forward to each node with interest; returns how many nodes got it. */
size_t srv_cluster_pub_end(struct srv_cluster *cl, struct srv_cluster_pub *p,
                           const struct srv_cmd *cmd);

/* ---- msgpack subset used by the frames (srv_cluster_frame.c) ---- */

struct srv_mp_reader {
    const uint8_t *p;
    const uint8_t *end;
};

/* Writers return the end of what they wrote; the caller sized buf. */
uint8_t *srv_mp_put_array(uint8_t *p, uint32_t n);
uint8_t *srv_mp_put_uint(uint8_t *p, uint64_t v);
uint8_t *srv_mp_put_str(uint8_t *p, const void *s, size_t len);
uint8_t *srv_mp_put_bin_header(uint8_t *p, size_t len);
#define SRV_MP_HEADER_BYTES_MAX 9 /* largest header of any item above */

/* Readers return 0 or KEEL_EPROTO (wrong type, truncated). */
int srv_mp_get_array(struct srv_mp_reader *r, uint32_t *n);
int srv_mp_get_uint(struct srv_mp_reader *r, uint64_t *v);
/* str or bin: a slice into the input. */
int srv_mp_get_bytes(struct srv_mp_reader *r, const uint8_t **s, size_t *len);

/* Decode one frame body (after the 4-byte length): kind, group id and
 * payload slices into body. Returns 0 or KEEL_EPROTO. */
int srv_cluster_frame_decode(const uint8_t *body, size_t len, unsigned *kind,
                             const uint8_t **group, size_t *group_len,
                             const uint8_t **payload, size_t *payload_len);

/* Encode the frame header (length prefix, array, kind, group id, payload
 * bin header) into hdr (at least 32 + group_len bytes); returns its
 * length. The payload bytes follow it. */
size_t srv_cluster_frame_header(uint8_t *hdr, unsigned kind,
                                const uint8_t *group, size_t group_len,
                                size_t payload_len);

#endif
