/* srv_consumer_pause: what holds a consumer's deliveries back, as
 * nats-server defines it: pause_until and
 * $JS.API.CONSUMER.PAUSE.<stream>.<consumer> (2.11), and replay_policy
 * original's pacing (docs/jetstream-config.md, "Pausing a consumer",
 * "Replay original"). Pure: the caller passes the time. */
#ifndef KEEL_SRV_CONSUMER_PAUSE_H
#define KEEL_SRV_CONSUMER_PAUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "keel/assert.h"
#include "srv_consumer_cfg.h"
#include "srv_js_err.h"

struct srv_js_json_rd;

/* The config steps: read "pause_until" (an RFC3339 time; absent, null, ""
 * or Go's zero time: not paused), and encode it when set. */
KEEL_MUST_USE int srv_consumer_parse_pause(const struct srv_js_json_rd *rd,
                                           struct srv_consumer_config *c);
KEEL_MUST_USE int srv_consumer_encode_pause(const struct srv_consumer_config *c,
                                            json_t *o);

/* Is a consumer paused at wall time now_ns? *remaining_ns (may be NULL)
 * gets how long it still is (0 when not). Delivery is the leader's: its
 * clock decides when the pause ends. */
bool srv_consumer_paused(const struct srv_consumer_config *c, int64_t now_ns,
                         int64_t *remaining_ns);

/* A PAUSE request body: {"pause_until": time} (empty body or no time:
 * resume). Returns 0 with *until_ns (0 = resume) or KEEL_EINVAL with
 * *jerr and errmsg. */
KEEL_MUST_USE int srv_consumer_pause_request(const char *body, size_t len,
                                             int64_t *until_ns,
                                             enum srv_js_err *jerr,
                                             char *errmsg);

/* The PAUSE response object (NULL without memory): paused, pause_until
 * (Go's zero time when resumed), pause_remaining (ns) when paused. */
json_t *srv_consumer_pause_response(int64_t until_ns, int64_t now_ns);

/* Add paused and pause_remaining to a consumer info object o (when paused:
 * nats-server omits both otherwise). Non-zero when out of memory. */
int srv_consumer_pause_info(const struct srv_consumer_config *c, int64_t now_ns,
                            json_t *o);

/* replay_policy original: may the message stored at ts go at mono time
 * now, the last one sent having been stored at lts (0: none yet)? It waits
 * (returns true) until the gap between their stored times has passed since
 * it was first asked (*at, 0 = not asked; reset once it may go). Gaps of
 * 1ms or less are not waited, as on nats-server. */
bool srv_consumer_replay_wait(int64_t lts, int64_t ts, int64_t now,
                              int64_t *at);

/* rate_limit_bps (push consumers): a token bucket of bytes, as
 * nats-server's: it holds at most burst bytes (the stream's max_msg_size,
 * else the server's max_payload), starts full, and fills at bps / 8 bytes
 * a second (integer division, as nats-server). A message of size bytes
 * goes once the bucket holds size bytes (all of it when size is over
 * burst: nats-server would never send such a message) and takes them. */
struct srv_consumer_rate {
    double tokens; /* bytes */
    int64_t at_ns; /* mono time tokens was computed at */
    bool started;  /* the bucket was filled */
};

/* Must the message of size bytes wait at mono time now_ns (true), or may
 * it go (false, its bytes taken from b)? Always false for bps 0. */
bool srv_consumer_rate_wait(struct srv_consumer_rate *b, int64_t bps,
                            int64_t burst, size_t size, int64_t now_ns);

#endif
