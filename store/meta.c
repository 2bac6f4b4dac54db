/* All LMDB code of the store (docs/design.md §4.6, §4.7 R3). Keys are binary:
 *   'I'                      incarnation id (16 bytes)
 *   'N'                      node record {boot id, clean}
 *   'H' gid 'T' and 'H' gid 'V' hard state term and vote (one txn)
 *   'C' gid base(be64)       catalogue entry of one segment
 *   'S' gid                  snapshot (index, term) newest and older
 *   'A' gid                  amnesia state
 *   'W' gid                  recover wait: the term of an operator recover
 *                            after which this node must not campaign
 * Values: the envelope of meta_env.c (version 2: its checksum covers the
 * key too); version-1 values are read, and rewritten as version 2 by the
 * first writable open that finds the file sound. Bodies: the layouts of
 * meta_codec.c, read and written by value_get and value_put.
 */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <keel/assert.h>
#include <keel/bytes.h>
#include <keel/error.h>

#include "meta.h"
#include "meta_codec.h"
#include "meta_env.h"
#include "meta_probe.h"

#define META_BODY_MAX STORE_META_BODY_MAX
#define META_KEY_MAX 32u

struct store_meta {
    MDB_env *env;
    MDB_dbi dbi;
};

static size_t key_make(uint8_t *k, char kind, const uint8_t *gid, char sub,
                       uint64_t base)
{
    size_t n = 0;

    ASSERT(k != NULL);
    ASSERT(kind != 0);
    k[n++] = (uint8_t)kind;
    if (gid != NULL) {
        memcpy(k + n, gid, STORE_GROUP_ID_BYTES);
        n += STORE_GROUP_ID_BYTES;
    }
    if (sub != 0) {
        k[n++] = (uint8_t)sub;
    }
    if (kind == 'C') {
        keel_put_be(k + n, base, 8); /* big-endian: keys sort by base */
        n += 8;
    }
    return n;
}

/* Check the value v stored under key k; on success body and len point
 * into v. */
static int env_check(const MDB_val *k, const MDB_val *v, const uint8_t **body,
                     uint32_t *len)
{
    ASSERT(k != NULL && v != NULL);
    return store_meta_env_check(k->mv_data, k->mv_size, v->mv_data, v->mv_size,
                                body, len, NULL);
}

static int map_mdb(int rc, char *errmsg, const char *what)
{
    if (rc == 0) {
        return 0;
    }
    if (rc == MDB_NOTFOUND) {
        return KEEL_ENOENT;
    }
    if (rc == MDB_CORRUPTED || rc == MDB_INVALID ||
        rc == MDB_VERSION_MISMATCH || rc == MDB_PAGE_NOTFOUND) {
        return keel_err(KEEL_ECORRUPT, errmsg, "meta.lmdb %s: %s", what,
                        mdb_strerror(rc));
    }
    if (rc == ENOSPC || rc == MDB_MAP_FULL) {
        return keel_err(KEEL_ENOSPC, errmsg, "meta.lmdb %s: %s", what,
                        mdb_strerror(rc));
    }
    return keel_err(KEEL_EIO, errmsg, "meta.lmdb %s: %s", what,
                    mdb_strerror(rc));
}

/* Begin a transaction (flags 0 or MDB_RDONLY), errors mapped. */
static int txn_begin(struct store_meta *m, unsigned flags, MDB_txn **txn,
                     char *errmsg)
{
    int rc;

    ASSERT(m != NULL && txn != NULL);
    rc = mdb_txn_begin(m->env, NULL, flags, txn);
    return rc == 0 ? 0 : map_mdb(rc, errmsg, "begin");
}

/* End write transaction txn: commit it when its writes succeeded (rc 0),
 * else abort it and report rc as what failed. */
static int txn_end(MDB_txn *txn, int rc, const char *what, char *errmsg)
{
    ASSERT(txn != NULL && what != NULL);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return map_mdb(rc, errmsg, what);
    }
    /* mdb_txn_commit syncs (no MDB_NOSYNC): the commit is durable. */
    return map_mdb(mdb_txn_commit(txn), errmsg, "commit");
}

/* One synced write transaction running fn (its writes in txn): committed
 * when fn returns 0, else aborted and fn's code reported as what failed. */
static int txn_write(struct store_meta *m,
                     int (*fn)(struct store_meta *m, MDB_txn *txn,
                               const void *arg),
                     const void *arg, const char *what, char *errmsg)
{
    MDB_txn *txn;
    int rc = txn_begin(m, 0, &txn, errmsg);

    if (rc != 0) {
        return rc;
    }
    return txn_end(txn, fn(m, txn, arg), what, errmsg);
}

