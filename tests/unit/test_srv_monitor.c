/* Unit tests of the monitoring bodies built from a stats snapshot:
 * /metrics is valid Prometheus text, /connz pages, the /healthz verdict,
 * the latency histogram and the duration text.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "srv_metrics.h"
#include "srv_monitor.h"

#define FAMILIES_MAX 128

struct fixture {
    struct srv_mon_snap snap;
    struct srv_mon_stream streams[2];
    struct srv_mon_conn conns[3];
};

static void healthy_group(struct srv_mon_group *g, const char *name)
{
    snprintf(g->name, sizeof g->name, "%s", name);
    g->started = true;
    g->role = "leader";
    g->leader = 1;
    g->term = 3;
    g->last_index = 10;
    g->commit = 10;
    g->applied = 10;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->snap.taken_ms = 1700000000000ull;
    f->snap.start_ms = f->snap.taken_ms - 65000;
    f->snap.loop_now_ms = 5000;
    f->snap.stats.connections = 3;
    f->snap.stats.in_msgs = 42;
    f->snap.js_enabled = true;
    healthy_group(&f->snap.meta, "_meta_");
    for (int i = 0; i < 2; i++) {
        snprintf(f->streams[i].name, sizeof f->streams[i].name, "S%d", i);
        f->streams[i].messages = 5;
        healthy_group(&f->streams[i].group, f->streams[i].name);
    }
    /* A label value that needs escaping. */
    snprintf(f->streams[1].group.name, sizeof f->streams[1].group.name,
             "we\"ird\\");
    f->snap.streams = f->streams;
    f->snap.nstreams = 2;
    for (int i = 0; i < 3; i++) {
        f->conns[i].cid = (uint64_t)i + 1;
        snprintf(f->conns[i].ip, sizeof f->conns[i].ip, "127.0.0.1");
        f->conns[i].port = 40000 + i;
        f->conns[i].mon.start_ms = f->snap.taken_ms - 2000;
        f->conns[i].mon.last_ms = 4000;
        f->conns[i].mon.in_msgs = (uint64_t)i * 10;
    }
    f->snap.conns = f->conns;
    f->snap.nconns = 3;
    f->snap.nconns_total = 3;
    srv_mon_hist_add(&f->snap.puback, 50);
    srv_mon_hist_add(&f->snap.puback, 3000);
    srv_mon_hist_add(&f->snap.puback, 99999999999ull);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

/* A metric name per the exposition format: [a-zA-Z_:][a-zA-Z0-9_:]*. */
static size_t name_len(const char *s)
{
    size_t n = 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == ':') {
        n++;
    }
    return isdigit((unsigned char)s[0]) ? 0 : n;
}

/* Skip {k="v",...} honouring escapes; returns the char after '}' or NULL. */
static const char *skip_labels(const char *p)
{
    if (*p != '{') {
        return p;
    }
    p++;
    while (*p != '}') {
        size_t n = name_len(p);
        if (n == 0 || p[n] != '=' || p[n + 1] != '"') {
            return NULL;
        }
        p += n + 2;
        while (*p != '"') {
            if (*p == '\0' || *p == '\n') {
                return NULL;
            }
            p += *p == '\\' ? 2 : 1;
        }
        p++;
        if (*p == ',') {
            p++;
        }
    }
    return p + 1;
}

struct parsed {
    char typed[FAMILIES_MAX][96];
    int ntyped;
    int samples;
};

static bool family_typed(const struct parsed *ps, const char *name, size_t n)
{
    for (int i = 0; i < ps->ntyped; i++) {
        size_t tl = strlen(ps->typed[i]);
        /* Histogram samples carry _bucket/_sum/_count suffixes. */
        if (n >= tl && strncmp(ps->typed[i], name, tl) == 0 &&
            (n == tl || strncmp(name + tl, "_bucket", n - tl) == 0 ||
             strncmp(name + tl, "_sum", n - tl) == 0 ||
             strncmp(name + tl, "_count", n - tl) == 0)) {
            return true;
        }
    }
    return false;
}

