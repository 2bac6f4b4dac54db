/* keel bench: state shared by the bench driver (cli_bench.c) and its
 * report (cli_bench_report.c). Private to the client.
 */
#ifndef KEEL_CLI_BENCH_H
#define KEEL_CLI_BENCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli.h"

#define BENCH_CACHE_LINE 64

enum bench_mode { BENCH_PUB, BENCH_SUB, BENCH_PUBSUB, BENCH_REQ };

struct bench_cfg {
    enum bench_mode mode;
    const char *mode_name;
    const char *subject;
    int64_t size;
    int64_t msgs;
    int64_t pubs;
    int64_t subs;
    int64_t stall_ms;
    bool json;
    struct cli_conn_opts conn;
};

/* One subscriber (or, in req mode, responder) connection. The counters are
 * written by the subscription's delivery thread and read by the waiter.
 */
struct bench_sub {
    /* Own cache line: delivery threads of different subscribers must not
     * share one (the array is allocated with BENCH_CACHE_LINE alignment).
     */
    _Alignas(BENCH_CACHE_LINE) struct bench *b;
    natsConnection *nc;
    natsSubscription *sub;
    _Atomic int64_t received;
    _Atomic int64_t bad_size;
    _Atomic int64_t first_ns;
    _Atomic int64_t last_ns;
};

/* One publisher (or requester) connection and its thread. */
struct bench_pub {
    struct bench *b;
    natsConnection *nc;
    pthread_t thread;
    bool started;
    int64_t msgs;
    int64_t sent;
    int64_t start_ns;
    int64_t end_ns;
    int64_t *lat_ns; /* req mode: one round trip per entry */
    int rv;
    char errmsg[KEEL_ERRMSG_MAX];
};

struct bench {
    struct bench_cfg cfg;
    char *payload;
    struct bench_sub *subs;
    int64_t nsubs;
    struct bench_pub *pubs;
    int64_t npubs;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool go;                  /* under mu: publishers may start */
    bool aborted;             /* under mu: with go, publishers must not start */
    int64_t subs_done;        /* under mu */
    int64_t pubs_done;        /* under mu */
    _Atomic int64_t progress; /* messages sent (pub) or round trips (req) */
    bool tty;
};

/* What the report prints: rates per side, losses, latency percentiles. */
struct bench_result {
    int64_t pub_msgs;
    double pub_s;
    int64_t sub_msgs;
    double sub_s;
    double e2e_s;
    int64_t lost;
    int64_t dropped;
    int64_t slow_consumers;
    int64_t bad_size;
    int64_t errors;
    int64_t p50_ns;
    int64_t p90_ns;
    int64_t p99_ns;
    int64_t max_ns;
    double mean_ns;
};

/* The MODE words a bench command takes as its first argument, in the
 * order of its mode enum, and what the error for another word says:
 * "unknown <kind> mode 'X' (<hint>)". */
struct cli_bench_modes {
    const char *kind;
    const char *hint;
    const char *words[CLI_BENCH_MODES_MAX]; /* NULL after the last */
};

/* What runs a bench command once cli_bench_main parsed it: cfg is the
 * command's own config (its flags were written there), mode the index
 * of MODE in words, target the second argument (SUBJECT or BUCKET).
 * Checks the flags' ranges, runs the bench and prints its report. */
typedef int (*cli_bench_run_cb)(void *cfg, int mode, const char *target,
                                char *errmsg);

/* Every bench command (cmd takes MODE TARGET): conn set to its defaults,
 * argv parsed against flags and the connection flags (cli_parse), MODE
 * looked up in modes, then run_cb(cfg, ...). With --help: 0 once the
 * help is printed. Returns 0, KEEL_EUSAGE or run_cb's code. */
int cli_bench_main(const struct cli_cmd *cmd,
                   const struct cli_bench_modes *modes,
                   const struct cli_flag *flags, struct cli_conn_opts *conn,
                   int argc, char **argv, cli_bench_run_cb run_cb, void *cfg,
                   char *errmsg);

/* A bench flag's value and the range it must be in (cli_bench_ranges). */
struct cli_bench_range {
    const char *flag; /* "--size" */
    int64_t v, min, max;
};