/* One synced write transaction putting (or deleting, val NULL) up to two
 * keys: hard state needs both keys in one commit. */
static int put2(struct store_meta *m, const uint8_t *k1, size_t k1n,
                const uint8_t *v1, size_t v1n, const uint8_t *k2, size_t k2n,
                const uint8_t *v2, size_t v2n, char *errmsg)
{
    MDB_txn *txn;
    MDB_val k;
    MDB_val v;
    int rc;

    ASSERT(m != NULL);
    ASSERT(k1 != NULL);
    rc = txn_begin(m, 0, &txn, errmsg);
    if (rc != 0) {
        return rc;
    }
    k = (MDB_val){k1n, (void *)k1};
    v = (MDB_val){v1n, (void *)v1};
    rc = v1 == NULL ? mdb_del(txn, m->dbi, &k, NULL)
                    : mdb_put(txn, m->dbi, &k, &v, 0);
    if (rc == MDB_NOTFOUND) {
        rc = 0;
    }
    if (rc == 0 && k2 != NULL) {
        k = (MDB_val){k2n, (void *)k2};
        v = (MDB_val){v2n, (void *)v2};
        rc = mdb_put(txn, m->dbi, &k, &v, 0);
    }
    return txn_end(txn, rc, "put", errmsg);
}

/* Begin a transaction (flags 0 or MDB_RDONLY) and open a cursor in it;
 * on error (mapped, errmsg may be NULL) nothing is left open. */
static int txn_cursor(struct store_meta *m, unsigned flags, MDB_txn **txn,
                      MDB_cursor **cur, char *errmsg)
{
    int rc;

    ASSERT(m != NULL && txn != NULL && cur != NULL);
    rc = txn_begin(m, flags, txn, errmsg);
    if (rc != 0) {
        return rc;
    }
    rc = mdb_cursor_open(*txn, m->dbi, cur);
    if (rc != 0) {
        mdb_txn_abort(*txn);
        return map_mdb(rc, errmsg, "cursor");
    }
    return 0;
}

static int get1(struct store_meta *m, const uint8_t *key, size_t kn,
                uint8_t *body, uint32_t *len)
{
    MDB_txn *txn;
    MDB_val k = {kn, (void *)key};
    MDB_val v;
    const uint8_t *b;
    int rc;

    ASSERT(m != NULL);
    ASSERT(body != NULL);
    rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        return map_mdb(rc, NULL, "begin");
    }
    rc = mdb_get(txn, m->dbi, &k, &v);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return map_mdb(rc, NULL, "get");
    }
    rc = env_check(&k, &v, &b, len);
    if (rc == 0 && *len <= META_BODY_MAX) {
        memcpy(body, b, *len);
    } else if (rc == 0) {
        rc = KEEL_ECORRUPT;
    }
    mdb_txn_abort(txn);
    return rc;
}

/* Read the fixed-layout value of codec c (of group gid, or node-wide when
 * gid is NULL) into obj. KEEL_ENOENT when absent, KEEL_ECORRUPT when its
 * envelope or its length is bad (obj untouched then). */
static int value_get(struct store_meta *m, const struct store_meta_codec *c,
                     const uint8_t *gid, void *obj)
{
    uint8_t key[META_KEY_MAX];
    uint8_t body[META_BODY_MAX];
    uint32_t len = 0;
    size_t kn;
    int rv;

    ASSERT(m != NULL && c != NULL);
    ASSERT(obj != NULL);
    kn = key_make(key, c->kind, gid, c->sub, 0);
    rv = get1(m, key, kn, body, &len);
    return rv == 0 ? store_meta_decode(c, body, len, obj) : rv;
}

/* Build codec c's key (base: the catalogue key's segment base, 0 for
 * every other kind) and obj's enveloped value; returns the value's length. */
static size_t value_wrap(const struct store_meta_codec *c, const uint8_t *gid,
                         uint64_t base, const void *obj, uint8_t *key,
                         size_t *kn, uint8_t *val)
{
    uint8_t body[META_BODY_MAX];
    uint32_t len = store_meta_encode(c, obj, body);
    size_t vn;

    ASSERT(c != NULL && kn != NULL);
    ASSERT(obj != NULL);
    ASSERT(len <= sizeof body);
    *kn = key_make(key, c->kind, gid, c->sub, base);
    vn = store_meta_env_wrap(val, key, *kn, (uint16_t)c->kind, body, len);
    ASSERT(vn <= STORE_META_VAL_MAX);
    return vn;
}

