/* srv_metrics_prom: /metrics in the Prometheus text exposition format
 * (version 0.0.4), built from a stats snapshot only. Every family has one
 * HELP and one TYPE line before its samples; counters end in _total.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_metrics.h"
#include "srv_monitor.h"

static void family(FILE *f, const char *name, const char *type,
                   const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(FILE *f, const char *name, const char *type,
                   const char *help, uint64_t v)
{
    family(f, name, type, help);
    fprintf(f, "%s %llu\n", name, (unsigned long long)v);
}

/* A label value with backslash, double quote and newline escaped. */
static void label_value(FILE *f, const char *v)
{
    for (size_t i = 0; v[i] != '\0' && i < SRV_JS_NAME_BYTES_MAX + 8; i++) {
        if (v[i] == '\\' || v[i] == '"') {
            fputc('\\', f);
            fputc(v[i], f);
        } else if (v[i] == '\n') {
            fputs("\\n", f);
        } else {
            fputc(v[i], f);
        }
    }
}

static void histogram(FILE *f, const char *name, const char *help,
                      const struct srv_mon_hist *h)
{
    uint64_t cum = 0;
    family(f, name, "histogram", help);
    for (size_t i = 0; i < SRV_MON_HIST_BUCKETS; i++) {
        cum += h->counts[i];
        if (srv_mon_hist_bounds_us[i] == UINT64_MAX) {
            fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name,
                    (unsigned long long)cum);
        } else {
            fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name,
                    (double)srv_mon_hist_bounds_us[i] / 1e6,
                    (unsigned long long)cum);
        }
    }
    fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, (double)h->sum_us / 1e6,
            name, (unsigned long long)h->count);
}

/* A histogram with power-of-two buckets (store_hist: bucket i holds
 * values up to 2^i; the last one is +Inf), values divided by scale when
 * printed. The bucket set never changes between scrapes. */
static void pow2_histogram(FILE *f, const char *name, const char *help,
                           const struct store_hist *h, double scale)
{
    uint64_t cum = 0;
    family(f, name, "histogram", help);
    for (size_t i = 0; i + 1 < STORE_HIST_BUCKETS; i++) {
        cum += h->counts[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name,
                (double)(1ull << i) / scale, (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name,
            (unsigned long long)h->count);
    fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, (double)h->sum / scale,
            name, (unsigned long long)h->count);
}

/* Loop turns: the turn histogram (srv_turn.h buckets, in seconds), the
 * longest turn and its largest phase. Turns over 100 ms are the +Inf
 * count less the 0.1 bucket. */
static void loop_families(FILE *f, const struct srv_mon_snap *s)
{
    static const uint64_t bounds_ms[] = SRV_TURN_BUCKETS_MS;
    const char *name = "keel_loop_turn_seconds";
    uint64_t cum = 0;
    family(f, name, "histogram",
           "Work of one loop turn (time not blocked in the poll).");
    for (size_t i = 0; i < SRV_TURN_BUCKETS; i++) {
        cum += s->turn.hist[i];
        if (i < sizeof bounds_ms / sizeof bounds_ms[0]) {
            fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name,
                    (double)bounds_ms[i] / 1e3, (unsigned long long)cum);
        } else {
            fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name,
                    (unsigned long long)cum);
        }
    }
    uint64_t sum_ms = 0;
    for (size_t p = 0; p < SRV_TURN_PHASE_N; p++) {
        sum_ms += s->turn.phase_ms[p];
    }
    fprintf(f, "%s_sum %.3f\n%s_count %llu\n", name, (double)sum_ms / 1e3, name,
            (unsigned long long)s->turn.turns);
    family(f, "keel_loop_turn_max_seconds", "gauge",
           "The longest loop turn since keeld started, by its largest "
           "phase.");
    fprintf(f, "keel_loop_turn_max_seconds{phase=\"%s\"} %.3f\n",
            srv_turn_phase_name(s->turn.max_phase),
            (double)s->turn.max_ms / 1e3);
}

