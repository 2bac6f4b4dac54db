/* meta.lmdb's structural check and LMDB's run-time assertion hook (README
 * docs/decisions/0015). Each damage below is one changed field that no read at
 * open reaches: the probe of session 5 (every value read through LMDB in a
 * child) passes it, a later write would abort keeld on an LMDB assertion
 * or free a live page; the structural check resets the file at open (rule
 * 3). A clean file after many writes and deletes passes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <keel/error.h>
#include <lmdb.h>

#include "meta.h"
#include "meta_check.h"
#include "meta_env.h"
#include "meta_probe.h"

/* LMDB 0.9 on-disk offsets (4 KiB pages): the meta at byte 16 of pages 0
 * and 1 (free db at 40, main db at 88: flags +4, depth +6, entries +32,
 * root +40; txnid at 144); a page header {pgno 0, flags 10, lower 12,
 * upper 14}, node offsets from 16; a node {lo, hi, flags, ksize, key}. */
#define PG 4096
#define FREE_DB 40
#define MAIN_DB 88
#define DB_DEPTH 6
#define DB_ENTRIES 32
#define DB_ROOT 40
#define TXNID 144

struct fx {
    char dir[64];
    char path[128];
    uint8_t inc[16];
};

static int rm_cb(const char *p, const struct stat *sb, int flag,
                 struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    struct fx *f = test_calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/keel-metachk-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/meta.lmdb", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    store_meta_debug_check_structure(true);
    store_meta_debug_env_v1(false);
    nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    test_free(f);
    return 0;
}

static void gid_of(uint8_t gid[16], unsigned g)
{
    memset(gid, 0, 16);
    gid[0] = (uint8_t)g;
    gid[15] = 0x5a;
}

/* n catalogue entries of group g in one transaction, and its hard state. */
static void put_group(struct store_meta *m, unsigned g, size_t n)
{
    struct store_meta_seg *segs = calloc(n, sizeof *segs);
    struct store_meta_snap sn = {0, 0, 0, 0};
    uint8_t gid[16];
    char err[KEEL_ERRMSG_MAX];

    assert_non_null(segs);
    gid_of(gid, g);
    for (size_t i = 0; i < n; i++) {
        segs[i] = (struct store_meta_seg){1 + 1000 * i, g, 4096, 1};
    }
    assert_int_equal(store_meta_log_replace(m, gid, segs, n, &sn, err), 0);
    assert_int_equal(
        store_meta_hs_put(m, gid, 3 + g, (const uint8_t *)"n2", 2, err), 0);
    free(segs);
}

static struct store_meta *open_rw(struct fx *f, struct store_meta_report *rep)
{
    struct store_meta *m = NULL;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(store_meta_open(f->dir, &m, rep, err), 0);
    return m;
}

/* A file of depth >= 2: three groups of n entries, then one group deleted
 * (its pages in the last commit's free-page list). Keeps the
 * incarnation. */
static void fill(struct fx *f, size_t n)
{
    struct store_meta_report rep;
    struct store_meta *m = open_rw(f, &rep);
    uint8_t gid[16];
    char err[KEEL_ERRMSG_MAX];

    for (unsigned g = 1; g <= 4; g++) {
        put_group(m, g, n);
    }
    gid_of(gid, 4);
    assert_int_equal(store_meta_group_del(m, gid, err), 0);
    assert_int_equal(store_meta_incarnation(m, f->inc), 0);
    store_meta_close(m);
}

static uint64_t rd64(int fd, off_t at)
{
    uint64_t v = 0;
    assert_int_equal(pread(fd, &v, 8, at), 8);
    return v;
}

static uint16_t rd16(int fd, off_t at)
{
    uint16_t v = 0;
    assert_int_equal(pread(fd, &v, 2, at), 2);
    return v;
}

static void wr(int fd, off_t at, const void *p, size_t n)
{
    assert_int_equal(pwrite(fd, p, n, at), (ssize_t)n);
}

/* The byte offset of the meta page LMDB uses (the larger txnid). */
static off_t newer_meta(int fd)
{
    return rd64(fd, TXNID) < rd64(fd, PG + TXNID) ? PG : 0;
}