/* One synced put of obj as codec c's value. */
static int value_put(struct store_meta *m, const struct store_meta_codec *c,
                     const uint8_t *gid, uint64_t base, const void *obj,
                     char *errmsg)
{
    uint8_t key[META_KEY_MAX];
    uint8_t val[STORE_META_VAL_MAX];
    size_t kn;
    size_t vn = value_wrap(c, gid, base, obj, key, &kn, val);

    ASSERT(m != NULL);
    return put2(m, key, kn, val, vn, NULL, 0, NULL, 0, errmsg);
}

/* Open the environment at path. Writable, with the assert hook
 * (docs/decisions/0015); or, ro, MDB_RDONLY | MDB_NOLOCK: nothing in the
 * data directory changes, not even the lock file (the node is stopped),
 * and no hook (it would write its marker). */
static int env_open(const char *path, struct store_meta *m, bool ro,
                    char *errmsg)
{
    unsigned flags =
        MDB_NOSUBDIR | MDB_NOTLS | (ro ? MDB_RDONLY | MDB_NOLOCK : 0);
    MDB_txn *txn = NULL;
    int rc;

    ASSERT(path != NULL);
    ASSERT(m != NULL);
    rc = mdb_env_create(&m->env);
    if (rc != 0) {
        return map_mdb(rc, errmsg, "create");
    }
    mdb_env_set_mapsize(m->env, STORE_META_MAP_BYTES);
    if (!ro) {
        (void)mdb_env_set_assert(m->env, store_meta_assert_hook);
    }
    rc = mdb_env_open(m->env, path, flags, 0644);
    if (rc == 0) {
        rc = mdb_txn_begin(m->env, NULL, ro ? MDB_RDONLY : 0, &txn);
    }
    if (rc == 0) {
        rc = mdb_dbi_open(txn, NULL, 0, &m->dbi);
        rc = rc == 0 && !ro ? mdb_txn_commit(txn) : (mdb_txn_abort(txn), rc);
    }
    if (rc != 0) {
        mdb_env_close(m->env);
        m->env = NULL;
        return keel_err(ro && rc == ENOENT ? KEEL_ENOENT : KEEL_ECORRUPT,
                        errmsg, "meta.lmdb open: %s", mdb_strerror(rc));
    }
    return 0;
}

static void note_bad_group(struct store_meta_report *rep, const uint8_t *key)
{
    ASSERT(rep != NULL);
    ASSERT(key != NULL);
    if (rep->n_bad_groups < STORE_META_BAD_GROUPS_MAX) {
        memcpy(rep->bad_groups[rep->n_bad_groups++], key + 1,
               STORE_GROUP_ID_BYTES);
    }
}

/* Check every value. Returns KEEL_ECORRUPT if a node-wide value (hard
 * state, catalogue, node, incarnation) or any version-2 value is bad; bad
 * version-1 snapshot, amnesia and recover-wait values are listed (their
 * groups open amnesiac). Counts version-1 values in rep->n_v1. */
