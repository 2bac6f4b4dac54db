/* srv_confparse and srv_config: the NATS config format subset, flags, and
 * flags overriding the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_config.h"
#include "srv_confparse.h"

struct fixture {
    struct srv_config cfg;
    char path[64];
    char errmsg[KEEL_ERRMSG_MAX];
    json_t *root;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    if (f->path[0] != '\0') {
        unlink(f->path);
    }
    json_decref(f->root);
    free(f);
    return 0;
}

static int parse(struct fixture *f, const char *text)
{
    json_decref(f->root);
    f->root = NULL;
    return srv_confparse(text, strlen(text), &f->root, f->errmsg);
}

static void write_file(struct fixture *f, const char *text)
{
    snprintf(f->path, sizeof f->path, "/tmp/keel-cfg-XXXXXX");
    int fd = mkstemp(f->path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void every_separator_comment_and_nesting_form_parses(void **state)
{
    struct fixture *f = *state;
    const char *text = "# comment\n"
                       "port: 4333\n"
                       "server_name = \"n 1\"  // trailing comment\n"
                       "max_payload 2MB\n"
                       "debug: true; trace: off\n"
                       "ping_interval: '30s'\n"
                       "jetstream {\n"
                       "  store_dir: /var/lib/keel\n"
                       "}\n"
                       "cluster { name: c1, routes: [\n"
                       "  nats://a:6222, \"nats://b:6222\"\n"
                       "] }\n";

    assert_int_equal(parse(f, text), 0);
    assert_int_equal(json_integer_value(json_object_get(f->root, "port")),
                     4333);
    assert_string_equal(
        json_string_value(json_object_get(f->root, "server_name")), "n 1");
    assert_int_equal(
        json_integer_value(json_object_get(f->root, "max_payload")),
        2 * 1024 * 1024);
    assert_true(json_is_true(json_object_get(f->root, "debug")));
    assert_true(json_is_false(json_object_get(f->root, "trace")));
    json_t *js = json_object_get(f->root, "jetstream");
    assert_string_equal(json_string_value(json_object_get(js, "store_dir")),
                        "/var/lib/keel");
    json_t *routes =
        json_object_get(json_object_get(f->root, "cluster"), "routes");
    assert_int_equal(json_array_size(routes), 2);
    assert_string_equal(json_string_value(json_array_get(routes, 1)),
                        "nats://b:6222");
}

static void unquoted_sizes_read_as_nats_server_reads_them(void **state)
{
    struct fixture *f = *state;
    const struct {
        const char *key;
        json_int_t want;
    } sizes[] = {{"a", 10000},      {"b", 10240},     {"c", 10240},
                 {"d", 10240},      {"e", 2000000},   {"f", 2 * 1048576},
                 {"g", 1000000000}, {"h", 1LL << 30}, {"i", 1000000000000LL},
                 {"j", 1LL << 40}};

    assert_int_equal(parse(f, "a: 10K\nb: 10KB\nc: 10ki\nd: 10KiB\n"
                              "e: 2M\nf: 2MB\ng: 1G\nh: 1GB\ni: 1T\n"
                              "j: 1TiB\n"),
                     0);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        assert_int_equal(
            json_integer_value(json_object_get(f->root, sizes[i].key)),
            sizes[i].want);
    }
}

static void malformed_config_names_the_line(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(parse(f, "a: 1\nb {\n c: 2\n"), KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "line 4"));
    assert_int_equal(parse(f, "a: \"open\n"), KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "line 1"));
    assert_int_equal(parse(f, "}"), KEEL_ECONFIG);
    assert_int_equal(parse(f, "a: [1, 2"), KEEL_ECONFIG);
    assert_int_equal(parse(f, "a:\n"), KEEL_ECONFIG);
}

static void nesting_past_the_limit_is_refused(void **state)
{
    struct fixture *f = *state;
    char text[256] = "";

    for (int i = 0; i < SRV_CONFIG_DEPTH_MAX + 2; i++) {
        strcat(text, "a {");
    }
    assert_int_equal(parse(f, text), KEEL_ELIMIT);
}

static void sizes_and_durations_take_suffixes(void **state)
{
    (void)state;
    uint64_t v;

    assert_true(srv_parse_size("64K", &v));
    assert_int_equal(v, 64 * 1024);
    assert_true(srv_parse_size("1MB", &v));
    assert_int_equal(v, 1024 * 1024);
    assert_false(srv_parse_size("1XB", &v));
    assert_false(srv_parse_size("-1", &v));
    assert_true(srv_parse_duration_ms("2m", &v));
    assert_int_equal(v, 120000);
    assert_true(srv_parse_duration_ms("500ms", &v));
    assert_int_equal(v, 500);
    assert_true(srv_parse_duration_ms("10", &v));
    assert_int_equal(v, 10000);
    assert_false(srv_parse_duration_ms("soon", &v));
}

static void one_parser_bounds_sizes_durations_and_config_integers(void **state)
{
    (void)state;
    uint64_t v = 0;
    int64_t i = 0;

    assert_true(srv_parse_size("18446744073709551615", &v));
    assert_true(v == UINT64_MAX);
    assert_false(srv_parse_size("18446744073709551616", &v));
    assert_false(srv_parse_size("17179869184GB", &v)); /* 2^64 */
    assert_true(srv_parse_size("16777215tb", &v));
    assert_false(srv_parse_duration_ms("2M", &v)); /* m, not M, is minutes */
    assert_true(srv_parse_duration_ms("1h", &v));
    assert_int_equal(v, 3600000);
    assert_true(srv_parse_u64("18446744073709551615", 20, &v));
    assert_true(v == UINT64_MAX);
    assert_false(srv_parse_u64("18446744073709551616", 20, &v));
    assert_false(srv_parse_u64("000000000000000000001", 21, &v));
    assert_false(srv_parse_u64("", 0, &v));
    assert_false(srv_parse_u64("+1", 2, &v));
    assert_true(srv_parse_u64("12x", 2, &v)); /* only len bytes are read */
    assert_int_equal(v, 12);
    assert_true(srv_parse_conf_int("-2MB", 4, &i));
    assert_int_equal(i, -2 * 1048576);
    assert_true(srv_parse_conf_int("9223372036854775807", 19, &i));
    assert_true(i == INT64_MAX);
    assert_false(srv_parse_conf_int("9223372036854775808", 19, &i));
    assert_true(srv_parse_conf_int("9E", 2, &i));
    assert_false(srv_parse_conf_int("10E", 3, &i));
    assert_false(srv_parse_conf_int("-", 1, &i));
    assert_false(srv_parse_conf_int("2s", 2, &i));
}