static uint64_t child_of(int fd, uint64_t pg, unsigned i)
{
    off_t node = (off_t)(pg * PG) + rd16(fd, (off_t)(pg * PG) + 16 + 2 * i);
    return rd16(fd, node) | (uint64_t)rd16(fd, node + 2) << 16 |
           (uint64_t)rd16(fd, node + 4) << 32;
}

static int open_file(struct fx *f)
{
    int fd = open(f->path, O_RDWR);
    assert_true(fd >= 0);
    return fd;
}

/* The damage passes the probe without the structural check (read-only
 * open: no write may run on it here), and with it the open resets
 * meta.lmdb: quarantined, a new incarnation, reason naming why. */
static void expect_only_check_finds(struct fx *f, const char *why)
{
    struct store_meta_report rep;
    struct store_meta *m = NULL;
    char err[KEEL_ERRMSG_MAX];
    uint8_t inc[16];

    store_meta_debug_check_structure(false);
    assert_int_equal(store_meta_open_ro(f->dir, &m, &rep, err), 0);
    assert_false(rep.reset);
    store_meta_close(m);
    store_meta_debug_check_structure(true);
    assert_int_equal(store_meta_open_ro(f->dir, &m, &rep, err), KEEL_ECORRUPT);
    assert_true(rep.reset);
    print_message("reason: %s\n", rep.reset_reason);
    assert_non_null(strstr(rep.reset_reason, why));
    m = open_rw(f, &rep);
    assert_true(rep.reset);
    assert_non_null(strstr(rep.reset_reason, why));
    assert_int_equal(store_meta_incarnation(m, inc), 0);
    assert_memory_not_equal(inc, f->inc, 16);
    store_meta_close(m);
}

static uint64_t main_root(int fd, uint16_t *depth)
{
    off_t meta = newer_meta(fd);
    *depth = rd16(fd, meta + MAIN_DB + DB_DEPTH);
    return rd64(fd, meta + MAIN_DB + DB_ROOT);
}

/* mdb_page_touch frees the page number a page's header holds: a wrong one
 * frees a live page, which the next write reuses. */
static void a_leaf_page_naming_another_number_resets(void **state)
{
    struct fx *f = *state;
    uint16_t depth;
    fill(f, 1000);
    int fd = open_file(f);
    uint64_t root = main_root(fd, &depth);
    assert_true(depth >= 2);
    uint64_t leaf = root;
    for (uint16_t l = 1; l < depth; l++) {
        leaf = child_of(fd, leaf, 1);
    }
    assert_int_equal(rd16(fd, (off_t)(leaf * PG) + 10), 0x02); /* P_LEAF */
    wr(fd, (off_t)(leaf * PG), &root, 8);
    assert_int_equal(close(fd), 0);
    expect_only_check_finds(f, "mp_pgno");
}

static void a_branch_page_naming_another_number_resets(void **state)
{
    struct fx *f = *state;
    uint16_t depth;
    fill(f, 1000);
    int fd = open_file(f);
    uint64_t root = main_root(fd, &depth);
    uint64_t other = child_of(fd, root, 0);
    assert_int_equal(rd16(fd, (off_t)(root * PG) + 10), 0x01); /* P_BRANCH */
    wr(fd, (off_t)(root * PG), &other, 8);
    assert_int_equal(close(fd), 0);
    expect_only_check_finds(f, "mp_pgno");
}

static void a_wrong_entry_count_resets(void **state)
{
    struct fx *f = *state;
    fill(f, 1000);
    int fd = open_file(f);
    off_t at = newer_meta(fd) + MAIN_DB + DB_ENTRIES;
    uint64_t n = rd64(fd, at) + 1;
    wr(fd, at, &n, 8);
    assert_int_equal(close(fd), 0);
    expect_only_check_finds(f, "its record says");
}

/* A free-page list one page shorter: that page is in no tree and no list
 * (LMDB never uses it again; the count no longer matches what was
 * freed). */