static int validate_all(struct store_meta *m, struct store_meta_report *rep)
{
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k;
    MDB_val v;
    struct store_meta_pairs pairs = {{0}, false};
    int rc;
    int bad = 0;

    ASSERT(m != NULL);
    ASSERT(rep != NULL);
    rep->n_v1 = 0;
    rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, &txn);
    if (rc == 0) {
        rc = mdb_cursor_open(txn, m->dbi, &cur);
        if (rc != 0) {
            mdb_txn_abort(txn);
        }
    }
    if (rc != 0) {
        store_fmt_str(rep->reset_reason, sizeof rep->reset_reason,
                      "meta.lmdb unreadable: %s", mdb_strerror(rc));
        return KEEL_ECORRUPT;
    }
    while (bad == 0 && (rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        unsigned ver = 0;
        int e = store_meta_entry_check(
            k.mv_data, k.mv_size, v.mv_data, v.mv_size, &pairs, &ver,
            rep->reset_reason, sizeof rep->reset_reason);
        if (e == STORE_META_ENTRY_BAD_GROUP) {
            note_bad_group(rep, k.mv_data);
        }
        rep->n_v1 += e == 0 && ver == STORE_META_ENV_V1 ? 1 : 0;
        bad = e < 0 ? e : 0;
    }
    if (bad == 0 && rc == MDB_NOTFOUND) {
        bad =
            store_meta_entry_check(NULL, 0, NULL, 0, &pairs, NULL,
                                   rep->reset_reason, sizeof rep->reset_reason);
    }
    if (bad == 0 && rc != MDB_NOTFOUND) {
        /* The walk broke off (a page reference past the last page, a bad
         * page): the values after it are unknown, as a bad value's. */
        store_fmt_str(rep->reset_reason, sizeof rep->reset_reason,
                      "meta.lmdb unreadable: %s", mdb_strerror(rc));
        bad = KEEL_ECORRUPT;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return bad;
}

/* Envelope version 2 (docs/decisions/0015): rewrite every sound
 * version-1 value (a file written before it) as version 2 in one synced
 * transaction, so every key is covered from this start on. Only after
 * validate_all found the file sound: the rewrite vouches for each key as
 * it is now. A version-1 value that fails its checksum stays as it is
 * (its group opens amnesiac). */
static int migrate_v1(struct store_meta *m, size_t *n_done, char *errmsg)
{
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k;
    MDB_val v;
    int rc;

    ASSERT(m != NULL && n_done != NULL);
    *n_done = 0;
    rc = txn_cursor(m, 0, &txn, &cur, errmsg);
    if (rc != 0) {
        return rc;
    }
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        uint8_t key[META_KEY_MAX];
        uint8_t body[META_BODY_MAX];
        uint8_t val[STORE_META_VAL_MAX];
        const uint8_t *b;
        uint32_t l;
        unsigned ver = 0;
        const uint8_t *vp = v.mv_data;
        if (k.mv_size > sizeof key ||
            store_meta_env_check(k.mv_data, k.mv_size, vp, v.mv_size, &b, &l,
                                 &ver) != 0 ||
            ver != STORE_META_ENV_V1 || l > sizeof body) {
            continue;
        }
        /* Copies: the put may move the page these point into. */
        memcpy(key, k.mv_data, k.mv_size);
        memcpy(body, b, l);
        k.mv_data = key;
        v.mv_size = store_meta_env_wrap(
            val, key, k.mv_size, (uint16_t)keel_get_le(vp + 2, 2), body, l);
        v.mv_data = val;
        rc = mdb_cursor_put(cur, &k, &v, MDB_CURRENT);
        if (rc != 0) {
            break;
        }
        (*n_done)++;
    }
    mdb_cursor_close(cur);
    if (rc != MDB_NOTFOUND) {
        mdb_txn_abort(txn);
        *n_done = 0;
        return map_mdb(rc, errmsg, "envelope v2 rewrite");
    }
    /* mdb_txn_commit syncs: every value is version 2 or none is. */
    return map_mdb(mdb_txn_commit(txn), errmsg, "commit");
}

static int quarantine_meta(const char *data_dir, const char *path, char *errmsg)
{
    char qdir[STORE_PATH_BYTES_MAX];
    char dst[STORE_PATH_BYTES_MAX];
    char lock[STORE_PATH_BYTES_MAX];
    int rv;

    ASSERT(data_dir != NULL);
    ASSERT(path != NULL);
    store_fmt_str(qdir, sizeof qdir, "%s/quarantine", data_dir);
    store_fmt_str(dst, sizeof dst, "%s/meta.lmdb.%lld", qdir,
                  (long long)time(NULL));
    store_fmt_str(lock, sizeof lock, "%s-lock", path);
    if (mkdir(qdir, 0755) != 0 && errno != EEXIST) {
        return keel_err(KEEL_EIO, errmsg, "mkdir %s: %s", qdir,
                        strerror(errno));
    }
    /* ENOENT: a crash after this rename and before the marker's. */
    if (rename(path, dst) != 0 && errno != ENOENT) {
        return keel_err(KEEL_EIO, errmsg, "quarantine %s: %s", path,
                        strerror(errno));
    }
    rv = store_meta_marker_move(path, dst);
    if (rv != 0) {
        return keel_err(rv, errmsg, "quarantine %s's marker: %s", path,
                        strerror(errno));
    }
    (void)unlink(lock); /* the lock file holds no data */
    rv = 0;
    for (int i = 0; i < 2 && rv == 0; i++) {
        int fd = open(i == 0 ? qdir : data_dir, O_RDONLY | O_DIRECTORY);
        if (fd < 0 || fsync(fd) != 0) {
            rv = keel_err(KEEL_EIO, errmsg, "fsync dir: %s", strerror(errno));
        }
        if (fd >= 0) {
            close(fd);
        }
    }
    return rv;
}

