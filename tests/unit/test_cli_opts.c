/* cli_opts: keel's flag parser and connection options. Usage errors must be
 * KEEL_EUSAGE (exit 2) with a message naming the flag; values parse the way
 * the nats CLI spells them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct fixture {
    struct cli_cmd cmd;
    struct cli_conn_opts conn;
    struct cli_args args;
    struct cli_list headers;
    int64_t count;
    int64_t size;
    bool raw;
    bool help;
    char errmsg[KEEL_ERRMSG_MAX];
    struct cli_flag flags[5];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    f->cmd = (struct cli_cmd){"pub", NULL, "SUBJECT [BODY]", "test", 1, 2};
    cli_conn_opts_init(&f->conn);
    f->count = 1;
    struct cli_flag flags[] = {
        {"count", 0, CLI_FLAG_INT, &f->count, "N", "count"},
        {"size", 0, CLI_FLAG_SIZE, &f->size, "BYTES", "size"},
        {"header", 'H', CLI_FLAG_LIST, &f->headers, "K:V", "header"},
        {"raw", 'r', CLI_FLAG_BOOL, &f->raw, NULL, "raw"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    memcpy(f->flags, flags, sizeof flags);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

/* Parse a NULL-terminated argv (argv[0] is the command name). */
static int parse(struct fixture *f, char **argv)
{
    int argc = 0;
    while (argv[argc] != NULL) {
        argc++;
    }
    f->errmsg[0] = '\0';
    return cli_parse(&f->cmd, f->flags, &f->conn, argc, argv, &f->args,
                     &f->help, f->errmsg);
}

static void flags_and_positionals_mix_in_any_order(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"pub", "--count",    "3",      "subj", "-H",
                    "A:1", "--raw",      "body",   "-H",   "B:2",
                    "-s",  "nats://h:1", "--user", "u",    "--password=p",
                    NULL};
    assert_int_equal(parse(f, argv), 0);
    assert_int_equal(f->count, 3);
    assert_true(f->raw);
    assert_int_equal(f->args.count, 2);
    assert_string_equal(f->args.items[0], "subj");
    assert_string_equal(f->args.items[1], "body");
    assert_int_equal(f->headers.count, 2);
    assert_string_equal(f->headers.items[1], "B:2");
    assert_string_equal(f->conn.servers, "nats://h:1");
    assert_string_equal(f->conn.user, "u");
    assert_string_equal(f->conn.password, "p");
}

static void an_unknown_flag_is_a_usage_error_naming_it(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"pub", "subj", "--bogus", NULL};
    assert_int_equal(parse(f, argv), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "--bogus"));
    char *argv2[] = {"pub", "subj", "-Z", NULL};
    assert_int_equal(parse(f, argv2), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "-Z"));
}

static void a_flag_missing_its_value_is_a_usage_error(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"pub", "subj", "--count", NULL};
    assert_int_equal(parse(f, argv), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "--count"));
}

static void a_bad_number_is_a_usage_error(void **state)
{
    struct fixture *f = *state;
    char *neg[] = {"pub", "subj", "--count", "-1", NULL};
    assert_int_equal(parse(f, neg), KEEL_EUSAGE);
    char *junk[] = {"pub", "subj", "--count=12x", NULL};
    assert_int_equal(parse(f, junk), KEEL_EUSAGE);
    assert_int_equal(f->count, 1);
}

static void sizes_take_binary_suffixes(void **state)
{
    struct fixture *f = *state;
    int64_t v = 0;
    assert_int_equal(cli_parse_value(CLI_FLAG_SIZE, "size", "16", &v, NULL), 0);
    assert_int_equal(v, 16);
    assert_int_equal(cli_parse_value(CLI_FLAG_SIZE, "size", "1KiB", &v, NULL),
                     0);
    assert_int_equal(v, 1024);
    assert_int_equal(cli_parse_value(CLI_FLAG_SIZE, "size", "2m", &v, NULL), 0);
    assert_int_equal(v, 2 * 1024 * 1024);
    assert_int_equal(
        cli_parse_value(CLI_FLAG_SIZE, "size", "3GB", &v, f->errmsg),
        KEEL_EUSAGE);
}