static void a_leaked_page_resets(void **state)
{
    struct fx *f = *state;
    fill(f, 1000);
    int fd = open_file(f);
    off_t meta = newer_meta(fd);
    uint64_t froot = rd64(fd, meta + FREE_DB + DB_ROOT);
    assert_int_equal(rd16(fd, meta + FREE_DB + DB_DEPTH), 1);
    off_t leaf = (off_t)(froot * PG);
    uint16_t n = (uint16_t)((rd16(fd, leaf + 12) - 16) / 2);
    off_t list = -1;
    for (uint16_t i = 0; i < n && list < 0; i++) {
        off_t node = leaf + rd16(fd, leaf + 16 + 2 * i);
        if ((rd16(fd, node + 4) & 1) == 0 &&
            rd64(fd, node + 8 + rd16(fd, node + 6)) >= 2) {
            list = node + 8 + rd16(fd, node + 6);
        }
    }
    assert_true(list >= 0); /* the deleted group's pages */
    uint64_t count = rd64(fd, list) - 1;
    wr(fd, list, &count, 8);
    assert_int_equal(close(fd), 0);
    expect_only_check_finds(f, "leaked");
}

/* Two branch nodes naming one child: the child is reached twice (a
 * shared page; a write would copy it for one parent and free it for the
 * other). */
static void a_shared_page_resets(void **state)
{
    struct fx *f = *state;
    uint16_t depth;
    fill(f, 1000);
    int fd = open_file(f);
    uint64_t root = main_root(fd, &depth);
    uint64_t c0 = child_of(fd, root, 0);
    off_t node1 = (off_t)(root * PG) + rd16(fd, (off_t)(root * PG) + 18);
    uint16_t lohi[2] = {(uint16_t)c0, (uint16_t)(c0 >> 16)};
    wr(fd, node1, lohi, 4);
    assert_int_equal(close(fd), 0);
    expect_only_check_finds(f, "reached twice");
}

/* A leaf whose free space ends before it starts: reads never look at
 * mp_upper, a put into the leaf fails LMDB's assertion in mdb_node_add. */
static int upper_below_lower(struct fx *f)
{
    uint16_t depth;
    int fd = open_file(f);
    uint64_t root = main_root(fd, &depth);
    assert_int_equal(depth, 1);
    uint16_t upper = (uint16_t)(rd16(fd, (off_t)(root * PG) + 12) - 2);
    wr(fd, (off_t)(root * PG) + 14, &upper, 2);
    return close(fd);
}

static void a_leaf_with_upper_below_lower_resets(void **state)
{
    struct fx *f = *state;
    fill(f, 2);
    assert_int_equal(upper_below_lower(f), 0);
    expect_only_check_finds(f, "mp_upper");
}

/* A changed byte inside a key that still sorts in place: LMDB and the
 * page check see nothing, and a catalogue entry would name another
 * segment. In a file written before envelope version 2 (whose checksum
 * finds this first) the key must agree with its value. */
static void a_key_that_disagrees_with_its_value_resets(void **state)
{
    struct fx *f = *state;
    struct store_meta_report rep;
    char err[KEEL_ERRMSG_MAX];
    uint16_t depth;
    store_meta_debug_env_v1(true);
    fill(f, 2);
    store_meta_debug_env_v1(false);
    int fd = open_file(f);
    off_t leaf = (off_t)(main_root(fd, &depth) * PG);
    off_t key = -1;
    for (uint16_t i = 0; key < 0; i++) {
        off_t node = leaf + rd16(fd, leaf + 16 + 2 * i);
        uint8_t kind = 0;
        assert_int_equal(pread(fd, &kind, 1, node + 8), 1);
        if (kind == 'C') {
            key = node + 8;
        }
    }
    uint8_t last = 0; /* base 1 (00..01) becomes 3: still before 1001 */
    assert_int_equal(pread(fd, &last, 1, key + 24), 1);
    last ^= 2;
    wr(fd, key + 24, &last, 1);
    assert_int_equal(close(fd), 0);
    assert_int_equal(store_meta_check_file(f->path, NULL, err, sizeof err), 0);
    struct store_meta *m = open_rw(f, &rep);
    assert_true(rep.reset);
    print_message("reason: %s\n", rep.reset_reason);
    assert_non_null(strstr(rep.reset_reason, "does not match its value"));
    store_meta_close(m);
}

