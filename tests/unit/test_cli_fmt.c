/* Unit tests of keel's human output (units, tables, progress text), the
 * stream config built from flags, the base64 of stream get, and the
 * backup archive format.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_backup.h"
#include "cli_fmt.h"
#include "cli_js.h"
#include "cli_stream_cfg.h"

struct fixture {
    char errmsg[KEEL_ERRMSG_MAX];
    FILE *f; /* scratch file */
    struct cli_table t;
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    fx->f = tmpfile();
    assert_non_null(fx->f);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    fclose(fx->f);
    cli_table_free(&fx->t);
    free(fx);
    return 0;
}

static void sizes_print_in_binary_units(void **state)
{
    char b[32];
    (void)state;
    cli_fmt_bytes(1023, b, sizeof b);
    assert_string_equal(b, "1023 B");
    cli_fmt_bytes(1536, b, sizeof b);
    assert_string_equal(b, "1.5 KiB");
    cli_fmt_bytes(5ull << 30, b, sizeof b);
    assert_string_equal(b, "5.0 GiB");
}

static void durations_print_in_two_largest_units(void **state)
{
    char b[32];
    (void)state;
    cli_fmt_duration_ns(850000000, b, sizeof b);
    assert_string_equal(b, "850ms");
    cli_fmt_duration_ns(330ll * 1000000000, b, sizeof b);
    assert_string_equal(b, "5m30s");
    cli_fmt_duration_ns(7ll * 86400 * 1000000000 + 3600ll * 1000000000, b,
                        sizeof b);
    assert_string_equal(b, "7d1h");
    cli_fmt_duration_ns(-1, b, sizeof b);
    assert_string_equal(b, "unlimited");
}

static void counts_get_thousands_separators(void **state)
{
    char b[32];
    (void)state;
    cli_fmt_count(1234567, b, sizeof b);
    assert_string_equal(b, "1,234,567");
    cli_fmt_count(999, b, sizeof b);
    assert_string_equal(b, "999");
    cli_fmt_limit(-1, b, sizeof b);
    assert_string_equal(b, "unlimited");
}

static void table_columns_align_and_numbers_right(void **state)
{
    struct fixture *fx = *state;
    static const char *const heads[] = {"Name", ">Messages"};
    const char *r1[] = {"ORDERS", "1,000"};
    const char *r2[] = {"X", "7"};
    char out[256] = "";
    assert_int_equal(cli_table_init(&fx->t, 2, heads), 0);
    assert_int_equal(cli_table_add(&fx->t, r1), 0);
    assert_int_equal(cli_table_add(&fx->t, r2), 0);
    cli_table_print(&fx->t, fx->f, false);
    rewind(fx->f);
    size_t n = fread(out, 1, sizeof out - 1, fx->f);
    out[n] = '\0';
    assert_string_equal(out, "Name    Messages\n"
                             "ORDERS     1,000\n"
                             "X              7\n");
}

/* stream get's base64: both alphabets (standard "+/", URL "-_"), with
 * or without padding; a digit of neither and a full buffer are refused. */
