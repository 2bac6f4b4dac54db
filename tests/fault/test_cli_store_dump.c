/* keel store dump (suite 'fault'): a store written through the store API
 * with keeld's group ids and entry encodings (a meta group naming stream
 * D, stream D holding publishes) is dumped by the real `keel` binary
 * ($KEEL) and its JSON lines are checked record by record; the dump
 * changes no byte of the directory; a flipped payload byte shows as
 * checksum "bad" with the faulty range in the report; a truncated segment
 * shows as a lost range and amnesia; --stream selects, an unknown stream
 * fails with exit 1, a bad command line with exit 2; a meta.lmdb written
 * before envelope version 2 is dumped as it is (keeld rewrites it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "meta_env.h"
#include "raft.h"
#include "keel_stream_entry.h"
#include "store.h"

#define D_MSGS 10
#define D_NONCE 7u
#define D_LINES_MAX 256
#define D_OUT_BYTES (1024 * 1024)
#define D_STEPS_MAX 1000

struct fx {
    char root[128];
    char store_dir[256]; /* root/data/js */
    char seg_path[512];  /* the stream's first segment */
    json_t *lines[D_LINES_MAX];
    size_t nlines;
    int status; /* exit status of the last dump */
};

static void gid_of(const char *text, struct store_group_id *gid)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(text, strlen(text)));
    memcpy(gid->b, c.digest, sizeof gid->b);
}

/* Append recs and step the manual sync until they are durable. */
static void put(struct store *s, struct store_group *g,
                const struct store_record *recs, size_t n)
{
    struct store_group_info info;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(store_append(g, recs, n, err), 0);
    for (int i = 0; i < D_STEPS_MAX; i++) {
        store_debug_step(s);
        struct store_event ev[8];
        while (store_poll(s, ev, 8) > 0) {
        }
        store_group_info(g, &info);
        if (info.persisted_index >= recs[n - 1].index) {
            return;
        }
    }
    fail_msg("records never persisted");
}

static void write_meta(struct store *s)
{
    struct store_group_id gid;
    struct store_group *g = NULL;
    struct store_recovery rep;
    struct store_fsync pol = {STORE_FSYNC_ALWAYS, 0};
    char err[KEEL_ERRMSG_MAX];
    char json[256];
    gid_of("keel-js-meta", &gid);
    assert_int_equal(store_group_open(s, &gid, &pol, &g, &rep, err), 0);
    assert_int_equal(store_hard_state_save(g, 1, NULL, 0, err), 0);
    store_debug_step(s);
    int n = snprintf(json, sizeof json,
                     "{\"op\":\"create\",\"name\":\"D\",\"nonce\":%u,"
                     "\"config\":{\"name\":\"D\",\"keel_fsync\":\"group\"}}",
                     D_NONCE);
    struct store_record r = {1, 1, RAFT_ENTRY_NORMAL, 0, (uint32_t)n, json};
    put(s, g, &r, 1);
    store_group_close(g);
}

