/* Every loop, queue and batch in Keel has a named maximum here. Each module
 * owns its section; relations between limits are checked at compile time.
 */
#ifndef KEEL_LIMITS_H
#define KEEL_LIMITS_H

/* ---- server: NATS protocol and connections ---- */
#define SRV_CONTROL_LINE_BYTES_MAX 4096
#define SRV_PAYLOAD_BYTES_DEFAULT (1024 * 1024)
#define SRV_PAYLOAD_BYTES_MAX (8 * 1024 * 1024)
#define SRV_CONN_WRITE_BYTES_MAX (64 * 1024 * 1024)
#define SRV_CONNS_MAX 65536
#define SRV_LISTEN_BACKLOG 1024 /* pending accepts of the client port */
/* Lame duck mode: how often it checks the leaderships left, how often it
 * starts another transfer round (past a transfer's election-timeout
 * deadline), and when it stops anyway. */
#define SRV_LDM_TICK_MS 20
#define SRV_LDM_RETRY_MS 1500
#define SRV_LDM_HANDOFF_MS_MAX 10000
#define SRV_SUBS_PER_CONN_MAX 65536
#define SRV_SUBJECT_TOKENS_MAX 64
#define SRV_PING_INTERVAL_MS_DEFAULT (2 * 60 * 1000)
#define SRV_PINGS_OUTSTANDING_MAX 2

_Static_assert(SRV_PAYLOAD_BYTES_DEFAULT <= SRV_PAYLOAD_BYTES_MAX,
               "default payload must fit the hard maximum");
_Static_assert(SRV_PAYLOAD_BYTES_MAX < SRV_CONN_WRITE_BYTES_MAX,
               "one maximal message must fit a connection's write queue");
#define SRV_READ_BYTES (64 * 1024)
#define SRV_PROTO_ARGS_MAX 8
#define SRV_SUBLIST_CACHE_MAX 4096
/* Subjects that missed the match cache once, by hash: a subject enters the
 * cache at its second miss (server/nats/srv_sublist.c). */
#define SRV_SUBLIST_SEEN_SLOTS 1024
#define SRV_QUEUE_GROUPS_MAX 4096
#define SRV_CONFIG_BYTES_MAX (1024 * 1024)
#define SRV_CONFIG_DEPTH_MAX 16
#define SRV_CONFIG_KEYS_MAX 4096
#define SRV_CLOSE_FLUSH_MS_MAX 2000
/* A conn closed after an -ERR lingers (FIN sent, input discarded) until the
 * peer closes, at most this long and this much, so the close is not a RST
 * that loses the -ERR (srv_conn.c). */
#define SRV_CLOSE_LINGER_MS 1000
#define SRV_CLOSE_DRAIN_BYTES_MAX (4u * 1024 * 1024)
/* Output blocks (srv_outq): a conn's queue is a chain of these, written
 * with one writev of up to SRV_OUT_IOV_MAX blocks; freed blocks are kept
 * for reuse up to SRV_OUT_POOL_BLOCKS_MAX per server (16 MiB). */
#define SRV_OUT_BLOCK_BYTES (64 * 1024 - 32)
#define SRV_OUT_IOV_MAX 64
#define SRV_OUT_POOL_BLOCKS_MAX 256
/* Output is written as soon as a conn has this much queued, not only at
 * the end of the loop iteration: receivers start reading sooner and the
 * queue stays a few blocks long. */
#define SRV_CONN_FLUSH_BYTES (256 * 1024)
#define SRV_HMAP_SLOTS_MAX (1u << 30)
#define SRV_INFO_LINE_BYTES_MAX 2048
/* A publisher whose fan-out leaves a receiver with more than half its
 * max_pending (capped at this) queued stops being read until the receiver
 * drains or SRV_STALL_MS passes, so fast producers slow down to their
 * consumers instead of cutting them off as slow consumers. */
#define SRV_CONN_STALL_BYTES (64 * 1024 * 1024)
#define SRV_STALL_MS 100