static void base64_of_either_alphabet_decodes(void **state)
{
    (void)state;
    unsigned char out[8];
    size_t len = 0;
    assert_int_equal(cli_b64_decode("SGVsbG8=", out, sizeof out, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(out, "Hello", 5);
    assert_int_equal(cli_b64_decode("SGVsbG8", out, sizeof out, &len), 0);
    assert_int_equal(len, 5);
    assert_int_equal(cli_b64_decode("+/+/", out, sizeof out, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "\xfb\xff\xbf", 3);
    assert_int_equal(cli_b64_decode("-_-_", out, sizeof out, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "\xfb\xff\xbf", 3);
    assert_int_equal(cli_b64_decode("azAZ09", out, sizeof out, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(out, "\x6b\x30\x19\xd3", 4);
    assert_int_equal(cli_b64_decode("", out, sizeof out, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(cli_b64_decode("SG$s", out, sizeof out, &len),
                     KEEL_EPROTO);
    assert_int_equal(cli_b64_decode("SGVsbG8=", out, 4, &len), KEEL_ETOOBIG);
}

static void progress_text_shows_bar_and_percent(void **state)
{
    char b[128];
    (void)state;
    cli_progress_text("msgs", 400, 1000, b, sizeof b);
    assert_string_equal(
        b, "[############                  ]  40%  400/1,000 msgs");
    cli_progress_text("msgs", 5, 0, b, sizeof b);
    assert_non_null(strstr(b, "  0%"));
}

static void durations_parse_with_day_and_year_units(void **state)
{
    struct fixture *fx = *state;
    int64_t ns = 0;
    assert_int_equal(cli_parse_duration_ns("max-age", "7d", &ns, fx->errmsg),
                     0);
    assert_int_equal(ns, 7ll * 86400 * 1000000000);
    assert_int_equal(cli_parse_duration_ns("max-age", "90", &ns, fx->errmsg),
                     0);
    assert_int_equal(ns, 90ll * 1000000000);
    assert_int_equal(
        cli_parse_duration_ns("max-age", "unlimited", &ns, fx->errmsg), 0);
    assert_int_equal(ns, 0);
    assert_int_equal(
        cli_parse_duration_ns("max-age", "3 weeks", &ns, fx->errmsg),
        KEEL_EUSAGE);
    assert_non_null(strstr(fx->errmsg, "--max-age"));
}

static void stream_flags_build_the_api_config(void **state)
{
    struct fixture *fx = *state;
    struct cli_stream_flags sf;
    struct cli_flag flags[CLI_STREAM_FLAGS_ROWS];
    json_t *cfg = NULL;
    cli_stream_flags_init(&sf, flags);
    sf.subjects.items[sf.subjects.count++] = "a.>,b.*";
    sf.retention = "workqueue";
    sf.max_msgs = 100;
    sf.max_age = "1h";
    sf.fsync = "always";
    assert_int_equal(cli_stream_cfg_build(&sf, "S", &cfg, fx->errmsg), 0);
    assert_string_equal(json_string_value(json_object_get(cfg, "name")), "S");
    json_t *subj = json_object_get(cfg, "subjects");
    assert_int_equal(json_array_size(subj), 2);
    assert_string_equal(json_string_value(json_array_get(subj, 1)), "b.*");
    assert_int_equal(json_integer_value(json_object_get(cfg, "max_msgs")), 100);
    assert_int_equal(json_integer_value(json_object_get(cfg, "max_age")),
                     3600ll * 1000000000);
    assert_string_equal(json_string_value(json_object_get(cfg, "keel_fsync")),
                        "always");
    /* Unset limits stay absent: the server fills its defaults. */
    assert_null(json_object_get(cfg, "max_bytes"));
    json_decref(cfg);
    cfg = NULL;
    sf.retention = "forever";
    assert_int_equal(cli_stream_cfg_build(&sf, "S", &cfg, fx->errmsg),
                     KEEL_EUSAGE);
    assert_non_null(strstr(fx->errmsg, "workqueue"));
    json_decref(cfg);
}

static void write_archive(FILE *f, int msgs, char *errmsg)
{
    struct cli_bak b;
    assert_int_equal(cli_bak_write_start(&b, f, "{\"name\":\"S\"}", errmsg), 0);
    for (int i = 0; i < msgs; i++) {
        char data[32];
        snprintf(data, sizeof data, "body %d", i);
        struct cli_bak_msg m = {
            .seq = (uint64_t)i + 1,
            .time_ns = 1000 + i,
            .subject = "s.x",
            .subject_len = 3,
            .hdr = (unsigned char *)"NATS/1.0\r\nK: v\r\n\r\n",
            .hdr_len = i % 2 == 0 ? 18 : 0,
            .data = (unsigned char *)data,
            .data_len = (uint32_t)strlen(data),
        };
        assert_int_equal(cli_bak_write_msg(&b, &m, errmsg), 0);
    }
    assert_int_equal(cli_bak_write_end(&b, errmsg), 0);
    cli_bak_close(&b);
    fflush(f);
}

/* Read the whole archive: 0 and the count, or the first error. */
static int read_archive(FILE *f, uint64_t *count, char *errmsg)
{
    struct cli_bak b;
    struct cli_bak_msg m = {0};
    char *config = NULL;
    bool end = false;
    rewind(f);
    int rv = cli_bak_read_start(&b, f, &config, errmsg);
    for (int i = 0; rv == 0 && !end && i < 1000; i++) {
        rv = cli_bak_read_msg(&b, &m, &end, errmsg);
        if (rv == 0 && !end) {
            char want[32];
            snprintf(want, sizeof want, "body %d", i);
            assert_int_equal(m.seq, (uint64_t)i + 1);
            assert_memory_equal(m.data, want, strlen(want));
            assert_int_equal(m.hdr_len, i % 2 == 0 ? 18 : 0);
        }
    }
    *count = b.count;
    free(config);
    cli_bak_msg_free(&m);
    cli_bak_close(&b);
    return rv;
}

static void archive_round_trips_every_message(void **state)
{
    struct fixture *fx = *state;
    uint64_t count = 0;
    write_archive(fx->f, 50, fx->errmsg);
    assert_int_equal(read_archive(fx->f, &count, fx->errmsg), 0);
    assert_int_equal(count, 50);
}

static void archive_with_a_flipped_bit_is_refused(void **state)
{
    struct fixture *fx = *state;
    uint64_t count = 0;
    write_archive(fx->f, 10, fx->errmsg);
    long size = ftell(fx->f);
    /* Flip one bit in every position in turn would be slow: flip inside
     * a message body, then inside the end record's count. */
    long offs[] = {60, size - 12};
    for (size_t i = 0; i < 2; i++) {
        unsigned char c;
        fseek(fx->f, offs[i], SEEK_SET);
        assert_int_equal(fread(&c, 1, 1, fx->f), 1);
        c ^= 0x10;
        fseek(fx->f, offs[i], SEEK_SET);
        fwrite(&c, 1, 1, fx->f);
        fflush(fx->f);
        assert_int_equal(read_archive(fx->f, &count, fx->errmsg),
                         KEEL_ECORRUPT);
        fseek(fx->f, offs[i], SEEK_SET);
        c ^= 0x10;
        fwrite(&c, 1, 1, fx->f);
        fflush(fx->f);
    }
    assert_int_equal(read_archive(fx->f, &count, fx->errmsg), 0);
}

static void truncated_archive_is_refused(void **state)
{
    struct fixture *fx = *state;
    uint64_t count = 0;
    write_archive(fx->f, 10, fx->errmsg);
    long size = ftell(fx->f);
    assert_int_equal(ftruncate(fileno(fx->f), size - 20), 0);
    assert_int_equal(read_archive(fx->f, &count, fx->errmsg), KEEL_ETRUNCATED);
    assert_non_null(strstr(fx->errmsg, "truncated"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(sizes_print_in_binary_units, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(durations_print_in_two_largest_units,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(counts_get_thousands_separators, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(table_columns_align_and_numbers_right,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(base64_of_either_alphabet_decodes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(progress_text_shows_bar_and_percent,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(durations_parse_with_day_and_year_units,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(stream_flags_build_the_api_config,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(archive_round_trips_every_message,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(archive_with_a_flipped_bit_is_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(truncated_archive_is_refused, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
