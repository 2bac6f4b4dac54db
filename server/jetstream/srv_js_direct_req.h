/* srv_js_direct_req: the pure half of DIRECT.GET (srv_js_direct.c): read a
 * request as nats-server 2.11 reads its JSApiMsgGetRequest, and find in a
 * stream state machine the seqs a batch or a multi_last names. No I/O. */
#ifndef KEEL_SRV_JS_DIRECT_REQ_H
#define KEEL_SRV_JS_DIRECT_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "keel/assert.h"
#include "srv_stream_sm.h"

/* A parsed request. Strings point into the JSON body. */
struct srv_js_direct_req {
    uint64_t seq;
    const char *last_for; /* last_by_subj; NULL unset (also for "") */
    const char *next_for; /* next_by_subj */
    int64_t batch;        /* <= 0: one message and no EOB */
    int64_t max_bytes;    /* <= 0: keeld's bound */
    bool has_start;
    int64_t start_ns;    /* start_time */
    const json_t *multi; /* multi_last: a non-empty array of strings */
    uint64_t up_to_seq;
    bool has_up_to_time;
    int64_t up_to_ns;
    bool no_hdr;
};

/* Read body (NULL: the request had none) for $JS.API.DIRECT.GET.<stream>
 * (keyed false) or .<stream>.<subject> (keyed true: the subject is the
 * last_by_subj, and a body may set only max_bytes and no_hdr). Returns 0,
 * or KEEL_EINVAL with *status the status line nats-server answers ("408
 * Malformed Request", "408 Empty Request", "408 Bad Request"). */
KEEL_MUST_USE int srv_js_direct_parse(const json_t *body, bool keyed,
                                      struct srv_js_direct_req *r,
                                      const char **status);

/* The first seq stored at or after t_ns, last_seq + 1 when none
 * (nats-server's GetSeqFromTime). */
uint64_t srv_js_direct_seq_at_time(const struct srv_stream_sm *sm,
                                   int64_t t_ns);

/* Live messages at or after from whose subject matches filter (NULL: any):
 * a batch's Nats-Num-Pending before it sends. */
uint64_t srv_js_direct_num_pending(const struct srv_stream_sm *sm,
                                   uint64_t from, const char *filter);

/* The last seq <= up_to of every subject matching one of filters (a JSON
 * array of subjects, wildcards allowed; an invalid one matches nothing)
 * into seqs[0..*n), ascending and distinct; seqs holds
 * SRV_JS_DIRECT_BATCH_MAX. Returns 0 or KEEL_ELIMIT when more subjects
 * match (nats-server's "413 Too Many Results"). */
KEEL_MUST_USE int srv_js_direct_multi_last(const struct srv_stream_sm *sm,
                                           const json_t *filters,
                                           uint64_t up_to, uint64_t *seqs,
                                           size_t *n);

#endif