/* A changed group-id byte in a hard-state key that still sorts in place
 * (group 1's term key named group 0): its group would read no hard state
 * (term 0). Term and vote keys come in pairs (in a file written before
 * envelope version 2, whose checksum finds this first). */
static void a_hard_state_key_without_its_pair_resets(void **state)
{
    struct fx *f = *state;
    struct store_meta_report rep;
    char err[KEEL_ERRMSG_MAX];
    uint16_t depth;
    store_meta_debug_env_v1(true);
    fill(f, 2);
    store_meta_debug_env_v1(false);
    int fd = open_file(f);
    off_t leaf = (off_t)(main_root(fd, &depth) * PG);
    off_t key = -1;
    for (uint16_t i = 0; key < 0; i++) {
        off_t node = leaf + rd16(fd, leaf + 16 + 2 * i);
        uint8_t k[18];
        assert_int_equal(pread(fd, k, sizeof k, node + 8), (ssize_t)sizeof k);
        if (k[0] == 'H' && k[1] == 1 && k[17] == 'T') {
            key = node + 8;
        }
    }
    uint8_t g = 0; /* after every 'C' key, before group 1's 'V': in place */
    wr(fd, key + 1, &g, 1);
    assert_int_equal(close(fd), 0);
    assert_int_equal(store_meta_check_file(f->path, NULL, err, sizeof err), 0);
    struct store_meta *m = open_rw(f, &rep);
    assert_true(rep.reset);
    print_message("reason: %s\n", rep.reset_reason);
    assert_non_null(strstr(rep.reset_reason, "without its pair"));
    store_meta_close(m);
}

/* The file offset of the key (in the main tree's only leaf) starting with
 * the n bytes of want. */
static off_t key_at(int fd, const uint8_t *want, size_t n)
{
    uint16_t depth;
    off_t leaf = (off_t)(main_root(fd, &depth) * PG);
    uint16_t nodes = (uint16_t)((rd16(fd, leaf + 12) - 16) / 2);

    assert_int_equal(depth, 1);
    for (uint16_t i = 0; i < nodes; i++) {
        off_t node = leaf + rd16(fd, leaf + 16 + 2 * i);
        uint8_t k[32];
        assert_true(n <= sizeof k);
        assert_int_equal(pread(fd, k, n, node + 8), (ssize_t)n);
        if (memcmp(k, want, n) == 0) {
            return node + 8;
        }
    }
    fail_msg("key '%c' not found", want[0]);
    return -1;
}

/* Every value's envelope version, read with liblmdb. */
static void count_versions(struct fx *f, size_t *v1, size_t *v2)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_dbi dbi;
    MDB_val k;
    MDB_val v;

    *v1 = 0;
    *v2 = 0;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_open(env, f->path,
                                  MDB_NOSUBDIR | MDB_RDONLY | MDB_NOLOCK, 0644),
                     0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    assert_int_equal(mdb_cursor_open(txn, dbi, &cur), 0);
    while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
        uint8_t ver = ((const uint8_t *)v.mv_data)[0];
        assert_true(ver == 1 || ver == 2);
        *(ver == 1 ? v1 : v2) += 1;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

/* fill, and group 1's amnesia and recover-wait values. */
static void fill_all_kinds(struct fx *f)
{
    struct store_meta_report rep;
    struct store_meta_amnesia a = {1, 7, 42};
    char err[KEEL_ERRMSG_MAX];
    uint8_t gid[16];

    fill(f, 2);
    struct store_meta *m = open_rw(f, &rep);
    gid_of(gid, 1);
    assert_int_equal(store_meta_amnesia_put(m, gid, &a, err), 0);
    assert_int_equal(store_meta_recover_wait_put(m, gid, 9, err), 0);
    store_meta_close(m);
}

/* A changed group-id byte in a catalogue, snapshot, amnesia or
 * recover-wait key that still sorts in place (group 1's key names group
 * 1 with its last id byte 0x5b, between group 1's and group 2's keys):
 * kind, length and base all agree, so before envelope version 2 the entry
 * silently moved to a group that does not exist (group 1 lost a segment,
 * its snapshot, its amnesia). Its checksum covers the key: the file is
 * reset (rule 3), and keel store dump says so. */