/* ---- shared: password hashes (common/keel_passwd.c) ---- */
#define KEEL_PASSWD_BYTES_MAX 1024
#define KEEL_PASSWD_SALT_BYTES 16
#define KEEL_PASSWD_HASH_BYTES 32 /* PBKDF2-HMAC-SHA256 output */
#define KEEL_PASSWD_STRING_BYTES 160
#define KEEL_PASSWD_ITER_DEFAULT 200000
#define KEEL_PASSWD_ITER_MIN 1000
#define KEEL_PASSWD_ITER_MAX 10000000

/* ---- server: security (srv_auth, srv_tls) ---- */
#define SRV_AUTH_USERS_MAX 1024 /* users in the authorization block */
#define SRV_AUTH_PERMS_MAX 256  /* subjects in one allow/deny list */
/* A user name, password or token; keel passwd hashes passwords this long. */
#define SRV_AUTH_SECRET_BYTES_MAX KEEL_PASSWD_BYTES_MAX
/* Password hashes verified on the worker pool at once; CONNECTs past it
 * are refused ('Authorization Violation') so a flood cannot queue
 * unbounded work. */
#define SRV_AUTH_VERIFY_INFLIGHT_MAX 64
/* Time from accept to CONNECT: nats-server's 2 s when auth is required,
 * a looser bound otherwise (an idle socket still holds a conn slot). */
#define SRV_AUTH_TIMEOUT_MS_DEFAULT 2000
#define SRV_CONNECT_TIMEOUT_MS_DEFAULT 10000
#define SRV_AUTH_TIMEOUT_MS_MAX (10 * 60 * 1000)
/* Input held while a CONNECT's password hash is checked: the rest of the
 * read that carried it (reading is paused meanwhile). */
#define SRV_AUTH_HELD_BYTES_MAX SRV_READ_BYTES
/* allow_responses: replies per request, and request reply subjects one
 * conn remembers (past it they are forgotten all at once). */
#define SRV_AUTH_RESPONSES_PER_REQUEST_MAX 65536
#define SRV_AUTH_REPLIES_PER_CONN_MAX 4096
#define SRV_HEADER_BYTES_DEFAULT (64 * 1024)
#define SRV_TLS_TIMEOUT_MS_DEFAULT 2000
/* Plaintext produced by one TLS read step before it is handed on. */
#define SRV_TLS_CHUNK_BYTES (16 * 1024)
/* Cluster links (srv_auth_route, srv_cluster_tls): HELLO nonce, the
 * HMAC-SHA256 proof, plaintext encrypted per link flush (bounds the
 * ciphertext held outside the link's queue), and decrypt rounds per read
 * (a read of SRV_READ_BYTES yields at most two rounds of plaintext). */
#define SRV_ROUTE_NONCE_BYTES 32
#define SRV_ROUTE_PROOF_BYTES 32
#define SRV_CLUSTER_TLS_BATCH_BYTES (256 * 1024)
#define SRV_CLUSTER_TLS_READ_ROUNDS_MAX 8
/* Link refusals (bad route proof, failed TLS handshake) logged per second;
 * the rest are counted in one line. */
#define SRV_CLUSTER_REFUSE_LOGS_PER_SEC 10
/* A monitoring (https) certificate or key PEM file. */
#define SRV_MON_TLS_PEM_BYTES_MAX (1024 * 1024)
/* A $JS.API request body is refused unparsed past this: room for a stream
 * config with every subject at its longest (asserted below, after the
 * JetStream section), far below what max_payload may be raised to. */
#define SRV_JS_API_REQUEST_BYTES_MAX (1280u * 1024)

/* ---- server: JetStream API (srv_js_*, srv_stream_*, srv_consumer_*) ---- */
#define SRV_JS_ERR_DESC_BYTES_MAX 512
#define SRV_JS_NAME_BYTES_MAX 255
/* jetstream { domain }: nats-server has no bound; $JS.<domain>.API. must
 * fit a subject with room for the longest API name after it. */