/* The probe child's read through LMDB (meta_probe.c): 0 when it read
 * the file (whatever it found: the open here decides again), 3 when LMDB
 * cannot open it. */
static int read_all_ro(const char *path)
{
    struct store_meta cm = {0};
    struct store_meta_report r;
    char err[KEEL_ERRMSG_MAX];

    memset(&r, 0, sizeof r);
    if (env_open(path, &cm, true, err) != 0) {
        return 3;
    }
    (void)validate_all(&cm, &r);
    mdb_env_close(cm.env);
    return 0;
}

static int ensure_incarnation(struct store_meta *m,
                              struct store_meta_report *rep, char *errmsg)
{
    uint8_t inc[16];
    int rv = value_get(m, &STORE_META_CODEC_INCARNATION, NULL, inc);

    ASSERT(m != NULL);
    ASSERT(rep != NULL);
    if (rv == 0) {
        return 0;
    }
    if (rv != KEEL_ENOENT) {
        return keel_err(KEEL_ECORRUPT, errmsg, "bad incarnation value");
    }
    if (getrandom(inc, sizeof inc, 0) != (ssize_t)sizeof inc) {
        return keel_err(KEEL_EIO, errmsg, "getrandom: %s", strerror(errno));
    }
    rep->fresh = true;
    return value_put(m, &STORE_META_CODEC_INCARNATION, NULL, 0, inc, errmsg);
}

/* The start of both opens: a zeroed report, the handle (NULL when out of
 * memory), path set to the file's, *probe_rv the probe child's verdict
 * (meta_probe.h). */
static struct store_meta *open_begin(const char *data_dir, char *path,
                                     struct store_meta_report *rep,
                                     int *probe_rv)
{
    struct store_meta *m;

    ASSERT(data_dir != NULL && path != NULL);
    ASSERT(rep != NULL && probe_rv != NULL);
    memset(rep, 0, sizeof *rep);
    m = calloc(1, sizeof *m);
    if (m == NULL) {
        return NULL;
    }
    store_fmt_str(path, STORE_PATH_BYTES_MAX, "%s/meta.lmdb", data_dir);
    *probe_rv = store_meta_probe(path, read_all_ro, rep->reset_reason,
                                 sizeof rep->reset_reason);
    return m;
}

/* The end of both opens: hand m out, or free it on error rv. */
static int open_end(struct store_meta *m, int rv, struct store_meta **out)
{
    ASSERT(m != NULL);
    ASSERT(out != NULL);
    if (rv != 0) {
        if (m->env != NULL) {
            mdb_env_close(m->env);
        }
        free(m);
        return rv;
    }
    *out = m;
    return 0;
}

int store_meta_open(const char *data_dir, struct store_meta **out,
                    struct store_meta_report *rep, char *errmsg)
{
    char path[STORE_PATH_BYTES_MAX];
    int rv = 0;
    struct store_meta *m = open_begin(data_dir, path, rep, &rv);

    ASSERT(out != NULL);
    if (m == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    rv = rv == 0 ? env_open(path, m, false, rep->reset_reason) : rv;
    if (rv == 0 && validate_all(m, rep) != 0) {
        mdb_env_close(m->env);
        rv = KEEL_ECORRUPT;
    }
    if (rv != 0) {
        /* Rule 3, last part: the node cannot know its term. Keep the
         * file for the operator and start over as a new incarnation. */
        rep->reset = true;
        rep->n_bad_groups = 0;
        rep->n_v1 = 0;
        rv = quarantine_meta(data_dir, path, errmsg);
        rv = rv == 0 ? env_open(path, m, false, errmsg) : rv;
    }
    if (rv == 0 && !rep->reset && rep->n_v1 > 0) {
        rv = migrate_v1(m, &rep->n_migrated, errmsg);
    }
    rv = rv == 0 ? ensure_incarnation(m, rep, errmsg) : rv;
    return open_end(m, rv, out);
}

int store_meta_open_ro(const char *data_dir, struct store_meta **out,
                       struct store_meta_report *rep, char *errmsg)
{
    char path[STORE_PATH_BYTES_MAX];
    uint8_t inc[16];
    int rv = 0;
    struct store_meta *m = open_begin(data_dir, path, rep, &rv);
    bool bad = rv != 0;

