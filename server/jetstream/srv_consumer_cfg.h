/* srv_consumer_cfg: JetStream consumer config (docs/protocol.md §2.6) parsed
 * from JSON with every default filled, validated, encoded back with the
 * optional fields absent when empty (a pull consumer has NO deliver_subject
 * key: clients treat any value there as push), and the rules for what a
 * config update may change. Pure: no I/O, no clock. */
#ifndef KEEL_SRV_CONSUMER_CFG_H
#define KEEL_SRV_CONSUMER_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "keel/assert.h"
#include "keel/limits.h"
#include "srv_js_err.h"

enum srv_deliver_policy {
    SRV_DELIVER_ALL = 0,
    SRV_DELIVER_LAST,
    SRV_DELIVER_NEW,
    SRV_DELIVER_BY_START_SEQ,
    SRV_DELIVER_BY_START_TIME,
    SRV_DELIVER_LAST_PER_SUBJECT,
};

enum srv_ack_policy {
    SRV_ACKP_NONE = 0,
    SRV_ACKP_ALL,
    SRV_ACKP_EXPLICIT,
};

enum srv_replay_policy { SRV_REPLAY_INSTANT = 0, SRV_REPLAY_ORIGINAL };

struct srv_consumer_config {
    char durable_name[SRV_JS_NAME_BYTES_MAX + 1]; /* "" = ephemeral */
    char name[SRV_JS_NAME_BYTES_MAX + 1];         /* "" until named */
    char *description;                            /* NULL when absent */
    enum srv_deliver_policy deliver_policy;
    uint64_t opt_start_seq;    /* by_start_sequence only */
    int64_t opt_start_time_ns; /* by_start_time only; Unix ns */
    enum srv_ack_policy ack_policy;
    int64_t ack_wait_ns;
    int64_t max_deliver; /* -1 = unlimited */
    int64_t *backoff_ns; /* NULL when absent */
    uint32_t nbackoff;
    /* At most one of filter_subject / filter_subjects is set. */
    char *filter_subject; /* NULL when absent */
    char **filter_subjects;
    uint32_t nfilter_subjects;
    enum srv_replay_policy replay_policy;
    int64_t max_ack_pending; /* 0 = unlimited (ack none) */
    int64_t max_waiting;     /* pull only */
    int64_t inactive_threshold_ns;
    bool flow_control, headers_only, mem_storage;
    char *deliver_subject; /* NULL = pull */
    char *deliver_group;   /* NULL when absent */
    int64_t idle_heartbeat_ns;
    int64_t max_batch, max_expires_ns, max_bytes; /* pull limits, 0 = none */
    int64_t num_replicas;                         /* 0 = the stream's */
    int64_t pause_until_ns; /* 0 = not paused (srv_consumer_pause.c) */
    int64_t rate_limit_bps; /* push only: bits per second, 0 = none */
    json_t *metadata;       /* owned; NULL when absent or empty */
};

/* Parse a consumer config object (the create body's "config" or an info's
 * "config"). Unknown fields are ignored; defaults are filled (ack_wait 30 s,
 * max_deliver -1, max_ack_pending 1000 unless ack none, max_waiting 512 for
 * pull, inactive_threshold 5 s for ephemerals, name = durable_name). On an
 * invalid value returns KEEL_EINVAL, sets *jerr (SRV_JS_ECONSUMER_CONFIG,
 * SRV_JS_EHEARTBEAT_MIN or SRV_JS_EBAD_REQUEST) and writes the description
 * for the client into errmsg. On success *out owns its memory: free with
 * srv_consumer_config_free. *out is zeroed first, so free is always safe. */
KEEL_MUST_USE int srv_consumer_config_parse(const json_t *j,
                                            struct srv_consumer_config *out,
                                            enum srv_js_err *jerr,
                                            char *errmsg);

/* Encode cfg to a new JSON object (caller json_decref's it). Always present:
 * deliver_policy, ack_policy, replay_policy, num_replicas; ack_wait and
 * max_deliver when non-zero; everything else only when set. Returns 0 or
 * KEEL_ENOMEM. */
KEEL_MUST_USE int
srv_consumer_config_encode(const struct srv_consumer_config *cfg, json_t **out,
                           char *errmsg);

/* True when a and b encode equal (defaults filled either way). */
bool srv_consumer_config_equal(const struct srv_consumer_config *a,
                               const struct srv_consumer_config *b);

/* Deep copy of src into *dst (zeroed first). Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int
srv_consumer_config_copy(struct srv_consumer_config *dst,
                         const struct srv_consumer_config *src, char *errmsg);

/* May an existing consumer with config old take config new? The delivery
 * position and the kind of consumer are fixed at creation: deliver_policy,
 * opt_start_seq/time, ack_policy, replay_policy, push vs pull, durable and
 * name may not change. Returns 0 or KEEL_EINVAL with *jerr
 * (SRV_JS_ECONSUMER_CONFIG) and errmsg naming the field. */
KEEL_MUST_USE int
srv_consumer_config_update_check(const struct srv_consumer_config *old_cfg,
                                 const struct srv_consumer_config *new_cfg,
                                 enum srv_js_err *jerr, char *errmsg);

/* Filters of cfg as one list (filter_subject counts as a list of one);
 * *n = 0 means every subject. The list points into cfg. */
void srv_consumer_config_filters(const struct srv_consumer_config *cfg,
                                 char *const **list, uint32_t *n);

/* True when literal subject subj passes cfg's filters. */
bool srv_consumer_config_matches(const struct srv_consumer_config *cfg,
                                 const char *subj);

void srv_consumer_config_free(struct srv_consumer_config *cfg);

/* Parse RFC3339 time ("2026-12-01T01:02:03.000000004Z" or with a +hh:mm
 * offset) to Unix ns. Returns 0 or KEEL_EINVAL. */
KEEL_MUST_USE int srv_js_time_parse(const char *s, int64_t *unix_ns);

#endif