static void durations_read_like_the_nats_cli(void **state)
{
    struct fixture *f = *state;
    int64_t ms = 0;
    assert_int_equal(
        cli_parse_value(CLI_FLAG_DURATION, "timeout", "500ms", &ms, NULL), 0);
    assert_int_equal(ms, 500);
    assert_int_equal(
        cli_parse_value(CLI_FLAG_DURATION, "timeout", "5s", &ms, NULL), 0);
    assert_int_equal(ms, 5000);
    assert_int_equal(
        cli_parse_value(CLI_FLAG_DURATION, "timeout", "2", &ms, NULL), 0);
    assert_int_equal(ms, 2000);
    assert_int_equal(
        cli_parse_value(CLI_FLAG_DURATION, "timeout", "1m", &ms, NULL), 0);
    assert_int_equal(ms, 60000);
    assert_int_equal(
        cli_parse_value(CLI_FLAG_DURATION, "timeout", "0s", &ms, f->errmsg),
        KEEL_EUSAGE);
    assert_int_equal(
        cli_parse_value(CLI_FLAG_DURATION, "timeout", "soon", &ms, f->errmsg),
        KEEL_EUSAGE);
}

static void a_repeatable_flag_stops_at_its_maximum(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < CLI_LIST_ITEMS_MAX; i++) {
        assert_int_equal(cli_parse_value(CLI_FLAG_LIST, "header", "K:V",
                                         &f->headers, f->errmsg),
                         0);
    }
    assert_int_equal(
        cli_parse_value(CLI_FLAG_LIST, "header", "K:V", &f->headers, f->errmsg),
        KEEL_EUSAGE);
    assert_int_equal(f->headers.count, CLI_LIST_ITEMS_MAX);
}

static void double_dash_makes_the_rest_positional(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"pub", "--", "-subj", "--raw", NULL};
    assert_int_equal(parse(f, argv), 0);
    assert_false(f->raw);
    assert_string_equal(f->args.items[0], "-subj");
    assert_string_equal(f->args.items[1], "--raw");
}

static void a_wrong_argument_count_is_a_usage_error(void **state)
{
    struct fixture *f = *state;
    char *none[] = {"pub", "--raw", NULL};
    assert_int_equal(parse(f, none), KEEL_EUSAGE);
    char *three[] = {"pub", "a", "b", "c", NULL};
    assert_int_equal(parse(f, three), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "SUBJECT"));
}

static void help_is_shown_without_checking_arguments(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"pub", "--help", NULL};
    FILE *saved = stdout;
    stdout = fopen("/dev/null", "w");
    assert_non_null(stdout);
    int rv = parse(f, argv);
    fclose(stdout);
    stdout = saved;
    assert_int_equal(rv, 0);
    assert_true(f->help);
}

static void server_lists_are_split_and_bounded(void **state)
{
    struct fixture *f = *state;
    natsOptions *opts = NULL;
    f->conn.servers = "nats://127.0.0.1:4222, nats://127.0.0.1:4223";
    assert_int_equal(cli_options_create(&f->conn, &opts, f->errmsg), 0);
    natsOptions_Destroy(opts);

    f->conn.servers = " , ";
    assert_int_equal(cli_options_create(&f->conn, &opts, f->errmsg),
                     KEEL_EUSAGE);
    char many[CLI_SERVERS_BYTES_MAX / 2] = "";
    for (int i = 0; i <= CLI_SERVERS_MAX; i++) {
        strcat(many, "nats://h:1,");
    }
    f->conn.servers = many;
    assert_int_equal(cli_options_create(&f->conn, &opts, f->errmsg),
                     KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "servers"));
}

/* Count a NULL-terminated argv. */
static int argv_len(char **argv)
{
    int n = 0;
    while (argv[n] != NULL) {
        n++;
    }
    return n;
}

static void leading_connection_flags_move_behind_the_command(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"keel",   "-s", "nats://h:1", "--timeout=2s",
                    "stream", "ls", "--json",     NULL};
    int hoisted = -1;
    assert_int_equal(
        cli_hoist_conn_flags(argv_len(argv), argv, &hoisted, f->errmsg), 0);
    assert_int_equal(hoisted, 3);
    char *want[] = {"keel", "stream",     "ls",          "--json",
                    "-s",   "nats://h:1", "--timeout=2s"};
    for (int i = 0; i < 7; i++) {
        assert_string_equal(argv[i], want[i]);
    }
}

