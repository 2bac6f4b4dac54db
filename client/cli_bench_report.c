/* keel bench output: latency percentiles, the text or JSON report, and the
 * progress bar. Pure formatting over the numbers cli_bench.c collected.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli_bench.h"

#define BAR_WIDTH 40

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array of n > 0 samples. */
static int64_t percentile(const int64_t *v, int64_t n, int pct)
{
    ASSERT(n > 0);
    ASSERT(pct >= 0 && pct <= 100);
    int64_t rank = (n * pct + 99) / 100;
    return v[rank > 0 ? rank - 1 : 0];
}

void cli_bench_lat_summary(int64_t *v, int64_t n, struct bench_result *r)
{
    if (n == 0) {
        return;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += (double)v[i];
    }
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    r->p50_ns = percentile(v, n, 50);
    r->p90_ns = percentile(v, n, 90);
    r->p99_ns = percentile(v, n, 99);
    r->max_ns = v[n - 1];
    r->mean_ns = sum / (double)n;
}

int cli_bench_latency(const struct bench *b, struct bench_result *r,
                      char *errmsg)
{
    return cli_bench_lat_merge(b->pubs, b->npubs, sizeof *b->pubs,
                               offsetof(struct bench_pub, lat_ns),
                               offsetof(struct bench_pub, sent), r, errmsg);
}

int cli_bench_lat_merge(const void *clients, int64_t n, size_t stride,
                        size_t ns_off, size_t n_off, struct bench_result *r,
                        char *errmsg)
{
    const unsigned char *base = clients;
    int64_t total = 0;
    int64_t k = 0;

    ASSERT(clients != NULL || n == 0);
    for (int64_t i = 0; i < n; i++) {
        int64_t cnt;
        memcpy(&cnt, base + (size_t)i * stride + n_off, sizeof cnt);
        total += cnt;
    }
    if (total == 0) {
        return 0;
    }
    int64_t *all = malloc((size_t)total * sizeof *all);
    if (all == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "no memory to sort latencies");
    }
    for (int64_t i = 0; i < n; i++) {
        const int64_t *ns;
        int64_t cnt;
        memcpy(&ns, base + (size_t)i * stride + ns_off, sizeof ns);
        memcpy(&cnt, base + (size_t)i * stride + n_off, sizeof cnt);
        ASSERT(k + cnt <= total);
        memcpy(all + k, ns, (size_t)cnt * sizeof *all);
        k += cnt;
    }
    cli_bench_lat_summary(all, total, r);
    free(all);
    return 0;
}

static double rate(int64_t msgs, double secs)
{
    return secs > 0 ? (double)msgs / secs : 0;
}

static double mbps(int64_t msgs, int64_t size, double secs)
{
    return secs > 0 ? (double)msgs * (double)size / 1e6 / secs : 0;
}

/* The headline number of each mode, the one tools/bench-vs-nats compares:
 * pub: publish rate; sub: delivery rate over all subscribers; pubsub:
 * published messages per second from first publish to last delivery; req:
 * round trips per second.
 */
static void headline(const struct bench_cfg *c, const struct bench_result *r,
                     double *msgs_per_s, double *secs)
{
    *msgs_per_s = 0;
    *secs = 0;
    switch (c->mode) {
    case BENCH_PUB:
    case BENCH_REQ:
        *secs = r->pub_s;
        *msgs_per_s = rate(r->pub_msgs, r->pub_s);
        break;
    case BENCH_SUB:
        *secs = r->sub_s;
        *msgs_per_s = rate(r->sub_msgs, r->sub_s);
        break;
    case BENCH_PUBSUB:
        *secs = r->e2e_s;
        *msgs_per_s = rate(r->pub_msgs, r->e2e_s);
        break;
    }
}

void cli_bench_lat_print(const struct bench_result *r, const char *label,
                         bool json)
{
    double us[] = {(double)r->p50_ns / 1e3, (double)r->p90_ns / 1e3,
                   (double)r->p99_ns / 1e3, (double)r->max_ns / 1e3,
                   r->mean_ns / 1e3};
    if (json) {
        printf(",\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,"
               "\"max_us\":%.1f,\"mean_us\":%.1f",
               us[0], us[1], us[2], us[3], us[4]);
        return;
    }
    printf("  %s p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us, mean "
           "%.1f us\n",
           label, us[0], us[1], us[2], us[3], us[4]);
}