static void write_stream(struct fx *f, struct store *s)
{
    struct store_group_id gid;
    struct store_group *g = NULL;
    struct store_recovery rep;
    struct store_fsync pol = {STORE_FSYNC_GROUP, 0};
    char err[KEEL_ERRMSG_MAX];
    char tag[64];
    snprintf(tag, sizeof tag, "keel-stream:D:%016" PRIx64, (uint64_t)D_NONCE);
    gid_of(tag, &gid);
    assert_int_equal(store_group_open(s, &gid, &pol, &g, &rep, err), 0);
    assert_int_equal(store_hard_state_save(g, 3, NULL, 0, err), 0);
    store_debug_step(s);
    for (int i = 0; i < D_MSGS; i++) {
        char body[32];
        char hdr[64];
        int bl = snprintf(body, sizeof body, "p0-%06d", i);
        int hl = snprintf(hdr, sizeof hdr,
                          "NATS/1.0\r\nNats-Msg-Id: m%d\r\n\r\n", i);
        struct keel_stream_entry e = {.kind = KEEL_STREAM_E_PUBLISH,
                                      .ts_ns = 1000 + i,
                                      .subject = "d.x",
                                      .subject_len = 3,
                                      .hdr = (const uint8_t *)hdr,
                                      .hdr_len = i % 2 == 0 ? (size_t)hl : 0,
                                      .data = (const uint8_t *)body,
                                      .data_len = (size_t)bl};
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(keel_stream_entry_encode(&e, &buf, &len), 0);
        struct store_record r = {(uint64_t)i + 1, 3,  RAFT_ENTRY_NORMAL, 0,
                                 (uint32_t)len,   buf};
        put(s, g, &r, 1);
        free(buf);
    }
    uint64_t off = 0;
    assert_int_equal(
        store_debug_segment_path(g, 1, f->seg_path, sizeof f->seg_path, &off),
        0);
    store_group_close(g);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    struct store_config cfg = {0};
    struct store_node_report rep;
    struct store *s = NULL;
    char err[KEEL_ERRMSG_MAX];
    char path[300];
    snprintf(f->root, sizeof f->root, "/tmp/keel-dump-XXXXXX");
    assert_non_null(mkdtemp(f->root));
    snprintf(path, sizeof path, "%s/data", f->root);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(f->store_dir, sizeof f->store_dir, "%s/data/js", f->root);
    assert_int_equal(mkdir(f->store_dir, 0755), 0);
    cfg.data_dir = f->store_dir;
    cfg.manual_sync = true;
    cfg.no_prealloc = true;
    assert_int_equal(store_open(&cfg, &s, &rep, err), 0);
    write_meta(s);
    write_stream(f, s);
    store_close(s, true);
    *state = f;
    return 0;
}

static void lines_free(struct fx *f)
{
    for (size_t i = 0; i < f->nlines; i++) {
        json_decref(f->lines[i]);
    }
    f->nlines = 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char cmd[256];
    lines_free(f);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->root);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Run keel with args (a shell word list); parse stdout as JSON lines. */
static void run_keel(struct fx *f, const char *args)
{
    const char *keel = getenv("KEEL");
    char cmd[1024];
    char *buf = malloc(D_OUT_BYTES);
    assert_non_null(keel);
    assert_non_null(buf);
    lines_free(f);
    snprintf(cmd, sizeof cmd, "'%s' store %s 2>/dev/null", keel, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(buf, D_OUT_BYTES, p) != NULL && f->nlines < D_LINES_MAX) {
        json_error_t jerr;
        json_t *o = json_loads(buf, 0, &jerr);
        assert_non_null(o);
        f->lines[f->nlines++] = o;
    }
    f->status = pclose(p);
    free(buf);
}

static void dump(struct fx *f, const char *extra)
{
    char args[512];
    snprintf(args, sizeof args, "dump --data '%s/data' %s", f->root, extra);
    run_keel(f, args);
}

static json_t *find(struct fx *f, const char *kind, const char *stream,
                    int64_t index)
{
    for (size_t i = 0; i < f->nlines; i++) {
        json_t *o = f->lines[i];
        const char *k = json_string_value(json_object_get(o, "kind"));
        const char *s = json_string_value(json_object_get(o, "stream"));
        if (strcmp(k, kind) != 0 || s == NULL || strcmp(s, stream) != 0) {
            continue;
        }
        if (index < 0 ||
            json_integer_value(json_object_get(o, "index")) == index) {
            return o;
        }
    }
    return NULL;
}

static const char *str(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v != NULL ? v : "";
}