static void hoisted_flags_stay_in_front_of_a_double_dash(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"keel", "--server", "u", "pub", "--", "-x", NULL};
    int hoisted = -1;
    assert_int_equal(
        cli_hoist_conn_flags(argv_len(argv), argv, &hoisted, f->errmsg), 0);
    assert_int_equal(hoisted, 2);
    assert_string_equal(argv[1], "pub");
    assert_string_equal(argv[2], "--server");
    assert_string_equal(argv[3], "u");
    assert_string_equal(argv[4], "--");
}

static void only_connection_flags_are_hoisted(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"keel", "--json", "-s", "u", "stream", NULL};
    int hoisted = -1;
    assert_int_equal(
        cli_hoist_conn_flags(argv_len(argv), argv, &hoisted, f->errmsg), 0);
    assert_int_equal(hoisted, 0);
    assert_string_equal(argv[1], "--json");
    char *plain[] = {"keel", "stream", "-s", "u", NULL};
    assert_int_equal(
        cli_hoist_conn_flags(argv_len(plain), plain, &hoisted, f->errmsg), 0);
    assert_int_equal(hoisted, 0);
    assert_string_equal(plain[1], "stream");
}

static void
a_leading_connection_flag_without_value_is_a_usage_error(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"keel", "-s", NULL};
    int hoisted = -1;
    assert_int_equal(
        cli_hoist_conn_flags(argv_len(argv), argv, &hoisted, f->errmsg),
        KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "-s"));
}

static void hoisted_flags_parse_as_the_commands_own(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"pub", "--user", "u", "subj", "body", NULL};
    int hoisted = 0;
    assert_int_equal(
        cli_hoist_conn_flags(argv_len(argv), argv, &hoisted, f->errmsg), 0);
    assert_int_equal(parse(f, argv), 0);
    assert_string_equal(f->conn.user, "u");
    assert_string_equal(f->args.items[0], "subj");
    assert_string_equal(f->args.items[1], "body");
}

static void bad_subjects_are_usage_errors_saying_why(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(cli_subject_check("orders.new", false, f->errmsg), 0);
    assert_int_equal(cli_subject_check("orders.*.>", true, f->errmsg), 0);
    assert_int_equal(cli_subject_check("a b", true, f->errmsg), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "white space"));
    assert_int_equal(cli_subject_check("a..b", true, f->errmsg), KEEL_EUSAGE);
    assert_int_equal(cli_subject_check(".a", true, f->errmsg), KEEL_EUSAGE);
    assert_int_equal(cli_subject_check("a.", true, f->errmsg), KEEL_EUSAGE);
    assert_int_equal(cli_subject_check("", true, f->errmsg), KEEL_EUSAGE);
    assert_int_equal(cli_subject_check("a.>", false, f->errmsg), KEEL_EUSAGE);
    assert_non_null(strstr(f->errmsg, "wildcards"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(flags_and_positionals_mix_in_any_order),
        T(an_unknown_flag_is_a_usage_error_naming_it),
        T(a_flag_missing_its_value_is_a_usage_error),
        T(a_bad_number_is_a_usage_error),
        T(sizes_take_binary_suffixes),
        T(durations_read_like_the_nats_cli),
        T(a_repeatable_flag_stops_at_its_maximum),
        T(double_dash_makes_the_rest_positional),
        T(a_wrong_argument_count_is_a_usage_error),
        T(help_is_shown_without_checking_arguments),
        T(server_lists_are_split_and_bounded),
        T(leading_connection_flags_move_behind_the_command),
        T(hoisted_flags_stay_in_front_of_a_double_dash),
        T(only_connection_flags_are_hoisted),
        T(a_leading_connection_flag_without_value_is_a_usage_error),
        T(hoisted_flags_parse_as_the_commands_own),
        T(bad_subjects_are_usage_errors_saying_why),
#undef T
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