static void server_families(FILE *f, const struct srv_mon_snap *s)
{
    const struct srv_stats *st = &s->stats;
    scalar(f, "keel_connections", "gauge", "Client connections open now.",
           st->connections);
    scalar(f, "keel_connections_total", "counter",
           "Client connections accepted since start.", st->total_connections);
    scalar(f, "keel_subscriptions", "gauge", "Subscriptions registered now.",
           st->subscriptions);
    scalar(f, "keel_in_msgs_total", "counter",
           "Messages received from clients and routes.", st->in_msgs);
    scalar(f, "keel_in_bytes_total", "counter",
           "Payload bytes received from clients and routes.", st->in_bytes);
    scalar(f, "keel_out_msgs_total", "counter",
           "Messages delivered to clients.", st->out_msgs);
    scalar(f, "keel_out_bytes_total", "counter",
           "Payload bytes delivered to clients.", st->out_bytes);
    scalar(f, "keel_slow_consumers_total", "counter",
           "Connections cut off as slow consumers.", st->slow_consumers);
    scalar(f, "keel_uptime_seconds", "gauge", "Seconds since keeld started.",
           (s->taken_ms - s->start_ms) / 1000);
}

/* One family (gauge, or counter when name ends in _total) with a sample
 * per Raft group this node holds (label group="..."). */
static void per_group(FILE *f, const struct srv_mon_snap *s, const char *name,
                      const char *help, size_t field)
{
    size_t n = strlen(name);
    bool counter = n > 6 && strcmp(name + n - 6, "_total") == 0;
    family(f, name, counter ? "counter" : "gauge", help);
    for (size_t i = 0; i <= s->nstreams; i++) {
        const struct srv_mon_group *g =
            i == 0 ? &s->meta : &s->streams[i - 1].group;
        if (i > 0 && s->streams[i - 1].elsewhere) {
            continue; /* no group on this node */
        }
        uint64_t v = *(const uint64_t *)((const char *)g + field);
        fprintf(f, "%s{group=\"", name);
        label_value(f, g->name);
        fprintf(f, "\"} %llu\n", (unsigned long long)v);
    }
}

/* InstallSnapshot counters per group (replica_install_info). */
static const struct {
    const char *name;
    const char *help;
    size_t field;
} install_families[] = {
    {"keel_raft_snapshot_installs_total",
     "Snapshots installed from a leader (InstallSnapshot).",
     offsetof(struct srv_mon_group, installs)},
    {"keel_raft_snapshot_sends_total", "Snapshot transfers spooled as leader.",
     offsetof(struct srv_mon_group, install_sends)},
    {"keel_raft_snapshot_failures_total",
     "Snapshot transfers aborted, sending or receiving.",
     offsetof(struct srv_mon_group, install_failures)},
    {"keel_raft_snapshot_install_repeats",
     "Refusals of the same snapshot's content in a row (the group stops "
     "when they repeat; docs/operations.md).",
     offsetof(struct srv_mon_group, install_repeats)},
};

static void raft_families(FILE *f, const struct srv_mon_snap *s)
{
    per_group(f, s, "keel_raft_term", "Current Raft term of the group.",
              offsetof(struct srv_mon_group, term));
    per_group(f, s, "keel_raft_commit_index", "Highest committed index.",
              offsetof(struct srv_mon_group, commit));
    per_group(f, s, "keel_raft_applied_index", "Highest applied index.",
              offsetof(struct srv_mon_group, applied));
    per_group(f, s, "keel_raft_last_index", "Last index in the local log.",
              offsetof(struct srv_mon_group, last_index));
    family(f, "keel_raft_leader", "gauge",
           "1 while this node leads the group.");
    for (size_t i = 0; i <= s->nstreams; i++) {
        const struct srv_mon_group *g =
            i == 0 ? &s->meta : &s->streams[i - 1].group;
        if (i > 0 && s->streams[i - 1].elsewhere) {
            continue;
        }
        fprintf(f, "keel_raft_leader{group=\"");
        label_value(f, g->name);
        fprintf(f, "\"} %d\n", strcmp(g->role, "leader") == 0 ? 1 : 0);
    }
    per_group(f, s, "keel_raft_repairs_total",
              "Damaged records rewritten from a verified copy "
              "(docs/design.md §4.7 R1).",
              offsetof(struct srv_mon_group, repairs));
    per_group(f, s, "keel_raft_repairs_refused_total",
              "Repair copies the store refused (they did not verify).",
              offsetof(struct srv_mon_group, repairs_refused));
    for (size_t i = 0; i < sizeof install_families / sizeof *install_families;
         i++) {
        per_group(f, s, install_families[i].name, install_families[i].help,
                  install_families[i].field);
    }
    scalar(f, "keel_raft_elections_total", "counter",
           "Times a local group became leader.", s->elections);
}