static int from_args(struct fixture *f, const char **argv)
{
    int argc = 0;
    while (argv[argc] != NULL) {
        argc++;
    }
    return srv_config_from_args(&f->cfg, argc, (char **)argv, f->errmsg);
}

/* nats-server 2.9.10 reads an unquoted `ping_interval: 2m` as 2000000
 * seconds (with a warning that it should be a duration); keeld reads the
 * value of a duration key as a duration, and every other key's 2m as the
 * size nats-server reads. */
static void unquoted_durations_under_duration_keys_are_durations(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {"keeld", "-c", NULL, NULL};

    write_file(f, "ping_interval: 2m\nmax_payload: 2m\n"
                  "authorization { token: s3cr3t, timeout: 3m }\n");
    argv[2] = f->path;
    assert_int_equal(from_args(f, argv), 0);
    assert_int_equal(f->cfg.ping_interval_ms, 120000);
    assert_int_equal(f->cfg.auth_timeout_ms, 180000);
    assert_int_equal(f->cfg.max_payload, 2000000);
    unlink(f->path);

    write_file(f, "ping_interval: 90\n");
    argv[2] = f->path;
    assert_int_equal(from_args(f, argv), 0);
    assert_int_equal(f->cfg.ping_interval_ms, 90000);
    unlink(f->path);

    write_file(f, "ping_interval: 2M\n");
    argv[2] = f->path;
    assert_int_equal(from_args(f, argv), KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "ping_interval '2M'"));
}

static void flags_spelled_like_nats_server_set_the_config(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {"keeld",       "-a",
                          "127.0.0.1",   "-p",
                          "0",           "-m",
                          "0",           "-sd",
                          "/tmp/d",      "--ports_file_dir=/tmp/p",
                          "-n",          "n1",
                          "-DV",         "--max_payload",
                          "64K",         "--fsync",
                          "interval:50", "--cluster",
                          "nats://x:1",  NULL};

    assert_int_equal(from_args(f, argv), 0);
    assert_string_equal(f->cfg.addr, "127.0.0.1");
    assert_int_equal(f->cfg.port, 0);
    assert_int_equal(f->cfg.http_port, 0);
    assert_string_equal(f->cfg.store_dir, "/tmp/d");
    assert_string_equal(f->cfg.ports_file_dir, "/tmp/p");
    assert_string_equal(f->cfg.name, "n1");
    assert_true(f->cfg.debug && f->cfg.trace);
    assert_int_equal(f->cfg.max_payload, 64 * 1024);
    assert_int_equal(f->cfg.fsync, SRV_FSYNC_INTERVAL);
    assert_int_equal(f->cfg.fsync_interval_ms, 50);
    assert_string_equal(f->cfg.cluster_listen, "nats://x:1");
}