/* 0 when the value of every row of r (n rows) is in its range, else
 * KEEL_EUSAGE with errmsg giving every row's range, "--size 0..N, --msgs
 * 1..M": the whole rule, not only the broken part. */
int cli_bench_ranges(const struct cli_bench_range *r, size_t n, char *errmsg);

/* Fill the latency fields of `r` from every requester's samples (sorts a
 * merged copy). Returns 0 or KEEL_ENOMEM.
 */
int cli_bench_latency(const struct bench *b, struct bench_result *r,
                      char *errmsg);

/* Fill the latency fields of `r` from the samples of n clients (sorts a
 * merged copy), for every bench's own client struct: clients[i] is stride
 * bytes apart, its int64_t * samples at byte ns_off and their int64_t count
 * at byte n_off. Nothing for no samples. Returns 0 or KEEL_ENOMEM. */
int cli_bench_lat_merge(const void *clients, int64_t n, size_t stride,
                        size_t ns_off, size_t n_off, struct bench_result *r,
                        char *errmsg);

/* Sort the n latency samples in `v` (in place) and fill the p50/p90/p99/
 * max/mean fields of `r`; nothing for n == 0.
 */
void cli_bench_lat_summary(int64_t *v, int64_t n, struct bench_result *r);

/* Print the latency percentiles of `r` to stdout: with json, as the
 * members ,"p50_us":...,"mean_us":... to close into an object; else as one
 * line "  <label> p50 ... us, mean ... us". */
void cli_bench_lat_print(const struct bench_result *r, const char *label,
                         bool json);

/* The JetStream benches (cli_bench_js.c, cli_bench_js_consume.c): create
 * the bench's stream name capturing subject, with replicas. A
 * refusal is KEEL_ECONN, its message ending in hint (what to check). */
int cli_bench_js_stream_add(jsCtx *js, const char *name, const char *subject,
                            int64_t replicas, const char *hint, char *errmsg);

/* Publish msgs messages of size bytes to subject through js, an async
 * context whose ack handler counts failed acks in *errors
 * (cli_bench_js_consume.c); wait up to wait_ms for the last acks. Not
 * timed: it fills a stream before a bench's timed phase. */
int cli_bench_js_fill(jsCtx *js, const char *subject, int64_t size,
                      int64_t msgs, int64_t wait_ms, _Atomic int64_t *errors,
                      char *errmsg);

/* keel bench js fetch|push|mirror: the parsed command
 * (cli_bench_js_consume.c). stream is the run's fresh name. */
enum cli_bjc_mode { CLI_BJC_FETCH, CLI_BJC_PUSH, CLI_BJC_MIRROR };
struct cli_bjc_cfg {
    enum cli_bjc_mode mode;
    const char *subject;
    const char *stream_prefix;
    const char *ack;
    char stream[64];
    int64_t size, msgs, batch, window, stall_ms, expires_ms, replicas;
    int64_t rate; /* mirror: publishes a second in the lag phase */
    bool json, unfiltered;
    struct cli_conn_opts conn;
};

/* keel bench js mirror (cli_bench_js_mirror.c): a mirror's catch-up rate
 * and its lag under a paced publish load. */
int cli_bench_js_mirror(const struct cli_bjc_cfg *c, char *errmsg);

/* Print `r` as text (or one JSON object with cfg->json) to stdout. */
void cli_bench_report(const struct bench_cfg *cfg,
                      const struct bench_result *r);

/* The comma list of server URLs `list` rotated to start at its (i mod n)-th
 * URL, into out[cap] (cli_bench_js.c): client i of a bench starts at node
 * i, so clients spread over a cluster the same way on every server.
 * Returns 0 or KEEL_EUSAGE when the list does not fit. */
int cli_bench_rotate_servers(const char *list, int64_t i, char *out, size_t cap,
                             char *errmsg);

/* Connect client i of a bench with conn, its server list rotated by
 * cli_bench_rotate_servers (cli_bench_js.c). */
int cli_bench_connect(const struct cli_conn_opts *conn, int64_t i,
                      natsConnection **nc, char *errmsg);

/* Draw the progress bar on stderr (TTY only); done/total in messages. */
void cli_bench_progress(const struct bench *b, int64_t done, int64_t total);

#endif