#define SRV_JS_DOMAIN_BYTES_MAX 64
#define SRV_JS_SUBJECTS_MAX 1024
/* A stream's `sources` (nats-server has no bound; each is read by the
 * leader's pump in turn, docs/jetstream-config.md "Sources"). */
#define SRV_JS_SOURCES_MAX 32
/* A mirror's or one source's `subject_transforms` (nats-server has no
 * bound; each is a filter of the origin's read, sent whole on a read
 * through the cluster, docs/jetstream-config.md "Mirrors"). */
#define SRV_JS_FEED_XFORMS_MAX 16
#define SRV_JS_SUBJECT_BYTES_MAX 1024
#define SRV_JS_REPLICAS_MAX 5
#define SRV_JS_DUPLICATE_WINDOW_NS_DEFAULT (120LL * 1000 * 1000 * 1000)
/* nats-server refuses a shorter max_age in a create or update (10052). */
#define SRV_JS_MAX_AGE_NS_MIN (100LL * 1000 * 1000)
#define SRV_JS_ACK_WAIT_NS_DEFAULT (30LL * 1000 * 1000 * 1000)
#define SRV_JS_MAX_ACK_PENDING_DEFAULT 1000
#define SRV_JS_MAX_WAITING_DEFAULT 512
#define SRV_JS_INACTIVE_NS_DEFAULT (5LL * 1000 * 1000 * 1000)
#define SRV_JS_HEARTBEAT_NS_MIN (100LL * 1000 * 1000)
#define SRV_JS_FSYNC_INTERVAL_MS_MAX (60 * 1000)
/* Nats-Msg-Ids remembered per stream inside duplicate_window; past it the
 * oldest is forgotten early (a late duplicate is then stored). */
#define SRV_JS_DEDUPE_IDS_MAX (1024 * 1024)
/* ---- server: JetStream streams (srv_js, srv_stream) ---- */
#define SRV_STREAM_MSGS_MAX (64u * 1024 * 1024) /* seqs one stream tracks */
#define SRV_STREAM_SCAN_MAX 4096 /* seqs one srv_stream_next_seq visits */
/* A stream leader proposes a retention cut (docs/design.md §5) once this many
 * log entries below its first live message are not covered by one. */
#define SRV_STREAM_CUT_ENTRIES_MIN 1024
#define SRV_JS_STREAMS_MAX 16384 /* streams per node */
#define SRV_JS_PENDING_MAX 65536 /* requests awaiting commit per node */
#define SRV_JS_LIST_PAGE 256     /* STREAM.NAMES / LIST page size */
#define SRV_JS_MSG_BYTES_MAX (8u * 1024 * 1024) /* one stored message */
/* One DIRECT.GET reply (srv_js_direct.c): messages of a batch or of a
 * multi_last (nats-server's 413 past it), the bytes after which it stops
 * (its max_bytes default and ceiling; one message always goes), and the
 * multi_last filters of one request. */
#define SRV_JS_DIRECT_BATCH_MAX 1024
#define SRV_JS_DIRECT_BYTES_MAX (8u * 1024 * 1024)
#define SRV_JS_DIRECT_FILTERS_MAX 1024
/* Consumers (srv_consumer_*). */
#define SRV_JS_BACKOFF_MAX 64                  /* backoff durations */
#define SRV_CONSUMERS_PER_STREAM_MAX 4096      /* consumers of one stream */
#define SRV_CONSUMER_ACKED_MAX (1024 * 1024)   /* sparse acks above floor */
#define SRV_CONSUMER_ENTRY_ACKS_MAX 4096       /* acks in one entry */
#define SRV_CONSUMER_PENDING_MAX (1024 * 1024) /* delivered, unacked */
#define SRV_CONSUMER_BATCH_MAX 10000           /* messages per pull request */
#define SRV_CONSUMER_DELIVER_PER_RUN_MAX 256   /* deliveries per loop turn */
#define SRV_CONSUMER_SNAP_BYTES_MAX (64u * 1024 * 1024)
/* The engine's timer: pull expiry, heartbeats, ack_wait redelivery and
 * ephemeral reaping are checked this often (and every loop iteration). */