static void unknown_flags_and_bad_values_are_usage_errors(void **state)
{
    struct fixture *f = *state;
    const char *unknown[] = {"keeld", "--bogus", NULL};
    const char *badport[] = {"keeld", "-p", "70000", NULL};
    const char *missing[] = {"keeld", "-p", NULL};
    const char *badfsync[] = {"keeld", "--fsync", "sometimes", NULL};
    const char *bigpay[] = {"keeld", "--max_payload", "1GB", NULL};

    assert_int_equal(from_args(f, unknown), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "--bogus"));
    assert_int_equal(from_args(f, badport), KEEL_EUSAGE);
    assert_int_equal(from_args(f, missing), KEEL_EUSAGE);
    assert_int_equal(from_args(f, badfsync), KEEL_EUSAGE);
    assert_int_equal(from_args(f, bigpay), KEEL_EUSAGE);
}

static void port_minus_one_means_any_port_as_in_nats_server(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {"keeld", "-p", "-1", NULL};
    assert_int_equal(from_args(f, argv), 0);
    assert_int_equal(f->cfg.port, 0);
    write_file(f, "listen: 127.0.0.1:-1\n");
    const char *cfg[] = {"keeld", "-c", f->path, NULL};
    assert_int_equal(from_args(f, cfg), 0);
    assert_int_equal(f->cfg.port, 0);
}

static void flags_override_the_config_file(void **state)
{
    struct fixture *f = *state;
    write_file(f, "listen: 10.0.0.1:5000\nserver_name: fromfile\n"
                  "max_pending: 1MB\nping_interval: 2s\nping_max: 3\n"
                  "http: 8300\n");
    const char *argv[] = {"keeld", "-p", "6000", "-c", f->path, NULL};

    assert_int_equal(from_args(f, argv), 0);
    assert_string_equal(f->cfg.addr, "10.0.0.1");
    assert_int_equal(f->cfg.port, 6000);
    assert_string_equal(f->cfg.name, "fromfile");
    assert_int_equal(f->cfg.max_pending, 1024 * 1024);
    assert_int_equal(f->cfg.ping_interval_ms, 2000);
    assert_int_equal(f->cfg.ping_max, 3);
    assert_int_equal(f->cfg.http_port, 8300);
}

static void a_bad_value_in_the_file_is_a_config_error(void **state)
{
    struct fixture *f = *state;
    write_file(f, "port: lots\n");
    const char *argv[] = {"keeld", "-c", f->path, NULL};

    assert_int_equal(from_args(f, argv), KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "port"));
}

static void dash_js_is_accepted_as_nats_server_spells_it(void **state)
{
    struct fixture *f = *state;
    const char *shortf[] = {"keeld", "-js", "-sd", "/tmp/d", NULL};
    const char *longf[] = {"keeld", "--jetstream", NULL};
    const char *valued[] = {"keeld", "-js=false", NULL};

    assert_int_equal(from_args(f, shortf), 0);
    assert_string_equal(f->cfg.store_dir, "/tmp/d");
    assert_int_equal(from_args(f, longf), 0);
    assert_int_equal(from_args(f, valued), KEEL_EUSAGE);
}

static int from_file(struct fixture *f, const char *text)
{
    const char *argv[] = {"keeld", "-c", f->path, NULL};

    if (f->path[0] != '\0') {
        unlink(f->path);
    }
    write_file(f, text);
    return from_args(f, argv);
}

static void jetstream_block_sets_the_store_and_limits(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(from_file(f, "jetstream: enabled\n"), 0);
    assert_int_equal(f->cfg.js_max_memory, -1);
    assert_int_equal(f->cfg.js_max_file, -1);
    assert_int_equal(from_file(f, "jetstream {\n  store: /tmp/s1\n"
                                  "  max_mem: 1GB\n"
                                  "  max_file_store: \"3G\"\n}\n"),
                     0);
    assert_string_equal(f->cfg.store_dir, "/tmp/s1");
    assert_int_equal(f->cfg.js_max_memory, 1LL << 30);
    assert_int_equal(f->cfg.js_max_file, 3LL << 30);
    assert_int_equal(from_file(f, "jetstream { enabled: true, "
                                  "max_memory_store: 1048576, "
                                  "max_file: -1, max_streams: 3 }\n"),
                     0);
    assert_int_equal(f->cfg.js_max_memory, 1048576);
    assert_int_equal(f->cfg.js_max_file, -1);
    assert_int_equal(f->cfg.js_max_streams, 3);
    assert_int_equal(from_file(f, "jetstream: true\n"), 0);
}

