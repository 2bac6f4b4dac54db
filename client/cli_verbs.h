/* The sub-commands of keel's command groups, in one place: one row
 * X(name, usage, args_min, args_max, fn, help) a verb, name the full
 * "stream add", fn the handler (static in the group's file, which expands
 * its list with CLI_SUBCMD_GROUP, client/cli_js.h). The order is the order
 * 'keel GROUP --help' lists them. keel kv and keel object (KV_VERBS,
 * OBJ_VERBS) run every verb through one runner, so their rows also say
 * which flags a verb takes and whether its bucket must exist.
 */
#ifndef KEEL_CLI_VERBS_H
#define KEEL_CLI_VERBS_H

/* keel stream (cli_stream.c; get: cli_stream_get.c, backup and restore:
 * cli_backup.c, cli_restore.c). */
#define STREAM_VERBS(X)                                                        \
    X("stream add", "NAME", 1, 1, stream_add_edit,                             \
      "Create a stream (flags as 'nats stream add', or --config FILE.json).")  \
    X("stream ls", "", 0, 0, stream_ls, "List the streams with their sizes.")  \
    X("stream info", "NAME", 1, 1, stream_info_rm,                             \
      "Show a stream's config and state.")                                     \
    X("stream edit", "NAME", 1, 1, stream_add_edit,                            \
      "Change a stream's config (only the flags given).")                      \
    X("stream rm", "NAME", 1, 1, stream_info_rm,                               \
      "Delete a stream and all its messages.")                                 \
    X("stream purge", "NAME", 1, 1, stream_purge,                              \
      "Remove messages (all, --subject, --seq, --keep).")                      \
    X("stream get", "NAME SEQ", 1, 2, cli_stream_get,                          \
      "Print one stored message (or --last-for SUBJECT).")                     \
    X("stream backup", "NAME FILE", 2, 2, cli_stream_backup,                   \
      "Write the stream's config and messages to a checksummed archive.")      \
    X("stream restore", "FILE", 1, 1, cli_stream_restore,                      \
      "Recreate a stream from a backup archive (--name to rename).")

/* keel consumer (cli_consumer.c; next: cli_consumer_next.c). */
#define CONSUMER_VERBS(X)                                                      \
    X("consumer add", "STREAM NAME", 2, 2, cons_add,                           \
      "Create a durable consumer (pull, or push with --deliver).")             \
    X("consumer ls", "STREAM", 1, 1, cons_ls, "List a stream's consumers.")    \
    X("consumer info", "STREAM NAME", 2, 2, cons_info_rm,                      \
      "Show a consumer's config and progress.")                                \
    X("consumer rm", "STREAM NAME", 2, 2, cons_info_rm, "Delete a consumer.")  \
    X("consumer next", "STREAM NAME", 2, 2, cli_consumer_next,                 \
      "Fetch and print the next --count messages of a pull consumer.")

/* keel cluster (cli_cluster.c; status: cli_cluster_status.c, orphans:
 * cli_orphans.c). */
#define CLUSTER_VERBS(X)                                                       \
    X("cluster add-peer", "NAME", 1, 1, cluster_add_peer,                      \
      "Add a waiting node to the meta group (learner, then voter).")           \
    X("cluster remove-peer", "NAME", 1, 1, cluster_remove_replace,             \
      "Remove a node from the meta group (refused without a healthy "          \
      "majority); waits until its stream replicas moved.")                     \
    X("cluster replace-peer", "OLD NEW", 2, 2, cluster_remove_replace,         \
      "Add NEW (waits until it is a voter), then remove OLD.")                 \
    X("cluster status", "", 0, 0, cli_cluster_status,                          \
      "Members, meta leader, each node's health, each stream's replicas.")     \
    X("cluster orphans", "ls|rm|restore", 0, 4, cli_cluster_orphans,           \
      "Quarantined data no stream names (docs/design.md §5): list, remove, "  \
      "restore.")                                                              \
    X("cluster transfer-leader", "", 0, 0, cluster_transfer_leader,            \
      "Hand the meta group's (or --stream's) leadership to another voter.")    \
    X("cluster recover", "", 0, 0, cluster_recover,                            \
      "Survey a leaderless group on every node (-s URL,URL,...); "             \
      "--accept-loss applies the plan.")                                       \
    X("cluster lameduck", "", 0, 0, cluster_lameduck,                          \
      "Put the node -s names in lame duck mode: no new clients, its Raft "     \
      "leaderships handed over, then it stops (exit 0).")