#define SRV_CONSUMER_TICK_MS 10
#define SRV_CONSUMER_FC_BYTES (1024 * 1024) /* push bytes per flow control */
/* Ack none consumers record their delivered position at most this often. */
#define SRV_CONSUMER_DELIVERED_PROP_MS 1000

_Static_assert(SRV_CONSUMER_ENTRY_ACKS_MAX <= SRV_CONSUMER_ACKED_MAX,
               "one ack entry must fit the acked set");

/* ---- server: server_tags and placement.tags (srv_tags.h) ---- */
#define SRV_TAGS_MAX 16
#define SRV_TAG_BYTES 64

/* ---- server: cluster links (srv_cluster*) ---- */
#define SRV_CLUSTER_NODES_MAX 16     /* known nodes (seeds + gossip) */
#define SRV_CLUSTER_LINKS_MAX 64     /* links, handshaking ones too */
#define SRV_CLUSTER_GROUPS_MAX 32768 /* registered group handlers */
#define SRV_CLUSTER_FRAME_BYTES_MAX (16 * 1024 * 1024) /* one frame */
#define SRV_CLUSTER_LINK_PENDING_BYTES_MAX (64 * 1024 * 1024)
/* A group frame too large to join a batch (AppendEntries with payloads,
 * InstallSnapshot chunks) is held back, as a lost message Raft sends
 * again, while its link already queues this much: a follower that reads
 * slower than its leaders send gets a bounded backlog, never a dropped
 * link (finding F25, decision 0040). */
#define SRV_CLUSTER_LINK_GROUP_BYTES_MAX (8 * 1024 * 1024)
#define SRV_CLUSTER_TICK_MS 100       /* reconnect and heartbeat clock */
#define SRV_CLUSTER_PING_MS 1000      /* one ping per link per interval */
#define SRV_CLUSTER_DEAD_MS 5000      /* silence that drops a link */
#define SRV_CLUSTER_HANDSHAKE_MS 3000 /* HELLO must arrive within this */
#define SRV_CLUSTER_BACKOFF_MS_MIN 50
#define SRV_CLUSTER_BACKOFF_MS_MAX 5000
/* Route host names resolved at once (uv_getaddrinfo runs on the worker
 * pool that snapshot writes and password checks share: a hung resolver
 * holds at most this many of its 4 threads), and how long one lookup may
 * take before the node is redialed (the stuck lookup keeps its slot
 * until the resolver gives up). */
#define SRV_CLUSTER_RESOLVES_MAX 2
#define SRV_CLUSTER_RESOLVE_MS 10000
#define SRV_CLUSTER_FRAMES_PER_READ_MAX 100000 /* frames parsed per read */
/* Group messages up to this size share a GROUP_BATCH frame per link and
 * loop iteration, up to SRV_CLUSTER_BATCH_BYTES_MAX of them; larger ones
 * (AppendEntries with payloads) are framed alone, not copied twice. */
#define SRV_CLUSTER_BATCH_ITEM_BYTES_MAX 2048
#define SRV_CLUSTER_BATCH_BYTES_MAX (256 * 1024)
#define SRV_CLUSTER_QUEUES_PER_MSG_MAX 64 /* queue groups named in one MSG */
#define SRV_CLUSTER_INTEREST_MAX (1024 * 1024) /* subject/queue keys */
#define SRV_CLUSTER_ROUTEZ_SUBS_MAX 1024 /* interest keys listed per link */

_Static_assert(SRV_CLUSTER_PING_MS * 3 <= SRV_CLUSTER_DEAD_MS,
               "a link must miss several pings before it is dead");
_Static_assert(SRV_CLUSTER_FRAME_BYTES_MAX < SRV_CLUSTER_LINK_PENDING_BYTES_MAX,
               "a link queue must hold at least one frame");