static void the_scrub_pass_is_a_flag_and_a_jetstream_key(void **state)
{
    struct fixture *f = *state;
    const char *flag[] = {"keeld", "--scrub_pass", "2s", NULL};
    const char *off[] = {"keeld", "--scrub_pass", "0", NULL};
    const char *bad[] = {"keeld", "--scrub_pass", "10ms", NULL};

    assert_int_equal(from_file(f, "port: 4222\n"), 0);
    assert_int_equal(f->cfg.scrub_pass_ms, 24ull * 3600 * 1000);
    assert_int_equal(from_args(f, flag), 0);
    assert_int_equal(f->cfg.scrub_pass_ms, 2000);
    assert_int_equal(from_args(f, off), 0);
    assert_int_equal(f->cfg.scrub_pass_ms, 0);
    assert_int_equal(from_args(f, bad), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "scrub_pass"));
    assert_int_equal(from_file(f, "jetstream { scrub_pass: 12h }\n"), 0);
    assert_int_equal(f->cfg.scrub_pass_ms, 12ull * 3600 * 1000);
    assert_int_equal(from_file(f, "jetstream { scrub_pass: 0 }\n"), 0);
    assert_int_equal(f->cfg.scrub_pass_ms, 0);
    assert_int_equal(from_file(f, "jetstream { scrub_pass: often }\n"),
                     KEEL_ECONFIG);
}

/* nats-server 2.9.10 refuses a domain with '.', '*' or '>' at start-up;
 * keeld also one JSON would escape (it goes unescaped into a PubAck). */
static void the_jetstream_domain_is_read_and_checked(void **state)
{
    struct fixture *f = *state;
    const char *bad[] = {
        "jetstream { domain: \"a.b\" }\n", "jetstream { domain: \"a*\" }\n",
        "jetstream { domain: \"x y\" }\n", "jetstream { domain: \"\" }\n",
        "jetstream { domain: 7 }\n"};

    assert_int_equal(from_file(f, "port: 4222\n"), 0);
    assert_string_equal(f->cfg.js_domain, "");
    assert_int_equal(from_file(f, "jetstream { domain: HUB }\n"), 0);
    assert_string_equal(f->cfg.js_domain, "HUB");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(from_file(f, bad[i]), KEEL_ECONFIG);
        assert_non_null(strstr(f->errmsg, "domain"));
    }
    char name[SRV_JS_DOMAIN_BYTES_MAX + 2];
    char longer[SRV_JS_DOMAIN_BYTES_MAX + 40];
    memset(name, 'd', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    snprintf(longer, sizeof longer, "jetstream { domain: %s }\n", name);
    assert_int_equal(from_file(f, longer), KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "too long"));
}

static void turning_jetstream_off_or_an_unknown_key_is_refused(void **state)
{
    struct fixture *f = *state;
    const char *off[] = {"jetstream: disabled\n", "jetstream: false\n",
                         "jetstream { enabled: false }\n"};
    const char *bad[] = {"jetstream { key: k }\n", "jetstream { bogus: 1 }\n",
                         "jetstream { max_file_store: lots }\n",
                         "jetstream: maybe\n"};

    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        assert_int_equal(from_file(f, off[i]), KEEL_ECONFIG);
        assert_non_null(strstr(f->errmsg, "always runs JetStream"));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(from_file(f, bad[i]), KEEL_ECONFIG);
    }
    assert_non_null(strstr(f->errmsg, "enabled"));
    assert_int_equal(from_file(f, bad[0]), KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "key: not supported"));
    assert_int_equal(from_file(f, bad[1]), KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "unknown field 'bogus'"));
}

