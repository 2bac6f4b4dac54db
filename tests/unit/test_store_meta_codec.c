/* meta.lmdb's value bodies as declared tables (store/meta_codec.h). The
 * layouts are on disk: a snapshot, catalogue, amnesia, node, hard-state
 * term or recover-wait value written through store/meta.c must hold the
 * bytes earlier versions wrote (little-endian fields in declaration
 * order), and a body of the wrong length reads as corrupt.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <keel/error.h>
#include <lmdb.h>

#include "meta.h"
#include "meta_codec.h"
#include "meta_env.h"

struct fx {
    char dir[64];
    uint8_t gid[16];
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
    snprintf(f->dir, sizeof f->dir, "/tmp/keel-metacodec-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    for (unsigned i = 0; i < 16; i++) {
        f->gid[i] = (uint8_t)(0xa0 + i);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    test_free(f);
    return 0;
}

static void le64(uint8_t *p, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* The body stored under key (kind, gid, sub[, base]) read straight from
 * LMDB, bypassing store/meta.c. */
static size_t raw_body(struct fx *f, char kind, const uint8_t *gid, char sub,
                       const uint8_t *base_be, uint8_t *out)
{
    char path[128];
    uint8_t key[32];
    size_t kn = 0;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k;
    MDB_val v;
    const uint8_t *body;
    uint32_t len = 0;

    key[kn++] = (uint8_t)kind;
    if (gid != NULL) {
        memcpy(key + kn, gid, 16);
        kn += 16;
    }
    if (sub != 0) {
        key[kn++] = (uint8_t)sub;
    }
    if (base_be != NULL) {
        memcpy(key + kn, base_be, 8);
        kn += 8;
    }
    snprintf(path, sizeof path, "%s/meta.lmdb", f->dir);
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(
        mdb_env_open(env, path, MDB_NOSUBDIR | MDB_RDONLY | MDB_NOLOCK, 0644),
        0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    k = (MDB_val){kn, key};
    assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
    assert_int_equal(
        store_meta_env_check(key, kn, v.mv_data, v.mv_size, &body, &len, NULL),
        0);
    memcpy(out, body, len);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return len;
}

static struct store_meta *open_meta(struct fx *f)
{
    struct store_meta *m = NULL;
    struct store_meta_report rep;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(store_meta_open(f->dir, &m, &rep, err), 0);
    return m;
}

static void snapshot_and_catalogue_values_are_four_le64_in_order(void **state)
{
    struct fx *f = *state;
    struct store_meta *m = open_meta(f);
    struct store_meta_snap sn = {0x1122334455667788ull, 7, 3, 2};
    struct store_meta_seg seg = {0x0102, 0xdeadbeefcafef00dull, 4096, 0x0103};
    struct store_meta_snap sn2;
    struct store_meta_seg got;
    uint8_t want[32];
    uint8_t body[STORE_META_BODY_MAX];
    uint8_t base_be[8] = {0, 0, 0, 0, 0, 0, 0x01, 0x02};
    char err[KEEL_ERRMSG_MAX];
    size_t n = 0;

    assert_int_equal(store_meta_snap_put(m, f->gid, &sn, err), 0);
    assert_int_equal(store_meta_cat_put(m, f->gid, &seg, err), 0);
    assert_int_equal(store_meta_snap_get(m, f->gid, &sn2), 0);
    assert_memory_equal(&sn2, &sn, sizeof sn);
    assert_int_equal(store_meta_cat_list(m, f->gid, &got, 1, &n), 0);
    assert_int_equal(n, 1);
    assert_memory_equal(&got, &seg, sizeof seg);
    store_meta_close(m);

    le64(want, sn.index);
    le64(want + 8, sn.term);
    le64(want + 16, sn.older_index);
    le64(want + 24, sn.older_term);
    assert_int_equal(raw_body(f, 'S', f->gid, 0, NULL, body), 32);
    assert_memory_equal(body, want, 32);
    le64(want, seg.base_index);
    le64(want + 8, seg.salt);
    le64(want + 16, seg.size_bytes);
    le64(want + 24, seg.first_index);
    assert_int_equal(raw_body(f, 'C', f->gid, 0, base_be, body), 32);
    assert_memory_equal(body, want, 32);
}

static void amnesia_is_le32_then_two_le64(void **state)
{
    struct fx *f = *state;
    struct store_meta *m = open_meta(f);
    struct store_meta_amnesia a = {0x0a0b0c0d, 0x99, 0x1000000000ull};
    struct store_meta_amnesia a2;
    uint8_t want[20] = {0x0d, 0x0c, 0x0b, 0x0a};
    uint8_t body[STORE_META_BODY_MAX];
    char err[KEEL_ERRMSG_MAX];

    assert_int_equal(store_meta_amnesia_put(m, f->gid, &a, err), 0);
    assert_int_equal(store_meta_amnesia_get(m, f->gid, &a2), 0);
    assert_int_equal(a2.reason, a.reason);
    assert_int_equal(a2.t0, a.t0);
    assert_int_equal(a2.target, a.target);
    store_meta_close(m);
    le64(want + 4, a.t0);
    le64(want + 12, a.target);
    assert_int_equal(raw_body(f, 'A', f->gid, 0, NULL, body), 20);
    assert_memory_equal(body, want, 20);
}

static void node_term_and_recover_wait_keep_their_layouts(void **state)
{
    struct fx *f = *state;
    struct store_meta *m = open_meta(f);
    struct store_meta_node nd;
    struct store_meta_node nd2;
    uint8_t body[STORE_META_BODY_MAX];
    uint8_t want[17];
    uint8_t vote[8];
    size_t vote_len = 0;
    uint64_t term = 0;
    char err[KEEL_ERRMSG_MAX];

    for (unsigned i = 0; i < STORE_BOOT_ID_BYTES; i++) {
        nd.boot_id[i] = (uint8_t)(i * 3 + 1);
    }
    nd.clean = true;
    assert_int_equal(store_meta_node_put(m, &nd, err), 0);
    assert_int_equal(
        store_meta_hs_put(m, f->gid, 0x4242, (const uint8_t *)"n3", 2, err), 0);
    assert_int_equal(store_meta_recover_wait_put(m, f->gid, 0x77, err), 0);
    assert_int_equal(store_meta_node_get(m, &nd2), 0);
    assert_memory_equal(nd2.boot_id, nd.boot_id, STORE_BOOT_ID_BYTES);
    assert_true(nd2.clean);
    assert_int_equal(store_meta_hs_get(m, f->gid, &term, vote, &vote_len), 0);
    assert_int_equal(term, 0x4242);
    assert_int_equal(vote_len, 2);
    assert_int_equal(store_meta_recover_wait_get(m, f->gid, &term), 0);
    assert_int_equal(term, 0x77);
    store_meta_close(m);

    memcpy(want, nd.boot_id, STORE_BOOT_ID_BYTES);
    want[16] = 1;
    assert_int_equal(raw_body(f, 'N', NULL, 0, NULL, body), 17);
    assert_memory_equal(body, want, 17);
    le64(want, 0x4242);
    assert_int_equal(raw_body(f, 'H', f->gid, 'T', NULL, body), 8);
    assert_memory_equal(body, want, 8);
    le64(want, 0x77);
    assert_int_equal(raw_body(f, 'W', f->gid, 0, NULL, body), 8);
    assert_memory_equal(body, want, 8);
}

static void a_body_of_the_wrong_length_is_corrupt_and_untouched(void **state)
{
    struct store_meta_snap sn = {1, 2, 3, 4};
    struct store_meta_snap out = {9, 9, 9, 9};
    uint8_t body[STORE_META_BODY_MAX];
    uint32_t len = store_meta_encode(&STORE_META_CODEC_SNAP, &sn, body);

    (void)state;
    assert_int_equal(len, 32);
    assert_int_equal(store_meta_codec_len(&STORE_META_CODEC_AMNESIA), 20);
    assert_int_equal(store_meta_codec_len(&STORE_META_CODEC_NODE), 17);
    assert_int_equal(store_meta_decode(&STORE_META_CODEC_SNAP, body, 31, &out),
                     KEEL_ECORRUPT);
    assert_int_equal(store_meta_decode(&STORE_META_CODEC_SNAP, body, 33, &out),
                     KEEL_ECORRUPT);
    assert_int_equal(out.index, 9);
    assert_int_equal(out.older_term, 9);
    assert_int_equal(store_meta_decode(&STORE_META_CODEC_SNAP, body, 32, &out),
                     0);
    assert_memory_equal(&out, &sn, sizeof sn);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            snapshot_and_catalogue_values_are_four_le64_in_order, setup,
            teardown),
        cmocka_unit_test_setup_teardown(amnesia_is_le32_then_two_le64, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            node_term_and_recover_wait_keep_their_layouts, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_body_of_the_wrong_length_is_corrupt_and_untouched, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