_Static_assert(SRV_CLUSTER_LINK_GROUP_BYTES_MAX +
                       2 * SRV_CLUSTER_FRAME_BYTES_MAX <
                   SRV_CLUSTER_LINK_PENDING_BYTES_MAX,
               "held-back group frames must leave room for the rest");

/* ---- server: monitoring (srv_monitor*, srv_metrics*) ---- */
/* Conns copied into one stats snapshot (/connz lists at most these). */
#define SRV_MON_CONNS_MAX 4096
/* /connz default and largest page. */
#define SRV_MON_CONNZ_LIMIT_DEFAULT 1024
/* The HTTP thread waits this long for the loop to refresh the snapshot,
 * then serves the previous one. */
#define SRV_MON_REFRESH_WAIT_MS 1000
/* Applied this far behind commit counts as "not caught up" in /healthz. */
#define SRV_MON_HEALTH_LAG_MAX 10000
/* Buckets of the latency histograms in /metrics (the last is +Inf). */
#define SRV_MON_HIST_BUCKETS 16
/* Bytes of one /metrics or /jsz body. */
#define SRV_MON_BODY_BYTES_MAX (16u * 1024 * 1024)

/* ---- server: JetStream across the cluster (srv_js_cluster*, srv_js_meta*)
 */
#define SRV_JSC_NODES_MAX 64     /* node directory entries */
#define SRV_JSC_SEEDS_BYTES 2048 /* canonical sorted seed list */
/* A solo seed (its routes reach only itself) waits this long after its
 * links start before it creates the meta group alone: more than the
 * redial backoff maximum (5 s + 25 % jitter) plus a handshake (3 s), so
 * the nodes of an existing cluster link to a restarted seed first. */
#define SRV_JSC_SOLO_WAIT_MS 10000
#define SRV_JSC_TICK_MS 100          /* bootstrap check and announce clock */
#define SRV_JSC_ANNOUNCE_MS 2000     /* leaders re-announce this often */
#define SRV_JSC_LEADER_STALE_MS 7000 /* an unrefreshed leader is forgotten */
#define SRV_JSC_ELECTION_MS 1000     /* election timeout of clustered groups */
#define SRV_JSC_HEARTBEAT_MS 150
/* Meta entries applied per loop turn (replica_options.apply_turn_max): a
 * node catching up thousands of stream creates applies them over many
 * short turns, its links' pings in between. */
#define SRV_JS_META_APPLY_TURN_MAX 4
/* Bytes of one stream entry beyond its message and subject, plus the
 * AppendEntries and frame framing around one entry. */
#define SRV_JSC_ENTRY_OVERHEAD_BYTES (64 * 1024)
/* AppendEntries are split by bytes to fit one frame; one entry must fit. */
_Static_assert(SRV_JS_API_REQUEST_BYTES_MAX >=
                   SRV_JS_SUBJECTS_MAX * (SRV_JS_SUBJECT_BYTES_MAX + 3) +
                       64 * 1024,
               "a stream config with every subject must fit one request");
_Static_assert(SRV_JS_MSG_BYTES_MAX + SRV_JS_SUBJECT_BYTES_MAX +
                       SRV_JSC_ENTRY_OVERHEAD_BYTES <=
                   SRV_CLUSTER_FRAME_BYTES_MAX,
               "one stream entry must fit one cluster frame");
_Static_assert(SRV_JSC_LEADER_STALE_MS >= 3 * SRV_JSC_ANNOUNCE_MS,
               "a leader must miss several announcements to be forgotten");

/* ---- server: JetStream request forwarding (srv_js_forward*) ---- */
/* A request whose leader is unknown (a new stream's first election, a
 * failover) waits this long for one, then gets the 503 answer. */