/* keel cluster orphans (cli_orphans.c). */
#define ORPHANS_VERBS(X)                                                       \
    X("cluster orphans ls", "", 0, 0, orphans_ls,                              \
      "List every node's orphans (name, size, files)")                         \
    X("cluster orphans rm", "NAME", 1, 1, rm_restore,                          \
      "Delete an orphan for good (asks; --force), --node NAME or found by ls") \
    X("cluster orphans restore", "NAME", 1, 1, rm_restore,                     \
      "Move an orphan back to groups/<hex> (used by its stream after a "       \
      "restart)")

/* keel kv (cli_kv.c, cli_kv_key.c): X(name, usage, args_min, args_max,
 * flags, bind, run, help), flags the KF_ bits of the flags it takes, bind
 * whether its bucket must exist (CLI_VERB_GROUP, client/cli_js.h). */
#define KV_VERBS(X)                                                            \
    X("kv add", "BUCKET", 1, 1, KF_BUCKET, false, cli_kv_add,                  \
      "Create a bucket (--history, --ttl, --max-value-size, --replicas).")     \
    X("kv ls", "", 0, 0, KF_JSON, false, cli_kv_ls, "List the buckets.")       \
    X("kv info", "BUCKET", 1, 1, KF_JSON, false, cli_kv_ls,                    \
      "Show a bucket's settings and size.")                                    \
    X("kv put", "BUCKET KEY [VALUE]", 2, 3, 0, true, kv_put,                   \
      "Set KEY to VALUE (default: read stdin).")                               \
    X("kv get", "BUCKET KEY", 2, 2, KF_GET, true, kv_get,                      \
      "Print a key's value (--raw: only it).")                                 \
    X("kv create", "BUCKET KEY [VALUE]", 2, 3, 0, true, kv_put,                \
      "Set KEY only if it has no value.")                                      \
    X("kv update", "BUCKET KEY VALUE REVISION", 4, 4, 0, true, kv_put,         \
      "Set KEY only if its last revision is REVISION.")                        \
    X("kv del", "BUCKET KEY", 2, 2, KF_FORCE, true, kv_del,                    \
      "Delete KEY (keeps its history).")                                       \
    X("kv purge", "BUCKET KEY", 2, 2, KF_FORCE, true, kv_del,                  \
      "Delete KEY and all its history.")                                       \
    X("kv history", "BUCKET KEY", 2, 2, 0, true, kv_list,                      \
      "List the revisions of KEY.")                                            \
    X("kv keys", "BUCKET", 1, 1, 0, true, kv_list,                             \
      "List the keys that have a value.")                                      \
    X("kv watch", "BUCKET [KEY]", 1, 2, KF_COUNT, true, kv_watch,              \
      "Print values, then changes, of KEY (wildcards) or all keys.")           \
    X("kv rm", "BUCKET", 1, 1, KF_FORCE, true, kv_del,                         \
      "Delete a bucket and all its keys.")

/* keel object (cli_obj.c, cli_obj_data.c, cli_obj_list.c): rows as
 * KV_VERBS's, flags the OF_ bits. */
#define OBJ_VERBS(X)                                                           \
    X("object add", "BUCKET", 1, 1, OF_BUCKET | OF_DESC | OF_JSON, false,      \
      obj_add, "Create a bucket (--ttl, --replicas, --max-bucket-size).")      \
    X("object put", "BUCKET [FILE]", 1, 2,                                     \
      OF_NAME | OF_DESC | OF_HEADER | OF_PROGRESS | OF_FORCE, true,            \
      cli_obj_put, "Store FILE (stdin with --name) as an object, in chunks.")  \
    X("object get", "BUCKET NAME", 2, 2, OF_OUTPUT | OF_PROGRESS | OF_FORCE,   \
      true, cli_obj_get,                                                       \
      "Write an object to a file (-O FILE, - for stdout); checks its "         \
      "digest.")                                                               \
    X("object ls", "[BUCKET]", 0, 1, OF_NAMES | OF_JSON, true, cli_obj_ls,     \
      "List the buckets, or the objects of BUCKET.")                           \
    X("object info", "BUCKET [NAME]", 1, 2, OF_JSON, true, obj_info,           \
      "Show a bucket's settings, or an object's size, chunks and digest.")     \
    X("object del", "BUCKET [NAME]", 1, 2, OF_FORCE, true, obj_rm,             \
      "Delete an object (its chunks are purged), or the whole bucket.")        \
    X("object rm", "BUCKET [NAME]", 1, 2, OF_FORCE, true, obj_rm,              \
      "The same as del.")                                                      \
    X("object seal", "BUCKET", 1, 1, OF_FORCE, true, obj_seal,                 \
      "Seal a bucket: no more puts or deletes, for good.")                     \
    X("object watch", "BUCKET", 1, 1, OF_COUNT, true, cli_obj_watch,           \
      "Print the objects, then every put and delete.")

#endif