static void a_changed_group_id_byte_in_a_key_resets(void **state)
{
    struct fx *f = *state;
    const char kinds[] = {'C', 'S', 'A', 'W'};

    for (size_t i = 0; i < sizeof kinds; i++) {
        struct store_meta_report rep;
        struct store_meta *m = NULL;
        char err[KEEL_ERRMSG_MAX];
        uint8_t want[25] = {(uint8_t)kinds[i], 1};
        uint8_t g = 0x5b;
        want[16] = 0x5a;
        want[23] = 0x03; /* 'C': group 1's last segment, base 1001 */
        want[24] = 0xe9;
        fill_all_kinds(f);
        int fd = open_file(f);
        wr(fd, key_at(fd, want, kinds[i] == 'C' ? 25 : 17) + 16, &g, 1);
        assert_int_equal(close(fd), 0);
        assert_int_equal(store_meta_check_file(f->path, NULL, err, sizeof err),
                         0);
        assert_int_equal(store_meta_open_ro(f->dir, &m, &rep, err),
                         KEEL_ECORRUPT);
        print_message("'%c': %s\n", kinds[i], err);
        assert_non_null(strstr(err, "failed its checksum"));
        m = open_rw(f, &rep);
        assert_true(rep.reset);
        assert_non_null(strstr(rep.reset_reason, "a damaged key or value"));
        store_meta_close(m);
    }
}

/* A file written before envelope version 2 is read (keel store dump
 * leaves it as it is); the first writable open rewrites every value as
 * version 2 in one transaction, once; the values read the same and a
 * changed group-id byte in a key is found from then on. */