    ASSERT(out != NULL);
    if (m == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    if (!bad) {
        rv = env_open(path, m, true, errmsg);
        bad = rv == 0 && validate_all(m, rep) != 0;
    }
    if (bad) {
        /* A writable open would quarantine the file (rule 3, last part). */
        rep->reset = true;
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "%s (keeld would move meta.lmdb to quarantine/ and "
                      "start a new incarnation)",
                      rep->reset_reason);
    }
    if (rv == 0 && store_meta_incarnation(m, inc) == KEEL_ENOENT) {
        rep->fresh = true;
    }
    return open_end(m, rv, out);
}

void store_meta_close(struct store_meta *m)
{
    if (m == NULL) {
        return;
    }
    ASSERT(m->env != NULL);
    mdb_env_close(m->env);
    free(m);
}

int store_meta_incarnation(struct store_meta *m, uint8_t out[16])
{
    return value_get(m, &STORE_META_CODEC_INCARNATION, NULL, out);
}

int store_meta_incarnation_put(struct store_meta *m, const uint8_t inc[16],
                               char *errmsg)
{
    return value_put(m, &STORE_META_CODEC_INCARNATION, NULL, 0, inc, errmsg);
}

int store_meta_node_get(struct store_meta *m, struct store_meta_node *out)
{
    return value_get(m, &STORE_META_CODEC_NODE, NULL, out);
}

int store_meta_node_put(struct store_meta *m, const struct store_meta_node *n,
                        char *errmsg)
{
    return value_put(m, &STORE_META_CODEC_NODE, NULL, 0, n, errmsg);
}

int store_meta_hs_get(struct store_meta *m, const uint8_t gid[16],
                      uint64_t *term, uint8_t *vote, size_t *vote_len)
{
    uint8_t key[META_KEY_MAX];
    uint8_t body[META_BODY_MAX];
    uint32_t len;
    size_t kn;
    int rv = value_get(m, &STORE_META_CODEC_HS_TERM, gid, term);

    ASSERT(term != NULL);
    ASSERT(vote_len != NULL);
    if (rv != 0) {
        return rv;
    }
    kn = key_make(key, 'H', gid, 'V', 0);
    rv = get1(m, key, kn, body, &len);
    if (rv == 0 && len > STORE_VOTE_BYTES_MAX) {
        rv = KEEL_ECORRUPT;
    }
    if (rv == 0) {
        memcpy(vote, body, len);
        *vote_len = len;
    }
    return rv;
}

int store_meta_hs_put(struct store_meta *m, const uint8_t gid[16],
                      uint64_t term, const uint8_t *vote, size_t vote_len,
                      char *errmsg)
{
    const struct store_meta_codec *c = &STORE_META_CODEC_HS_TERM;
    uint8_t k1[META_KEY_MAX];
    uint8_t k2[META_KEY_MAX];
    uint8_t t[8];
    uint8_t v1[STORE_META_VAL_MAX];
    uint8_t v2[STORE_META_VAL_MAX];
    size_t kn1 = key_make(k1, c->kind, gid, c->sub, 0);
    size_t kn2 = key_make(k2, 'H', gid, 'V', 0);
    size_t n1;
    size_t n2;

    ASSERT(vote_len <= STORE_VOTE_BYTES_MAX);
    ASSERT(vote != NULL || vote_len == 0);
    n1 = store_meta_env_wrap(v1, k1, kn1, 'H', t,
                             store_meta_encode(c, &term, t));
    n2 = store_meta_env_wrap(v2, k2, kn2, 'H', vote, (uint32_t)vote_len);
    return put2(m, k1, kn1, v1, n1, k2, kn2, v2, n2, errmsg);
}

int store_meta_cat_list(struct store_meta *m, const uint8_t gid[16],
                        struct store_meta_seg *out, size_t max, size_t *n)
{
    uint8_t key[META_KEY_MAX];
    size_t kn = key_make(key, 'C', gid, 0, 0);
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k = {kn, key};
    MDB_val v;
    int rc;
    int rv = 0;