static void a_key_keeld_does_not_read_is_refused_not_ignored(void **state)
{
    struct fixture *f = *state;
    /* nats-server refuses an unknown field; keeld also refuses the ones it
     * knows but does not implement, so accounts never silently go away. */
    const struct {
        const char *text;
        const char *says;
    } bad[] = {
        {"accounts { A { users [ {user: a, password: b} ] } }\n",
         "config key 'accounts': a nats-server setting keeld does not"},
        {"pid_file: /tmp/x.pid\n", "'pid_file': a nats-server setting"},
        {"foo_bar: 1\n", "config key 'foo_bar': unknown field"},
        {"cluster { listen: 127.0.0.1:0, pool_size: 3 }\n",
         "cluster: 'pool_size' is not supported by keeld"},
        {"cluster { tls { cert_file: a, insecure: true } }\n",
         "cluster.tls: 'insecure' is not supported"},
        {"cluster { tls { verify: false } }\n", "verify: false"},
        {"cluster { authorization { user: a, timeout: 2 } }\n",
         "cluster.authorization: 'timeout' is not supported"},
        {"tls { cert_file: a, cipher_suites: [x] }\n",
         "tls: 'cipher_suites' is not supported"},
        {"authorization { user: a, password: b, permissions { } }\n",
         "authorization: 'permissions' is not supported"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(from_file(f, bad[i].text), KEEL_ECONFIG);
        if (strstr(f->errmsg, bad[i].says) == NULL) {
            fail_msg("%s: got '%s'", bad[i].text, f->errmsg);
        }
    }
    assert_int_equal(from_file(f, "logtime: true\nport: 4333\n"), 0);
    assert_int_equal(f->cfg.port, 4333);
    assert_int_equal(from_file(f, "cluster { name: c, listen: "
                                  "127.0.0.1:0, routes: [] }\n"),
                     0);
}

/* Every top-level key docs/operations.md lists sets its option, the same
 * as its flag; a flag-only spelling (-sd, --log, --log-level) is not a
 * file key. */
static void each_top_level_key_sets_its_option(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(from_file(f, "host: 10.0.0.2\nport: 4555\n"
                                  "http_port: 8222\nserver_name: a\n"
                                  "store_dir: /tmp/k1\ndebug: true\n"
                                  "trace: true\nlogfile: /tmp/l1\n"
                                  "log_level: info\nports_file_dir: /tmp\n"
                                  "max_payload: 2MB\nsegment_size: 8MB\n"
                                  "snapshot_entries: 5000\nscrub_pass: 1h\n"
                                  "max_pending: 3MB\nping_interval: 5s\n"
                                  "ping_max: 4\nfsync: always\n"
                                  "max_connections: 10\nmax_subscriptions: 20\n"
                                  "max_header_size: 4KB\n"),
                     0);
    assert_string_equal(f->cfg.addr, "10.0.0.2");
    assert_int_equal(f->cfg.port, 4555);
    assert_int_equal(f->cfg.http_port, 8222);
    assert_string_equal(f->cfg.name, "a");
    assert_string_equal(f->cfg.store_dir, "/tmp/k1");
    assert_true(f->cfg.debug);
    assert_true(f->cfg.trace);
    assert_string_equal(f->cfg.log_file, "/tmp/l1");
    assert_string_equal(f->cfg.log_level, "info");
    assert_string_equal(f->cfg.ports_file_dir, "/tmp");
    assert_int_equal(f->cfg.max_payload, 2 * 1024 * 1024);
    assert_int_equal(f->cfg.segment_bytes, 8 * 1024 * 1024);
    assert_int_equal(f->cfg.snapshot_entries, 5000);
    assert_int_equal(f->cfg.scrub_pass_ms, 3600 * 1000);
    assert_int_equal(f->cfg.max_pending, 3 * 1024 * 1024);
    assert_int_equal(f->cfg.ping_interval_ms, 5000);
    assert_int_equal(f->cfg.ping_max, 4);
    assert_int_equal(f->cfg.fsync, SRV_FSYNC_ALWAYS);
    assert_int_equal(f->cfg.max_connections, 10);
    assert_int_equal(f->cfg.max_subs, 20);
    assert_int_equal(f->cfg.max_header_bytes, 4 * 1024);

    /* The other spellings of the same options. */
    assert_int_equal(from_file(f, "net: 10.0.0.3\nmonitor_port: 8223\n"
                                  "name: b\nlog_file: /tmp/l2\n"
                                  "max_conn: 11\nmax_subs: 21\n"),
                     0);
    assert_string_equal(f->cfg.addr, "10.0.0.3");
    assert_int_equal(f->cfg.http_port, 8223);
    assert_string_equal(f->cfg.name, "b");
    assert_string_equal(f->cfg.log_file, "/tmp/l2");
    assert_int_equal(f->cfg.max_connections, 11);
    assert_int_equal(f->cfg.max_subs, 21);
    assert_int_equal(from_file(f, "addr: 10.0.0.4\nhttps_port: 8224\n"), 0);
    assert_string_equal(f->cfg.addr, "10.0.0.4");
    assert_int_equal(f->cfg.http_port, 8224);
    assert_true(f->cfg.https);

    static const char *const flag_only[] = {"sd: /tmp/k2\n", "log: /tmp/l3\n",
                                            "log-level: info\n"};
    for (size_t i = 0; i < sizeof flag_only / sizeof flag_only[0]; i++) {
        assert_int_equal(from_file(f, flag_only[i]), KEEL_ECONFIG);
        if (strstr(f->errmsg, "unknown field") == NULL) {
            fail_msg("%s: got '%s'", flag_only[i], f->errmsg);
        }
    }
}

/* cluster, authorization and tls must be { } blocks. */
static void a_block_key_with_a_plain_value_is_refused(void **state)
{
    struct fixture *f = *state;
    static const char *const bad[] = {"cluster: 5\n", "authorization: a\n",
                                      "tls: true\n"};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(from_file(f, bad[i]), KEEL_ECONFIG);
        if (strstr(f->errmsg, "expected a { } block") == NULL) {
            fail_msg("%s: got '%s'", bad[i], f->errmsg);
        }
    }
}