static void js_families(FILE *f, const struct srv_mon_snap *s)
{
    scalar(f, "keel_js_streams", "gauge", "Streams on this node.", s->nstreams);
    scalar(f, "keel_js_consumers", "gauge", "Consumers on this node.",
           s->consumers);
    scalar(f, "keel_js_consumer_visits_total", "counter",
           "Consumers the delivery engine visited (only those with work).",
           s->consumer_visits);
    scalar(f, "keel_js_messages", "gauge", "Messages stored in streams.",
           s->messages);
    scalar(f, "keel_js_bytes", "gauge", "Bytes stored in streams.", s->bytes);
    scalar(f, "keel_js_api_requests_total", "counter",
           "JetStream API requests answered.", s->api_total);
    scalar(f, "keel_js_api_errors_total", "counter",
           "JetStream API requests answered with an error.", s->api_errors);
    family(f, "keel_js_direct_gets_total", "counter",
           "DIRECT.GETs answered on this node, by the replica that answered.");
    fprintf(f,
            "keel_js_direct_gets_total{by=\"leader\"} %llu\n"
            "keel_js_direct_gets_total{by=\"follower\"} %llu\n"
            "keel_js_direct_gets_total{by=\"mirror\"} %llu\n",
            (unsigned long long)s->direct.leader,
            (unsigned long long)s->direct.follower,
            (unsigned long long)s->direct.mirror);
    histogram(f, "keel_js_puback_latency_seconds",
              "Time from a publish's Raft proposal to its PubAck.", &s->puback);
    scalar(f, "keel_store_fdatasyncs_total", "counter",
           "Segment fdatasyncs issued by the store.", s->store.fdatasyncs);
    scalar(f, "keel_store_batches_total", "counter",
           "Write batches (group commits) of the store.", s->store.batches);
    scalar(f, "keel_store_records_written_total", "counter",
           "Log records written; divided by batches it is the batch size.",
           s->store.records_written);
    pow2_histogram(f, "keel_store_fdatasync_seconds",
                   "Latency of the store's segment fdatasyncs.",
                   &s->store.fdatasync_us, 1e6);
    pow2_histogram(f, "keel_store_batch_records",
                   "Records per store write batch (group commit size).",
                   &s->store.batch_records, 1.0);
    scalar(f, "keel_quarantined_files", "gauge",
           "Files in <data>/quarantine (damaged, kept for inspection).",
           s->quarantined_files);
    scalar(f, "keel_quarantined_orphans", "gauge",
           "Files in <data>/quarantine/orphans.", s->quarantined_orphans);
    scalar(f, "keel_scrub_bytes_total", "counter",
           "Record and snapshot bytes the background scrub verified.",
           s->scrub.bytes);
    scalar(f, "keel_scrub_faults_total", "counter",
           "Damaged records and snapshot files the background scrub found.",
           s->scrub.faults);
    scalar(f, "keel_scrub_repaired_total", "counter",
           "Of those, records no longer damaged (repaired from a verified "
           "copy or discarded) and snapshot files retaken.",
           s->scrub.repaired);
    scalar(f, "keel_scrub_passes_total", "counter",
           "Full background scrub passes over every group.", s->scrub.passes);
    scalar(f, "keel_store_rebuilt_segments", "gauge",
           "Segment files a node of one catalogued again at start after a "
           "meta.lmdb reset.",
           s->rebuilt_segments);
    raft_families(f, s);
}

char *srv_mon_metrics_text(const struct srv_mon_snap *s, bool healthy)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL) {
        return NULL;
    }
    server_families(f, s);
    loop_families(f, s);
    scalar(f, "keel_healthy", "gauge", "1 when /healthz answers 200, else 0.",
           healthy ? 1 : 0);
    scalar(f, "keel_jetstream_enabled", "gauge",
           "1 when this node keeps streams.", s->js_enabled ? 1 : 0);
    if (s->js_enabled) {
        js_families(f, s);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