/* Parse the whole text; fail the test on any malformed line. */
static void parse_exposition(const char *text, struct parsed *ps)
{
    memset(ps, 0, sizeof *ps);
    const char *line = text;
    while (*line != '\0') {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl); /* every line ends with \n */
        if (strncmp(line, "# TYPE ", 7) == 0) {
            size_t n = name_len(line + 7);
            assert_true(n > 0 && n < sizeof ps->typed[0]);
            assert_true(ps->ntyped < FAMILIES_MAX);
            memcpy(ps->typed[ps->ntyped], line + 7, n);
            ps->typed[ps->ntyped++][n] = '\0';
        } else if (line[0] != '#') {
            size_t n = name_len(line);
            assert_true(n > 0);
            assert_true(family_typed(ps, line, n));
            const char *p = skip_labels(line + n);
            assert_non_null(p);
            assert_int_equal(*p, ' ');
            char *end = NULL;
            strtod(p + 1, &end);
            assert_ptr_equal(end, nl);
            ps->samples++;
        }
        line = nl + 1;
    }
}

static void metrics_text_is_valid_exposition_format(void **state)
{
    struct fixture *f = *state;
    char *text = srv_mon_metrics_text(&f->snap, true);
    struct parsed ps;
    assert_non_null(text);
    parse_exposition(text, &ps);
    assert_true(ps.ntyped > 20);
    assert_non_null(strstr(text, "keel_in_msgs_total 42\n"));
    assert_non_null(strstr(text, "keel_raft_term{group=\"S0\"} 3\n"));
    assert_non_null(strstr(text, "{group=\"we\\\"ird\\\\\"}"));
    free(text);
}