static void dump_prints_every_publish_decoded(void **state)
{
    struct fx *f = *state;
    dump(f, "");
    assert_int_equal(WEXITSTATUS(f->status), 0);
    for (int i = 0; i < D_MSGS; i++) {
        char want[32];
        json_t *r = find(f, "record", "D", i + 1);
        assert_non_null(r);
        snprintf(want, sizeof want, "p0-%06d", i);
        assert_string_equal(str(r, "checksum"), "ok");
        assert_string_equal(str(r, "entry"), "publish");
        assert_string_equal(str(r, "subject"), "d.x");
        assert_string_equal(str(r, "payload"), want);
        assert_int_equal(json_integer_value(json_object_get(r, "term")), 3);
        snprintf(want, sizeof want, "m%d", i);
        assert_string_equal(str(r, "msg_id"), i % 2 == 0 ? want : "");
    }
    json_t *rep = find(f, "report", "D", -1);
    assert_non_null(rep);
    assert_int_equal(json_array_size(json_object_get(rep, "flags")), 0);
    assert_int_equal(json_integer_value(json_object_get(rep, "last_index")),
                     D_MSGS);
}

static uint64_t file_hash(const char *path)
{
    FILE *fp = fopen(path, "rb");
    uint8_t buf[4096];
    size_t n;
    XXH64_state_t *st = XXH64_createState();
    assert_non_null(fp);
    XXH64_reset(st, 0);
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0) {
        XXH64_update(st, buf, n);
    }
    fclose(fp);
    uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}

static void dump_changes_nothing_on_disk(void **state)
{
    struct fx *f = *state;
    char meta[300];
    snprintf(meta, sizeof meta, "%s/meta.lmdb", f->store_dir);
    /* Damage first, so a writable open would zero or quarantine. */
    assert_int_equal(truncate(f->seg_path, 4096), 0);
    uint64_t seg_before = file_hash(f->seg_path);
    uint64_t meta_before = file_hash(meta);
    dump(f, "");
    assert_int_equal(WEXITSTATUS(f->status), 0);
    assert_true(file_hash(f->seg_path) == seg_before);
    assert_true(file_hash(meta) == meta_before);
    struct stat st;
    char q[300];
    snprintf(q, sizeof q, "%s/quarantine", f->store_dir);
    assert_int_not_equal(stat(q, &st), 0);
    assert_int_equal(stat(f->seg_path, &st), 0);
    assert_int_equal(st.st_size, 4096);
}

static void flipped_byte_reads_bad_with_faulty_range(void **state)
{
    struct fx *f = *state;
    FILE *fp = fopen(f->seg_path, "r+b");
    static uint8_t seg[1 << 20];
    assert_non_null(fp);
    size_t n = fread(seg, 1, sizeof seg, fp);
    uint8_t *hit = memmem(seg, n, "p0-000004", 9);
    assert_non_null(hit);
    hit[5] ^= 0x01;
    assert_int_equal(fseek(fp, hit - seg, SEEK_SET), 0);
    assert_int_equal(fwrite(hit, 1, 9, fp), 9);
    fclose(fp);
    dump(f, "--stream D");
    assert_int_equal(WEXITSTATUS(f->status), 0);
    json_t *r = find(f, "record", "D", 5);
    assert_non_null(r);
    assert_string_equal(str(r, "checksum"), "bad");
    assert_string_equal(str(find(f, "record", "D", 6), "checksum"), "ok");
    json_t *rep = find(f, "report", "D", -1);
    json_t *faulty = json_object_get(rep, "faulty");
    assert_int_equal(json_array_size(faulty), 1);
    assert_int_equal(
        json_integer_value(json_array_get(json_array_get(faulty, 0), 0)), 5);
    assert_int_equal(
        json_integer_value(json_array_get(json_array_get(faulty, 0), 1)), 5);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(rep, "flags"), 0)),
        "FAULTY");
}