    ASSERT(out != NULL && n != NULL);
    ASSERT(max > 0);
    *n = 0;
    rc = txn_cursor(m, MDB_RDONLY, &txn, &cur, NULL);
    if (rc != 0) {
        return rc;
    }
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size == kn && memcmp(k.mv_data, key, 17) == 0) {
        const uint8_t *b;
        uint32_t l;
        struct store_meta_seg seg;
        if (env_check(&k, &v, &b, &l) != 0 ||
            store_meta_decode(&STORE_META_CODEC_SEG, b, l, &seg) != 0) {
            rv = KEEL_ECORRUPT;
            break;
        }
        if (*n == max) {
            rv = KEEL_ELIMIT;
            break;
        }
        out[(*n)++] = seg;
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    return rv;
}

int store_meta_cat_put(struct store_meta *m, const uint8_t gid[16],
                       const struct store_meta_seg *seg, char *errmsg)
{
    ASSERT(seg != NULL);
    ASSERT(seg->base_index >= 1);
    return value_put(m, &STORE_META_CODEC_SEG, gid, seg->base_index, seg,
                     errmsg);
}

int store_meta_cat_del(struct store_meta *m, const uint8_t gid[16],
                       uint64_t base_index, char *errmsg)
{
    uint8_t key[META_KEY_MAX];
    size_t kn = key_make(key, 'C', gid, 0, base_index);

    ASSERT(m != NULL);
    ASSERT(base_index >= 1);
    return put2(m, key, kn, NULL, 0, NULL, 0, NULL, 0, errmsg);
}

int store_meta_snap_get(struct store_meta *m, const uint8_t gid[16],
                        struct store_meta_snap *out)
{
    return value_get(m, &STORE_META_CODEC_SNAP, gid, out);
}

int store_meta_snap_put(struct store_meta *m, const uint8_t gid[16],
                        const struct store_meta_snap *s, char *errmsg)
{
    ASSERT(s != NULL);
    ASSERT(s->older_index <= s->index);
    return value_put(m, &STORE_META_CODEC_SNAP, gid, 0, s, errmsg);
}

int store_meta_amnesia_get(struct store_meta *m, const uint8_t gid[16],
                           struct store_meta_amnesia *out)
{
    return value_get(m, &STORE_META_CODEC_AMNESIA, gid, out);
}

int store_meta_amnesia_put(struct store_meta *m, const uint8_t gid[16],
                           const struct store_meta_amnesia *a, char *errmsg)
{
    return value_put(m, &STORE_META_CODEC_AMNESIA, gid, 0, a, errmsg);
}

/* One synced transaction deleting a group's single key of this kind. */
static int group_key_del(struct store_meta *m, char kind, const uint8_t gid[16],
                         char *errmsg)
{
    uint8_t key[META_KEY_MAX];
    size_t kn = key_make(key, kind, gid, 0, 0);

    ASSERT(m != NULL);
    ASSERT(kn == 17);
    return put2(m, key, kn, NULL, 0, NULL, 0, NULL, 0, errmsg);
}

int store_meta_amnesia_del(struct store_meta *m, const uint8_t gid[16],
                           char *errmsg)
{
    return group_key_del(m, 'A', gid, errmsg);
}

int store_meta_recover_wait_get(struct store_meta *m, const uint8_t gid[16],
                                uint64_t *term)
{
    int rv;

    ASSERT(m != NULL);
    ASSERT(term != NULL);
    rv = value_get(m, &STORE_META_CODEC_RECOVER_WAIT, gid, term);
    if (rv != 0) {
        *term = 0;
    }
    return rv;
}

int store_meta_recover_wait_put(struct store_meta *m, const uint8_t gid[16],
                                uint64_t term, char *errmsg)
{
    ASSERT(m != NULL);
    ASSERT(term > 0);
    return value_put(m, &STORE_META_CODEC_RECOVER_WAIT, gid, 0, &term, errmsg);
}

int store_meta_recover_wait_del(struct store_meta *m, const uint8_t gid[16],
                                char *errmsg)
{
    return group_key_del(m, 'W', gid, errmsg);
}

int store_meta_debug_corrupt(struct store_meta *m, char kind,
                             const uint8_t gid[16])
{
    uint8_t key[META_KEY_MAX];
    uint8_t bad[16] = {1, 0, 0, 0, 4, 0, 0, 0, 'b', 'a', 'd', '!'};
    size_t kn;

    ASSERT(m != NULL);
    ASSERT(kind == 'H' || kind == 'C' || kind == 'S' || kind == 'A');
    if (kind == 'C') {
        uint8_t prefix[META_KEY_MAX];
        struct store_meta_seg seg;
        size_t n = 0;
        (void)key_make(prefix, 'C', gid, 0, 0);
        if (store_meta_cat_list(m, gid, &seg, 1, &n) != 0 || n == 0) {
            return KEEL_ENOENT;
        }
        kn = key_make(key, 'C', gid, 0, seg.base_index);
    } else {
        kn = key_make(key, kind, gid, kind == 'H' ? 'T' : 0, 0);
    }
    return put2(m, key, kn, bad, sizeof bad, NULL, 0, NULL, 0, NULL);
}

/* Delete every catalogue ('C') entry of a group in an open write txn
 * (bounded by the catalogue size). */
static int cat_del_all_txn(struct store_meta *m, MDB_txn *txn,
                           const uint8_t gid[16])
{
    uint8_t key[META_KEY_MAX];
    MDB_cursor *cur;
    MDB_val k;
    MDB_val v;
    size_t kn;
    int rc;

    ASSERT(m != NULL);
    ASSERT(txn != NULL);
    kn = key_make(key, 'C', gid, 0, 0);
    rc = mdb_cursor_open(txn, m->dbi, &cur);
    if (rc != 0) {
        return rc;
    }
    k = (MDB_val){kn, key};
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    for (size_t n = 0; rc == 0 && k.mv_size == kn &&
                       memcmp(k.mv_data, key, 1 + STORE_GROUP_ID_BYTES) == 0;
         n++) {
        ASSERT(n <= STORE_SEGMENTS_PER_GROUP_MAX);
        rc = mdb_cursor_del(cur, 0);
        k = (MDB_val){kn, key}; /* seek again: the prefix's next entry */
        rc = rc == 0 ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) : rc;
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Delete every key of group arg (its 16-byte id) in an open write txn:
 * 'H' T/V, 'S', 'A', 'W' and all 'C' entries. */
static int group_del_txn(struct store_meta *m, MDB_txn *txn, const void *arg)
{
    const uint8_t *gid = arg;
    static const char singles[][2] = {
        {'H', 'T'}, {'H', 'V'}, {'S', 0}, {'A', 0}, {'W', 0}};
    uint8_t key[META_KEY_MAX];
    MDB_val k;
    int rc;

    ASSERT(m != NULL);
    ASSERT(txn != NULL);
    for (size_t i = 0; i < sizeof singles / sizeof singles[0]; i++) {
        size_t kn = key_make(key, singles[i][0], gid, singles[i][1], 0);
        k = (MDB_val){kn, key};
        rc = mdb_del(txn, m->dbi, &k, NULL);
        if (rc != 0 && rc != MDB_NOTFOUND) {
            return rc;
        }
    }
    return cat_del_all_txn(m, txn, gid);
}

/* Put obj as codec c's enveloped value in an open write txn. */
static int txn_value_put(struct store_meta *m, MDB_txn *txn,
                         const struct store_meta_codec *c, const uint8_t *gid,
                         uint64_t base, const void *obj)
{
    uint8_t key[META_KEY_MAX];
    uint8_t val[STORE_META_VAL_MAX];
    size_t kn;
    MDB_val k;
    MDB_val v;

    ASSERT(m != NULL);
    ASSERT(txn != NULL);
    v = (MDB_val){value_wrap(c, gid, base, obj, key, &kn, val), val};
    k = (MDB_val){kn, key};
    return mdb_put(txn, m->dbi, &k, &v, 0);
}

struct log_replace {
    const uint8_t *gid;
    const struct store_meta_seg *segs;
    size_t n;
    const struct store_meta_snap *sn;
};

/* Old catalogue out, new catalogue and snapshot in (one commit). */
static int log_replace_txn(struct store_meta *m, MDB_txn *txn, const void *arg)
{
    const struct log_replace *a = arg;
    int rc = cat_del_all_txn(m, txn, a->gid);

    for (size_t i = 0; rc == 0 && i < a->n; i++) {
        rc = txn_value_put(m, txn, &STORE_META_CODEC_SEG, a->gid,
                           a->segs[i].base_index, &a->segs[i]);
    }
    if (rc == 0) {
        rc = txn_value_put(m, txn, &STORE_META_CODEC_SNAP, a->gid, 0, a->sn);
    }
    return rc;
}

int store_meta_log_replace(struct store_meta *m, const uint8_t gid[16],
                           const struct store_meta_seg *segs, size_t n,
                           const struct store_meta_snap *sn, char *errmsg)
{
    const struct log_replace a = {gid, segs, n, sn};

    ASSERT(m != NULL && sn != NULL);
    ASSERT(n <= STORE_SEGMENTS_PER_GROUP_MAX);
    ASSERT(sn->older_index <= sn->index);
    /* All in one synced commit. */
    return txn_write(m, log_replace_txn, &a, "replace log", errmsg);
}

int store_meta_group_del(struct store_meta *m, const uint8_t gid[16],
                         char *errmsg)
{
    ASSERT(m != NULL);
    ASSERT(gid != NULL);
    /* Every key of the group goes in one synced commit. */
    return txn_write(m, group_del_txn, gid, "delete group", errmsg);
}