static void metrics_histogram_buckets_are_cumulative(void **state)
{
    struct fixture *f = *state;
    char *text = srv_mon_metrics_text(&f->snap, true);
    assert_non_null(text);
    /* 50us <= 0.0001 s; 3 ms <= 0.005 s; the huge one only in +Inf. */
    assert_non_null(strstr(
        text, "keel_js_puback_latency_seconds_bucket{le=\"0.0001\"} 1\n"));
    assert_non_null(strstr(
        text, "keel_js_puback_latency_seconds_bucket{le=\"0.005\"} 2\n"));
    assert_non_null(
        strstr(text, "keel_js_puback_latency_seconds_bucket{le=\"10\"} 2\n"));
    assert_non_null(
        strstr(text, "keel_js_puback_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(text, "keel_js_puback_latency_seconds_count 3\n"));
    free(text);
}

/* Loop turns: cumulative buckets in seconds; the longest turn by phase. */
static void metrics_show_loop_turns(void **state)
{
    struct fixture *f = *state;
    f->snap.turn.turns = 6;
    f->snap.turn.hist[0] = 3; /* < 1 ms */
    f->snap.turn.hist[3] = 2; /* < 1 s */
    f->snap.turn.hist[5] = 1; /* >= 5 s */
    f->snap.turn.max_ms = 4700;
    f->snap.turn.max_phase = SRV_TURN_LINK_READ;
    char *text = srv_mon_metrics_text(&f->snap, true);
    assert_non_null(text);
    assert_non_null(
        strstr(text, "keel_loop_turn_seconds_bucket{le=\"0.1\"} 3\n"));
    assert_non_null(
        strstr(text, "keel_loop_turn_seconds_bucket{le=\"5\"} 5\n"));
    assert_non_null(
        strstr(text, "keel_loop_turn_seconds_bucket{le=\"+Inf\"} 6\n"));
    assert_non_null(strstr(text, "keel_loop_turn_seconds_count 6\n"));
    assert_non_null(strstr(
        text, "keel_loop_turn_max_seconds{phase=\"link read\"} 4.700\n"));
    free(text);
}

static void metrics_without_jetstream_has_no_raft_families(void **state)
{
    struct fixture *f = *state;
    f->snap.js_enabled = false;
    char *text = srv_mon_metrics_text(&f->snap, true);
    struct parsed ps;
    assert_non_null(text);
    parse_exposition(text, &ps);
    assert_null(strstr(text, "keel_raft_term"));
    assert_non_null(strstr(text, "keel_jetstream_enabled 0\n"));
    free(text);
}

/* Issue 21: an operator sees a group's InstallSnapshot counters, and the
 * refusals of one snapshot in a row that stop the group when they repeat
 * (docs/operations.md), in /metrics and in /jsz, with the last failure's
 * text in /jsz; a group that never took or sent a transfer shows none in
 * /jsz. */
static void install_counters_are_exported(void **state)
{
    struct fixture *f = *state;
    struct srv_mon_group *g = &f->streams[0].group;
    g->installs = 2;
    g->install_sends = 7;
    g->install_failures = 4;
    g->install_repeats = 3;
    snprintf(g->install_error, sizeof g->install_error,
             "snapshot receive: install of 9 refused: snapshot 12 is held");
    char *text = srv_mon_metrics_text(&f->snap, true);
    struct parsed ps;
    assert_non_null(text);
    parse_exposition(text, &ps);
    assert_non_null(
        strstr(text, "keel_raft_snapshot_installs_total{group=\"S0\"} 2\n"));
    assert_non_null(
        strstr(text, "keel_raft_snapshot_sends_total{group=\"S0\"} 7\n"));
    assert_non_null(
        strstr(text, "keel_raft_snapshot_failures_total{group=\"S0\"} 4\n"));
    assert_non_null(
        strstr(text, "keel_raft_snapshot_install_repeats{group=\"S0\"} 3\n"));
    assert_non_null(strstr(
        text, "keel_raft_snapshot_install_repeats{group=\"_meta_\"} 0\n"));
    free(text);
    text = srv_mon_jsz_json(&f->snap, "ID", true);
    assert_non_null(text);
    json_t *o = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(o);
    json_t *gj = json_object_get(
        json_array_get(json_object_get(o, "stream_detail"), 0), "group");
    assert_non_null(gj);
    assert_int_equal(json_integer_value(json_object_get(gj, "install_repeats")),
                     3);
    assert_int_equal(
        json_integer_value(json_object_get(gj, "snapshot_installs")), 2);
    assert_int_equal(json_integer_value(json_object_get(gj, "snapshot_sends")),
                     7);
    assert_int_equal(
        json_integer_value(json_object_get(gj, "snapshot_failures")), 4);
    /* What the last failure was, next to the count (issue 21: 28,016
     * failures and nothing said why). */
    assert_string_equal(
        json_string_value(json_object_get(gj, "snapshot_last_error")),
        "snapshot receive: install of 9 refused: snapshot 12 is held");
    gj = json_object_get(json_array_get(json_object_get(o, "stream_detail"), 1),
                         "group");
    assert_non_null(gj);
    assert_null(json_object_get(gj, "install_repeats"));
    assert_null(json_object_get(gj, "snapshot_last_error"));
    json_decref(o);
}

static void connz_pages_with_offset_and_limit(void **state)
{
    struct fixture *f = *state;
    char *s = srv_mon_connz_json(&f->snap, "ID", 1, 1);
    json_t *o = json_loads(s, 0, NULL);
    assert_non_null(o);
    assert_int_equal(json_integer_value(json_object_get(o, "num_connections")),
                     1);
    assert_int_equal(json_integer_value(json_object_get(o, "total")), 3);
    json_t *c = json_array_get(json_object_get(o, "connections"), 0);
    assert_int_equal(json_integer_value(json_object_get(c, "cid")), 2);
    assert_int_equal(json_integer_value(json_object_get(c, "in_msgs")), 10);
    assert_string_equal(json_string_value(json_object_get(c, "uptime")), "2s");
    assert_string_equal(json_string_value(json_object_get(c, "idle")), "1s");
    json_decref(o);
    free(s);
    s = srv_mon_connz_json(&f->snap, "ID", 5, 10);
    o = json_loads(s, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(o, "num_connections")),
                     0);
    json_decref(o);
    free(s);
}

static void healthy_when_every_group_is_current(void **state)
{
    struct fixture *f = *state;
    char why[256] = "";
    assert_true(srv_mon_healthy(&f->snap, why, sizeof why));
}

static void unhealthy_names_the_faulty_group(void **state)
{
    struct fixture *f = *state;
    char why[256] = "";
    f->streams[0].group.faulty = 7;
    assert_false(srv_mon_healthy(&f->snap, why, sizeof why));
    assert_non_null(strstr(why, "S0"));
    assert_non_null(strstr(why, "faulty"));
}

static void unhealthy_while_amnesiac_or_failed(void **state)
{
    struct fixture *f = *state;
    char why[256] = "";
    f->snap.meta.amnesiac = true;
    assert_false(srv_mon_healthy(&f->snap, why, sizeof why));
    assert_non_null(strstr(why, "amnesiac"));
    f->snap.meta.amnesiac = false;
    f->streams[1].group.failed = true;
    assert_false(srv_mon_healthy(&f->snap, why, sizeof why));
    assert_non_null(strstr(why, "store error"));
}

static void unhealthy_without_a_meta_leader(void **state)
{
    struct fixture *f = *state;
    char why[256] = "";
    f->snap.meta.leader = 0;
    f->snap.meta.role = "follower";
    assert_false(srv_mon_healthy(&f->snap, why, sizeof why));
    assert_non_null(strstr(why, "meta leader"));
}

static void unhealthy_while_applied_lags_commit(void **state)
{
    struct fixture *f = *state;
    char why[256] = "";
    f->streams[0].group.commit = SRV_MON_HEALTH_LAG_MAX + 100;
    assert_false(srv_mon_healthy(&f->snap, why, sizeof why));
    assert_non_null(strstr(why, "not caught up"));
    f->streams[0].group.commit = 100; /* a short lag is normal */
    assert_true(srv_mon_healthy(&f->snap, why, sizeof why));
}

static void unhealthy_when_a_stream_could_not_open(void **state)
{
    struct fixture *f = *state;
    char why[256] = "";
    f->snap.streams_unopened = 1;
    snprintf(f->snap.unopened_why, sizeof f->snap.unopened_why,
             "stream X not opened: faulty");
    assert_false(srv_mon_healthy(&f->snap, why, sizeof why));
    assert_non_null(strstr(why, "stream X not opened"));
}

static void durations_read_like_nats_server(void **state)
{
    char buf[32];
    (void)state;
    srv_mon_duration(999, buf, sizeof buf);
    assert_string_equal(buf, "0s");
    srv_mon_duration(185000, buf, sizeof buf);
    assert_string_equal(buf, "3m5s");
    srv_mon_duration(7201000, buf, sizeof buf);
    assert_string_equal(buf, "2h0m1s");
    srv_mon_duration(93784000, buf, sizeof buf);
    assert_string_equal(buf, "1d2h3m4s");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(metrics_text_is_valid_exposition_format,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            metrics_histogram_buckets_are_cumulative, setup, teardown),
        cmocka_unit_test_setup_teardown(metrics_show_loop_turns, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            metrics_without_jetstream_has_no_raft_families, setup, teardown),
        cmocka_unit_test_setup_teardown(install_counters_are_exported, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(connz_pages_with_offset_and_limit,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(healthy_when_every_group_is_current,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(unhealthy_names_the_faulty_group, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unhealthy_while_amnesiac_or_failed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(unhealthy_without_a_meta_leader, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unhealthy_while_applied_lags_commit,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(unhealthy_when_a_stream_could_not_open,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(durations_read_like_nats_server, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