static void truncated_segment_reports_lost_range(void **state)
{
    struct fx *f = *state;
    assert_int_equal(truncate(f->seg_path, 1000), 0);
    dump(f, "--stream D");
    assert_int_equal(WEXITSTATUS(f->status), 0);
    json_t *rep = find(f, "report", "D", -1);
    assert_non_null(rep);
    assert_true(json_is_true(json_object_get(rep, "amnesia")));
    assert_string_equal(str(rep, "amnesia_reason"), "lost_range");
    json_t *lost = json_object_get(rep, "lost");
    assert_int_equal(json_array_size(lost), 1);
    assert_int_equal(
        json_integer_value(json_array_get(json_array_get(lost, 0), 0)), 1);
    assert_null(find(f, "record", "D", 1));
}

static void stream_filter_and_exit_codes(void **state)
{
    struct fx *f = *state;
    char args[512];
    dump(f, "--stream D");
    assert_int_equal(WEXITSTATUS(f->status), 0);
    for (size_t i = 0; i < f->nlines; i++) {
        const char *k = str(f->lines[i], "kind");
        assert_true(strcmp(k, "node") == 0 ||
                    strcmp(str(f->lines[i], "stream"), "D") == 0);
    }
    dump(f, "--stream NOPE");
    assert_int_equal(WEXITSTATUS(f->status), 1);
    snprintf(args, sizeof args, "dump --data '%s/none'", f->root);
    run_keel(f, args);
    assert_int_equal(WEXITSTATUS(f->status), 1);
    run_keel(f, "dump");
    assert_int_equal(WEXITSTATUS(f->status), 2);
    run_keel(f, "list --data /tmp");
    assert_int_equal(WEXITSTATUS(f->status), 2);
}

/* The store written before envelope version 2 (meta.lmdb's checksums
 * leave the keys out): the dump reads it, says so and changes nothing;
 * keeld's next start (a writable open) rewrites it. */
static int setup_v1(void **state)
{
    store_meta_debug_env_v1(true);
    int rv = setup(state);
    store_meta_debug_env_v1(false);
    return rv;
}

static int64_t node_meta_v1(struct fx *f)
{
    for (size_t i = 0; i < f->nlines; i++) {
        if (strcmp(str(f->lines[i], "kind"), "node") == 0) {
            return json_integer_value(json_object_get(f->lines[i], "meta_v1"));
        }
    }
    fail_msg("no node line");
    return -1;
}

static void a_version_1_meta_lmdb_is_dumped_as_it_is(void **state)
{
    struct fx *f = *state;
    struct store_config cfg = {0};
    struct store_node_report rep;
    struct store *s = NULL;
    char err[KEEL_ERRMSG_MAX];
    char meta[300];
    snprintf(meta, sizeof meta, "%s/meta.lmdb", f->store_dir);
    uint64_t meta_before = file_hash(meta);
    dump(f, "");
    assert_int_equal(WEXITSTATUS(f->status), 0);
    assert_true(node_meta_v1(f) > 0);
    assert_non_null(find(f, "record", "D", D_MSGS));
    assert_true(file_hash(meta) == meta_before);
    cfg.data_dir = f->store_dir;
    cfg.manual_sync = true;
    cfg.no_prealloc = true;
    assert_int_equal(store_open(&cfg, &s, &rep, err), 0);
    assert_false(rep.meta_reset);
    assert_true(rep.meta_migrated > 0);
    assert_int_equal(rep.meta_v1, 0);
    store_close(s, true);
    dump(f, "");
    assert_int_equal(WEXITSTATUS(f->status), 0);
    assert_int_equal(node_meta_v1(f), 0);
    assert_non_null(find(f, "record", "D", D_MSGS));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(dump_prints_every_publish_decoded,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(dump_changes_nothing_on_disk, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            flipped_byte_reads_bad_with_faulty_range, setup, teardown),
        cmocka_unit_test_setup_teardown(truncated_segment_reports_lost_range,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_version_1_meta_lmdb_is_dumped_as_it_is, setup_v1, teardown),
        cmocka_unit_test_setup_teardown(stream_filter_and_exit_codes, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