static void a_version_1_file_is_migrated_once(void **state)
{
    struct fx *f = *state;
    struct store_meta_report rep;
    struct store_meta *m = NULL;
    struct store_meta_seg segs[4];
    struct store_meta_amnesia a;
    char err[KEEL_ERRMSG_MAX];
    uint8_t gid[16];
    uint8_t vote[64];
    size_t vote_len = 0;
    uint64_t term = 0;
    size_t n = 0;
    size_t v1;
    size_t v2;

    store_meta_debug_env_v1(true);
    fill_all_kinds(f);
    store_meta_debug_env_v1(false);
    count_versions(f, &v1, &v2);
    assert_int_equal(v2, 0);
    assert_true(v1 >= 12); /* I, N; groups 1-3: H T/V, 2 C, S; A, W */
    assert_int_equal(store_meta_open_ro(f->dir, &m, &rep, err), 0);
    assert_int_equal(rep.n_v1, v1);
    assert_int_equal(rep.n_migrated, 0);
    gid_of(gid, 2);
    assert_int_equal(store_meta_hs_get(m, gid, &term, vote, &vote_len), 0);
    assert_int_equal(term, 5);
    store_meta_close(m);
    count_versions(f, &v1, &v2);
    assert_int_equal(v2, 0);

    m = open_rw(f, &rep);
    assert_false(rep.reset);
    assert_int_equal(rep.n_v1, v1);
    assert_int_equal(rep.n_migrated, v1);
    store_meta_close(m);
    count_versions(f, &v1, &v2);
    assert_int_equal(v1, 0);
    assert_int_equal(v2, rep.n_migrated);
    assert_int_equal(store_meta_check_file(f->path, NULL, err, sizeof err), 0);

    m = open_rw(f, &rep);
    assert_false(rep.reset);
    assert_int_equal(rep.n_v1, 0);
    assert_int_equal(rep.n_migrated, 0);
    assert_int_equal(store_meta_incarnation(m, gid), 0);
    assert_memory_equal(gid, f->inc, 16);
    gid_of(gid, 1);
    assert_int_equal(store_meta_hs_get(m, gid, &term, vote, &vote_len), 0);
    assert_int_equal(term, 4);
    assert_memory_equal(vote, "n2", 2);
    assert_int_equal(store_meta_cat_list(m, gid, segs, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(segs[1].base_index, 1001);
    assert_int_equal(store_meta_amnesia_get(m, gid, &a), 0);
    assert_int_equal(a.target, 42);
    store_meta_close(m);

    uint8_t want[17] = {'S', 1};
    uint8_t g = 0x5b;
    want[16] = 0x5a;
    int fd = open_file(f);
    wr(fd, key_at(fd, want, sizeof want) + 16, &g, 1);
    assert_int_equal(close(fd), 0);
    m = open_rw(f, &rep);
    assert_true(rep.reset);
    store_meta_close(m);
}

/* The damages of session 5 (docs/decisions/0015) are found by the check too,
 * with a reason naming the page. */
static void session_5_damages_are_named(void **state)
{
    struct fx *f = *state;
    struct store_meta_report rep;
    struct store_meta *m = NULL;
    char err[KEEL_ERRMSG_MAX];
    const char *why[] = {"outside pages", "at offset 65520", "free-page list"};

    for (int k = 0; k < 3; k++) {
        uint16_t depth;
        fill(f, 2);
        int fd = open_file(f);
        off_t meta = newer_meta(fd);
        uint64_t root = main_root(fd, &depth);
        uint64_t v = 1000;
        uint16_t ptr = 0xFFF0;
        if (k == 0) {
            wr(fd, meta + MAIN_DB + DB_ROOT, &v, 8);
        } else if (k == 1) {
            wr(fd, (off_t)(root * PG) + 16, &ptr, 2);
        } else {
            off_t leaf = (off_t)(rd64(fd, meta + FREE_DB + DB_ROOT) * PG);
            off_t node = leaf + rd16(fd, leaf + 16);
            v = 1u << 24;
            wr(fd, node + 8 + rd16(fd, node + 6) + 8, &v, 8);
        }
        assert_int_equal(close(fd), 0);
        assert_int_equal(store_meta_open_ro(f->dir, &m, &rep, err),
                         KEEL_ECORRUPT);
        print_message("reason: %s\n", rep.reset_reason);
        assert_non_null(strstr(rep.reset_reason, why[k]));
        m = open_rw(f, &rep); /* reset: a fresh file for the next case */
        assert_true(rep.reset);
        store_meta_close(m);
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Many commits of puts, replaces and deletes (free-page lists of many
 * transactions, reused pages, a list long enough for an overflow page):
 * the check passes after each, and a reopen does not reset. */
static void a_clean_file_after_many_writes_passes(void **state)
{
    struct fx *f = *state;
    struct store_meta_report rep;
    struct store_meta_check_stats st;
    char err[KEEL_ERRMSG_MAX];
    uint8_t gid[16];
    unsigned seed = 7;
    struct store_meta *m = open_rw(f, &rep);

    put_group(m, 200, 30000); /* ~600 pages, then freed in one commit */
    gid_of(gid, 200);
    assert_int_equal(store_meta_group_del(m, gid, err), 0);
    assert_int_equal(store_meta_check_file(f->path, &st, err, sizeof err), 0);
    for (int round = 0; round < 60; round++) {
        unsigned g = 1 + (unsigned)(rand_r(&seed) % 24);
        unsigned op = (unsigned)rand_r(&seed) % 4;
        gid_of(gid, g);
        if (op == 0) {
            assert_int_equal(store_meta_group_del(m, gid, err), 0);
        } else if (op == 1) {
            struct store_meta_seg s = {(uint64_t)rand_r(&seed) % 100000 + 1, 1,
                                       2, 3};
            assert_int_equal(store_meta_cat_put(m, gid, &s, err), 0);
        } else {
            put_group(m, g, (size_t)(rand_r(&seed) % 700));
        }
        int rc = store_meta_check_file(f->path, &st, err, sizeof err);
        if (rc != 0) {
            print_message("round %d: %s\n", round, err);
        }
        assert_int_equal(rc, 0);
    }
    store_meta_close(m);
    m = open_rw(f, &rep);
    assert_false(rep.reset);
    assert_int_equal(rep.n_v1, 0); /* every value written in version 2 */
    assert_int_equal(rep.n_bad_groups, 0);
    store_meta_close(m);
    assert_int_equal(store_meta_check_file(f->path, &st, err, sizeof err), 0);
    assert_true(st.free_pages > 0);
    assert_int_equal(st.trees, 2);
}

/* A named database (F_SUBDATA in the main one) is walked too; Keel does
 * not create one, LMDB may hold one. */
static void a_named_database_is_walked(void **state)
{
    struct fx *f = *state;
    struct store_meta_check_stats st;
    char err[KEEL_ERRMSG_MAX];
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    char k[16];

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 2), 0);
    assert_int_equal(mdb_env_open(env, f->path, MDB_NOSUBDIR, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "named", MDB_CREATE, &dbi), 0);
    for (int i = 0; i < 500; i++) {
        MDB_val kv = {(size_t)snprintf(k, sizeof k, "k%05d", i), k};
        MDB_val vv = {100, f};
        assert_int_equal(mdb_put(txn, dbi, &kv, &vv, 0), 0);
    }
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    assert_int_equal(store_meta_check_file(f->path, &st, err, sizeof err), 0);
    assert_int_equal(st.trees, 2); /* main (one record) and 'named' */
    assert_int_equal(st.entries, 501);
}

/* Any LMDB workload, not only Keel's: random key and value sizes (values
 * past a page go to overflow runs, shrink and grow in place), deletes, a
 * named database, and a reader held across commits (no page of its
 * snapshot is reused meanwhile: the free-page lists grow). The check
 * passes after every commit. */
static void random_lmdb_commits_pass(void **state)
{
    struct fx *f = *state;
    struct store_meta_check_stats st;
    char err[KEEL_ERRMSG_MAX];
    static uint8_t val[9000];
    uint8_t key[64];
    unsigned seed = 11;
    MDB_env *env;
    MDB_txn *reader = NULL;
    MDB_dbi dbi[2];

    for (size_t i = 0; i < sizeof val; i++) {
        val[i] = (uint8_t)(i * 7);
    }
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 2), 0);
    assert_int_equal(mdb_env_set_mapsize(env, 1024u << 20), 0);
    assert_int_equal(mdb_env_open(env, f->path, MDB_NOSUBDIR, 0644), 0);
    for (int c = 0; c < 300; c++) {
        MDB_txn *txn;
        assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
        if (c == 0) {
            assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi[0]), 0);
            assert_int_equal(mdb_dbi_open(txn, "n", MDB_CREATE, &dbi[1]), 0);
        }
        for (int op = rand_r(&seed) % 60; op >= 0; op--) {
            MDB_dbi d = dbi[rand_r(&seed) % 2];
            size_t kn = 1 + (size_t)(rand_r(&seed) % 40);
            for (size_t i = 0; i < kn; i++) {
                key[i] = (uint8_t)('a' + rand_r(&seed) % 4);
            }
            MDB_val k = {kn, key};
            size_t vn = rand_r(&seed) % 5 == 0
                            ? (size_t)(rand_r(&seed) % (int)sizeof val)
                            : (size_t)(rand_r(&seed) % 200);
            MDB_val v = {vn, val};
            int rc = rand_r(&seed) % 3 == 0 ? mdb_del(txn, d, &k, NULL)
                                            : mdb_put(txn, d, &k, &v, 0);
            assert_true(rc == 0 || rc == MDB_NOTFOUND);
        }
        assert_int_equal(mdb_txn_commit(txn), 0);
        if (c % 50 == 10) {
            assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &reader), 0);
        } else if (c % 50 == 40) {
            mdb_txn_abort(reader);
        }
        int rc = store_meta_check_file(f->path, &st, err, sizeof err);
        if (rc != 0) {
            print_message("commit %d: %s\n", c, err);
        }
        assert_int_equal(rc, 0);
    }
    mdb_env_close(env);
    print_message("%llu pages (%llu free), %llu entries, %llu trees\n",
                  (unsigned long long)st.pages,
                  (unsigned long long)st.free_pages,
                  (unsigned long long)st.entries, (unsigned long long)st.trees);
    assert_int_equal(st.trees, 3);
}