#define SRV_JS_FWD_PARK_MS 3000
#define SRV_JS_FWD_PARK_TICK_MS 20  /* parked requests retried this often */
#define SRV_JS_FWD_PARKED_MAX 16384 /* requests waiting at once */
#define SRV_JS_FWD_PARKED_BYTES_MAX (64u * 1024 * 1024) /* their bytes */
/* Forwarded STREAM.CREATEs remembered, and answers held, until the node
 * they came through applied the create (a ring; the oldest is dropped). */
#define SRV_JS_FWD_AWAIT_MAX 64
_Static_assert(SRV_JS_FWD_PARK_MS >= 2 * SRV_JSC_ELECTION_MS,
               "a parked request must outlast a first election");

/* ---- store ---- */
#define STORE_SEGMENT_BYTES_DEFAULT (64u * 1024 * 1024)
#define STORE_SEGMENT_BYTES_MIN (8u * 1024)
#define STORE_SEGMENT_BYTES_MAX (1024u * 1024 * 1024)
#define STORE_RECORD_PAYLOAD_BYTES_MAX (SRV_PAYLOAD_BYTES_MAX + 64 * 1024)
#define STORE_SEGMENTS_PER_GROUP_MAX 65536
#define STORE_GROUPS_MAX 65536
#define STORE_APPEND_RECORDS_MAX 4096
#define STORE_BATCH_BYTES_MAX (16u * 1024 * 1024)
#define STORE_GROUP_OPS_MAX 64
#define STORE_SYNC_THREADS_DEFAULT 2
#define STORE_SYNC_THREADS_MAX 16
#define STORE_EVENTS_MAX 65536
#define STORE_REPORT_RANGES_MAX 64
#define STORE_SCAN_RECORDS_MAX (STORE_SEGMENT_BYTES_MAX / 48)
#define STORE_SCAN_READ_BYTES (1024u * 1024)  /* one recovery-scan read */
#define STORE_READ_RANGE_BYTES (1024u * 1024) /* one store_read_range pread */
/* One repaired run: a damaged run is verified as a whole (finding F12: a
 * power loss under interval left 5,377 records in one run), so up to a
 * segment of minimal records; the driver bounds the bytes it collects. */
#define STORE_REPAIR_RECORDS_MAX STORE_SCAN_RECORDS_MAX
#define STORE_REPAIR_BYTES_MAX (64u * 1024 * 1024)
#define STORE_VOTE_BYTES_MAX 64
#define STORE_PATH_BYTES_MAX 4096
#define STORE_DIR_ENTRIES_MAX (2 * STORE_SEGMENTS_PER_GROUP_MAX)
#define STORE_ZERO_CHUNK_BYTES (1024u * 1024)
#define STORE_INTERVAL_MS_MAX (10 * 60 * 1000)
#define STORE_META_MAP_BYTES (256ull * 1024 * 1024)

_Static_assert(STORE_SEGMENT_BYTES_MIN <= STORE_SEGMENT_BYTES_DEFAULT,
               "default segment size must respect the minimum");
_Static_assert(STORE_SEGMENT_BYTES_DEFAULT <= STORE_SEGMENT_BYTES_MAX,
               "default segment size must respect the maximum");
_Static_assert(STORE_RECORD_PAYLOAD_BYTES_MAX <= STORE_BATCH_BYTES_MAX,
               "one maximal record must fit a write batch");

/* ---- raft ---- */
#define RAFT_SERVERS_MAX 16 /* servers (voters + learners) per group */
/* How often a leader alone in its configuration ticks (it has no one to
 * heartbeat). */