static void report_json(const struct bench_cfg *c, const struct bench_result *r)
{
    double mps, secs;
    headline(c, r, &mps, &secs);
    int64_t agg = r->pub_msgs + r->sub_msgs;
    /* Subjects are printed as given; keel rejects none with quotes, so
     * escape the two characters JSON cannot carry raw.
     */
    printf("{\"mode\":\"%s\",\"subject\":\"", c->mode_name);
    for (const char *p = c->subject; *p != '\0'; p++) {
        printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    }
    printf("\",\"size\":%lld,\"msgs\":%lld,\"pubs\":%lld,\"subs\":%lld,"
           "\"elapsed_s\":%.6f,\"msgs_per_s\":%.1f,\"mb_per_s\":%.3f,"
           "\"pub_msgs_per_s\":%.1f,\"pub_mb_per_s\":%.3f,"
           "\"sub_msgs_per_s\":%.1f,\"sub_mb_per_s\":%.3f,"
           "\"aggregate_msgs_per_s\":%.1f,\"aggregate_mb_per_s\":%.3f,"
           "\"lost\":%lld,\"dropped\":%lld,\"slow_consumers\":%lld,"
           "\"errors\":%lld",
           (long long)c->size, (long long)c->msgs, (long long)c->pubs,
           (long long)c->subs, secs, mps, mps * (double)c->size / 1e6,
           rate(r->pub_msgs, r->pub_s), mbps(r->pub_msgs, c->size, r->pub_s),
           rate(r->sub_msgs, r->sub_s), mbps(r->sub_msgs, c->size, r->sub_s),
           rate(agg, r->e2e_s), mbps(agg, c->size, r->e2e_s),
           (long long)r->lost, (long long)r->dropped,
           (long long)r->slow_consumers, (long long)r->errors);
    if (c->mode == BENCH_REQ) {
        cli_bench_lat_print(r, NULL, true);
    }
    printf("}\n");
}

static void line(const char *what, int64_t msgs, int64_t size, double secs)
{
    printf("  %-10s %14.0f msgs/s %10.2f MB/s  %9lld msgs in %.3f s\n", what,
           rate(msgs, secs), mbps(msgs, size, secs), (long long)msgs, secs);
}

void cli_bench_report(const struct bench_cfg *c, const struct bench_result *r)
{
    if (c->json) {
        report_json(c, r);
        fflush(stdout);
        return;
    }
    printf("keel bench %s \"%s\": %lld msgs of %lld B", c->mode_name,
           c->subject, (long long)c->msgs, (long long)c->size);
    if (c->mode != BENCH_SUB) {
        printf(", %lld %s", (long long)c->pubs,
               c->mode == BENCH_REQ ? "requester(s)" : "publisher(s)");
    }
    if (c->mode != BENCH_PUB) {
        printf(", %lld %s", (long long)c->subs,
               c->mode == BENCH_REQ ? "responder(s)" : "subscriber(s)");
    }
    printf("\n");
    if (c->mode != BENCH_SUB) {
        line(c->mode == BENCH_REQ ? "req" : "pub", r->pub_msgs, c->size,
             r->pub_s);
    }
    if (c->mode == BENCH_SUB || c->mode == BENCH_PUBSUB) {
        line("sub", r->sub_msgs, c->size, r->sub_s);
    }
    if (c->mode == BENCH_PUBSUB) {
        line("aggregate", r->pub_msgs + r->sub_msgs, c->size, r->e2e_s);
        line("end-to-end", r->pub_msgs, c->size, r->e2e_s);
    }
    if (c->mode == BENCH_REQ) {
        cli_bench_lat_print(r, "latency   ", false);
    }
    if (c->mode != BENCH_PUB && c->mode != BENCH_REQ) {
        printf("  lost %lld, dropped %lld, slow consumers %lld\n",
               (long long)r->lost, (long long)r->dropped,
               (long long)r->slow_consumers);
    }
    fflush(stdout);
}

void cli_bench_progress(const struct bench *b, int64_t done, int64_t total)
{
    if (!b->tty || total <= 0) {
        return;
    }
    if (done < 0) {
        fprintf(stderr, "\r%*s\r", BAR_WIDTH + 32, "");
        return;
    }
    int64_t filled = done >= total ? BAR_WIDTH : done * BAR_WIDTH / total;
    char bar[BAR_WIDTH + 1];
    memset(bar, '#', (size_t)filled);
    memset(bar + filled, ' ', (size_t)(BAR_WIDTH - filled));
    bar[BAR_WIDTH] = '\0';
    fprintf(stderr, "\r[%s] %3lld%% %lld/%lld", bar,
            (long long)(done >= total ? 100 : done * 100 / total),
            (long long)done, (long long)total);
}