/* About 10,000 entries: the check and the whole probe stay well under a
 * second (the probe runs once per start), and so does the first start
 * after envelope version 2 (the file written in version 1, every value
 * rewritten in one transaction). */
static void the_check_of_10k_entries_is_fast(void **state)
{
    struct fx *f = *state;
    struct store_meta_check_stats st;
    struct store_meta_report rep;
    struct store_meta *m;
    char err[KEEL_ERRMSG_MAX];

    store_meta_debug_env_v1(true);
    fill(f, 3400);
    store_meta_debug_env_v1(false);
    double t0 = now_ms();
    m = open_rw(f, &rep);
    double t1 = now_ms();
    store_meta_close(m);
    size_t migrated = rep.n_migrated;
    assert_true(migrated >= 10000);
    double t2 = now_ms();
    assert_int_equal(store_meta_check_file(f->path, &st, err, sizeof err), 0);
    double t3 = now_ms();
    assert_int_equal(store_meta_open_ro(f->dir, &m, &rep, err), 0);
    double t4 = now_ms();
    store_meta_close(m);
    assert_int_equal(rep.n_v1, 0);
    print_message("%llu entries, %llu pages: check %.2f ms, probe+open %.2f "
                  "ms; first writable open of the version-1 file (probe, "
                  "open, rewrite of %zu values) %.2f ms\n",
                  (unsigned long long)st.entries, (unsigned long long)st.pages,
                  t3 - t2, t4 - t3, migrated, t1 - t0);
    assert_true(st.entries >= 10000);
    assert_true(t4 - t2 < 1000.0);
    assert_true(t1 - t0 < 2000.0);
}