#define RAFT_LONE_LEADER_TICK_MS 60000
#define RAFT_LOG_RUNS_MAX 65536 /* (first index, term) runs kept in memory */
#define RAFT_CONFIGS_MAX 32     /* configuration entries tracked in the log */
#define RAFT_APPEND_ENTRIES_MAX 64   /* entries in one AppendEntries */
#define RAFT_PROPOSE_ENTRIES_MAX 256 /* entries in one proposal */
#define RAFT_OUT_ENTRIES_MAX 256     /* entries to persist from one step */
#define RAFT_OUT_MSGS_MAX 64         /* messages out of one step */
#define RAFT_INFLIGHT_MAX 8          /* AppendEntries in flight per follower */
#define RAFT_READS_MAX 64            /* pending read-index requests */
#define RAFT_OUT_READS_MAX 64        /* read-index results out of one step */
#define RAFT_OUT_REPAIRS_MAX 64      /* copies of faulty records per step */
#define RAFT_CONFIG_BYTES_MAX (8 + RAFT_SERVERS_MAX * 17)
#define RAFT_MSG_BYTES_MAX (64 * 1024 * 1024) /* one encoded frame */
#define RAFT_ENTRY_BYTES_MAX (16 * 1024 * 1024)

_Static_assert(RAFT_APPEND_ENTRIES_MAX <= RAFT_OUT_ENTRIES_MAX,
               "one AppendEntries must fit one step's output");
_Static_assert(RAFT_APPEND_ENTRIES_MAX <= RAFT_OUT_REPAIRS_MAX,
               "every copy one AppendEntries carries must fit one step");
_Static_assert(RAFT_PROPOSE_ENTRIES_MAX <= RAFT_OUT_ENTRIES_MAX,
               "one proposal must fit one step's output");
_Static_assert(2 * RAFT_SERVERS_MAX <= RAFT_OUT_MSGS_MAX,
               "a broadcast (plus replies) must fit one step's output");

/* ---- server/replica (the Raft driver) ---- */
#define REPLICA_GROUPS_MAX 32768 /* groups one host drives */
#define REPLICA_QUEUE_MAX 8192   /* proposals queued + awaiting apply */
#define REPLICA_EVENTS_MAX 256   /* store events drained per pass */
/* A Raft tick this late (ms) came after a loop turn that held the loop:
 * it waits for the turn's reads first (replica.c on_timer). */
#define REPLICA_LATE_TICK_MS 100
#define REPLICA_HELD_MSGS_MAX 64 /* messages held until hard state syncs */
/* The leader's send cache (replica_cache.c): recent proposals by index,
 * at most 2 MiB per leading group. */
#define REPLICA_SEND_CACHE_ENTRIES 512
#define REPLICA_SEND_CACHE_ITEM_BYTES 4096
_Static_assert(RAFT_PROPOSE_ENTRIES_MAX < REPLICA_SEND_CACHE_ENTRIES,
               "a proposal step never evicts its own entries");
#define REPLICA_STEP_LOOPS_MAX 1024 /* apply/step rounds per drive */
/* Snapshots (docs/design.md §5): a group snapshots its state machine once this
 * many entries, or entry bytes, were applied since its last snapshot
 * (replica_options may lower them: tests). */
#define REPLICA_SNAP_ENTRIES_DEFAULT (64u * 1024)
#define REPLICA_SNAP_BYTES_DEFAULT (64ull * 1024 * 1024)
/* Background scrub (replica_scrub.c): one tick every REPLICA_SCRUB_TICK_MS
 * reads at most REPLICA_SCRUB_TICK_BYTES_MAX (one bounded stall of the
 * loop) in at most REPLICA_SCRUB_TICK_RUNS_MAX runs beyond one per group;
 * a full pass takes SRV_SCRUB_PASS_MS_DEFAULT unless configured. */
#define REPLICA_SCRUB_TICK_MS 100
#define REPLICA_SCRUB_TICK_BYTES_MAX (4u * 1024 * 1024)
#define REPLICA_SCRUB_TICK_RUNS_MAX 64
#define SRV_SCRUB_PASS_MS_DEFAULT (24ull * 3600 * 1000)

/* ---- snapshot ---- */
/* One state-machine body; one read/write/hash step of a file. */
#define SNAP_BODY_BYTES_MAX (256ull * 1024 * 1024)
#define SNAP_IO_BYTES (1024u * 1024)
/* Names scanned in a group's snap/ directory; orphan names listed. */
#define SNAP_DIR_ENTRIES_MAX 4096
#define SNAP_ORPHANS_MAX 4096
/* InstallSnapshot: data bytes per chunk, bytes per transfer, records per
 * store append while installing the retained log. */