static void server_tags_are_read_as_nats_server_reads_them(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(from_file(f, "server_tags: [\"AZ:1\", ssd, \"az:1\"]\n"),
                     0);
    assert_int_equal(f->cfg.server_tags.n, 2); /* lowercased, once each */
    assert_string_equal(f->cfg.server_tags.t[0], "az:1");
    assert_string_equal(f->cfg.server_tags.t[1], "ssd");
    assert_int_equal(from_file(f, "server_tags: one\n"), 0);
    assert_int_equal(f->cfg.server_tags.n, 1);
    assert_string_equal(f->cfg.server_tags.t[0], "one");
    assert_int_equal(from_file(f, "server_tags: [\"\"]\n"), KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "config key 'server_tags': tags:"));
}

static void signal_takes_a_nats_server_command_and_a_pid(void **state)
{
    struct fixture *f = *state;
    const char *ldm[] = {"keeld", "--signal", "ldm=1234", NULL};
    const char *term[] = {"keeld", "-sl", "term=/run/keeld.pid", NULL};
    const char *nopid[] = {"keeld", "--signal", "ldm", NULL};
    const char *reopen[] = {"keeld", "--signal", "reopen=1", NULL};

    assert_int_equal(from_args(f, ldm), 0);
    assert_int_equal(f->cfg.signal_num, SIGUSR2);
    assert_string_equal(f->cfg.signal_pid, "1234");
    assert_int_equal(from_args(f, term), 0);
    assert_int_equal(f->cfg.signal_num, SIGTERM);
    assert_string_equal(f->cfg.signal_pid, "/run/keeld.pid");
    assert_int_equal(from_args(f, nopid), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "ldm=PID"));
    assert_int_equal(from_args(f, reopen), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "reopen"));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(every_separator_comment_and_nesting_form_parses),
        T(unquoted_sizes_read_as_nats_server_reads_them),
        T(malformed_config_names_the_line),
        T(nesting_past_the_limit_is_refused),
        T(sizes_and_durations_take_suffixes),
        T(one_parser_bounds_sizes_durations_and_config_integers),
        T(unquoted_durations_under_duration_keys_are_durations),
        T(flags_spelled_like_nats_server_set_the_config),
        T(unknown_flags_and_bad_values_are_usage_errors),
        T(port_minus_one_means_any_port_as_in_nats_server),
        T(flags_override_the_config_file),
        T(a_bad_value_in_the_file_is_a_config_error),
        T(dash_js_is_accepted_as_nats_server_spells_it),
        T(jetstream_block_sets_the_store_and_limits),
        T(the_scrub_pass_is_a_flag_and_a_jetstream_key),
        T(the_jetstream_domain_is_read_and_checked),
        T(turning_jetstream_off_or_an_unknown_key_is_refused),
        T(signal_takes_a_nats_server_command_and_a_pid),
        T(a_key_keeld_does_not_read_is_refused_not_ignored),
        T(server_tags_are_read_as_nats_server_reads_them),
        T(each_top_level_key_sets_its_option),
        T(a_block_key_with_a_plain_value_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