/* The backstop: an LMDB assertion at run time (here a damage the check
 * would find, with the check left out) writes its marker and exits; the
 * next open resets meta.lmdb instead of running on it or crashing at
 * every start. */
static void an_lmdb_assertion_at_run_time_resets_the_next_open(void **state)
{
    struct fx *f = *state;
    struct store_meta_report rep;
    char marker[160];
    char text[STORE_META_MARKER_BYTES_MAX];
    int st;

    fill(f, 2);
    assert_int_equal(upper_below_lower(f), 0);
    store_meta_debug_check_structure(false);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint8_t gid[16];
        struct store_meta *m = NULL;
        char err[KEEL_ERRMSG_MAX];
        if (store_meta_open(f->dir, &m, &rep, err) != 0 || rep.reset) {
            _exit(1); /* the damage must reach the write */
        }
        gid_of(gid, 9);
        (void)store_meta_hs_put(m, gid, 1, (const uint8_t *)"n1", 2, err);
        _exit(2); /* the write did not assert */
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), STORE_META_ASSERT_EXIT);
    assert_true(store_meta_marker_read(f->path, text, sizeof text));
    print_message("marker: %s\n", text);
    assert_non_null(strstr(text, "Assertion"));
    /* keel store dump says so; the next open resets on the marker alone
     * (check still left out). */
    struct store_meta *m = NULL;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(store_meta_open_ro(f->dir, &m, &rep, err), KEEL_ECORRUPT);
    assert_non_null(strstr(err, "assertion at run time"));
    m = open_rw(f, &rep);
    assert_true(rep.reset);
    assert_non_null(strstr(rep.reset_reason, "assertion at run time"));
    uint8_t inc[16];
    assert_int_equal(store_meta_incarnation(m, inc), 0);
    assert_memory_not_equal(inc, f->inc, 16);
    store_meta_close(m);
    snprintf(marker, sizeof marker, "%s.assert", f->path);
    assert_int_not_equal(access(marker, F_OK), 0);
    m = open_rw(f, &rep); /* once: the marker went to quarantine/ */
    assert_false(rep.reset);
    store_meta_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_leaf_page_naming_another_number_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_branch_page_naming_another_number_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(a_wrong_entry_count_resets, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_leaked_page_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(a_shared_page_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(a_leaf_with_upper_below_lower_resets,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_key_that_disagrees_with_its_value_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_hard_state_key_without_its_pair_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(a_changed_group_id_byte_in_a_key_resets,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_version_1_file_is_migrated_once,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(session_5_damages_are_named, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_clean_file_after_many_writes_passes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_named_database_is_walked, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(random_lmdb_commits_pass, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_check_of_10k_entries_is_fast, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            an_lmdb_assertion_at_run_time_resets_the_next_open, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