#define SNAP_CHUNK_DATA_BYTES (256u * 1024)
#define SNAP_INSTALL_BYTES_MAX (64ull * 1024 * 1024 * 1024)
#define SNAP_INSTALL_BATCH_RECORDS 256

_Static_assert(SNAP_INSTALL_BATCH_RECORDS <= STORE_APPEND_RECORDS_MAX,
               "an install batch must fit one store append");
_Static_assert(SNAP_CHUNK_DATA_BYTES + 64 <= RAFT_MSG_BYTES_MAX,
               "one chunk must fit one Raft frame");

/* ---- client (keel CLI) ---- */
#define CLI_ARGS_MAX 8
#define CLI_LIST_ITEMS_MAX 32
#define CLI_SERVERS_MAX 16
#define CLI_SERVERS_BYTES_MAX 4096
#define CLI_TIMEOUT_MS_DEFAULT 5000
#define CLI_TIMEOUT_MS_MAX (24ll * 60 * 60 * 1000)
#define CLI_COUNT_MAX (1000ll * 1000 * 1000 * 1000)
#define CLI_BODY_BYTES_MAX SRV_PAYLOAD_BYTES_MAX
#define CLI_HEADER_KEY_BYTES_MAX 256
#define CLI_WAIT_SLICE_MS 1000
#define CLI_BENCH_CONNS_MAX 256
#define CLI_BENCH_MSGS_MAX (1000ll * 1000 * 1000)
#define CLI_BENCH_REQ_MSGS_MAX (10ll * 1000 * 1000)
#define CLI_BENCH_SIZE_BYTES_MAX SRV_PAYLOAD_BYTES_MAX
#define CLI_BENCH_IO_BUF_BYTES (1024 * 1024)
#define CLI_BENCH_PENDING_MSGS (1024 * 1024)
#define CLI_BENCH_STALL_MS_DEFAULT 10000
#define CLI_BENCH_WAIT_MS_MAX (60ll * 60 * 1000)
#define CLI_BENCH_TICK_MS 100
#define CLI_BENCH_FETCH_BATCH_MAX 10000 /* messages per pull request */
#define CLI_BENCH_MODES_MAX 5 /* MODE words of a bench command, and NULL */
#define CLI_BENCH_KV_KEYS_MAX 1000000 /* keel bench kv: keys k000000.. */
/* Human output (cli_fmt): table rows kept (more are counted), columns. */
#define CLI_TABLE_ROWS_MAX 1024
#define CLI_TABLE_COLS_MAX 8
#define CLI_TABLE_CELL_BYTES 256 /* a cell an ls row makes (cli_js_rows) */
#define CLI_PROGRESS_MS 200      /* progress bar redraw interval */
/* JetStream commands: pages read by ls (x 256 names), messages per
 * consumer next, and the backup archive (cli_backup). */
#define CLI_JS_PAGES_MAX 64
#define CLI_NEXT_MSGS_MAX 100000
#define CLI_BACKUP_MSGS_MAX (1ll << 40)
#define CLI_BACKUP_CONFIG_BYTES_MAX (1024 * 1024)
#define CLI_BACKUP_WINDOW 1024     /* restore: publishes in flight */
#define CLI_SUBJECT_BYTES_MAX 1024 /* an API subject or message subject */
/* keel store dump (cli_store*.c): group directories listed, streams named
 * by the meta log, meta entries decoded. */
#define CLI_STORE_GROUPS_MAX 32768
#define CLI_STORE_STREAMS_MAX 32768

_Static_assert(CLI_SERVERS_MAX <= CLI_LIST_ITEMS_MAX,
               "a server list must fit one parsed list");
_Static_assert(CLI_BENCH_SIZE_BYTES_MAX <= SRV_PAYLOAD_BYTES_MAX,
               "a bench message must fit the server's payload maximum");

#endif
