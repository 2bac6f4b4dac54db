/* The driver's snapshots (docs/design.md §5): taken every N applied entries
 * once persisted, restored at open with only the log after them replayed, a bad
 * newest falls back to the older one (quarantined, never deleted), and a
 * committed cut drops the log prefix only up to the older snapshot. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_srv_replica_common.h"

/* A toy state machine: how many normal entries, and a hash of them. */
struct toy {
    uint64_t count;
    uint64_t hash;
    uint64_t restored_at; /* 0: never restored */
    uint64_t first_applied;
};

struct fixture {
    struct tr t;
    struct toy sm;
    uint64_t snap_entries;
    uint64_t segment_bytes;
};

static void toy_apply(struct replica *r, uint64_t index, uint64_t term,
                      uint8_t type, const void *payload, uint32_t len,
                      uint64_t ctx, void *arg)
{
    struct fixture *f = arg;
    tr_apply(r, index, term, type, payload, len, ctx, &f->t);
    if (f->sm.first_applied == 0) {
        f->sm.first_applied = index;
    }
    if (type != RAFT_ENTRY_NORMAL) {
        return;
    }
    const uint8_t *p = payload;
    f->sm.count++;
    for (uint32_t i = 0; i < len; i++) {
        f->sm.hash = f->sm.hash * 31 + p[i];
    }
}

static int toy_snapshot(struct replica *r, uint64_t index, uint8_t **out,
                        size_t *len, void *arg)
{
    struct fixture *f = arg;
    (void)r;
    (void)index;
    uint64_t *b = malloc(2 * sizeof *b);
    if (b == NULL) {
        return KEEL_ENOMEM;
    }
    b[0] = f->sm.count;
    b[1] = f->sm.hash;
    *out = (uint8_t *)b;
    *len = 2 * sizeof *b;
    return 0;
}

static int toy_restore(struct replica *r, uint64_t index, const uint8_t *body,
                       size_t len, void *arg)
{
    struct fixture *f = arg;
    (void)r;
    if (len != 2 * sizeof(uint64_t)) {
        return KEEL_ECORRUPT;
    }
    memcpy(&f->sm.count, body, sizeof f->sm.count);
    memcpy(&f->sm.hash, body + 8, sizeof f->sm.hash);
    f->sm.restored_at = index;
    return 0;
}

static void fatal(void *arg, const char *msg)
{
    (void)arg;
    fail_msg("snapshot I/O error: %s", msg);
}

static int start(struct fixture *f)
{
    struct tr *t = &f->t;
    char err[KEEL_ERRMSG_MAX];
    memset(&f->sm, 0, sizeof f->sm);
    t->n_applied = 0;
    uv_loop_init(&t->loop);
    assert_int_equal(replica_host_create(&t->loop, &t->host, err), 0);
    struct store_config sc = {.data_dir = t->dir,
                              .wakeup_cb = replica_host_wakeup,
                              .wakeup_arg = t->host,
                              .no_prealloc = true,
                              .segment_bytes = f->segment_bytes};
    assert_int_equal(store_open(&sc, &t->s, &t->node, err), 0);
    replica_host_attach(t->host, t->s);
    assert_int_equal(replica_host_snapshots(t->host, t->dir, fatal, f, err), 0);
    struct replica_callbacks cbs = {.apply = toy_apply,
                                    .snapshot = toy_snapshot,
                                    .restore = toy_restore,
                                    .arg = f};
    t->opt.incarnation = replica_incarnation_of(t->node.incarnation);
    t->cfg.n = 1;
    t->cfg.servers[0] = (struct raft_server){
        .node = 1, .incarnation = t->opt.incarnation, .role = RAFT_VOTER};
    t->opt.self = 1;
    t->opt.bootstrap = &t->cfg;
    t->opt.election_timeout_ms = 30;
    t->opt.heartbeat_ms = 10;
    t->opt.snap_entries = f->snap_entries;
    int rv = replica_open(t->host, &t->gid, &t->opt, &cbs, &t->r, err);
    if (rv != 0) {
        print_message("replica_open: %s\n", err);
    }
    return rv;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->t.dir, sizeof f->t.dir, "/tmp/keel-replsnap-XXXXXX");
    assert_non_null(mkdtemp(f->t.dir));
    for (int i = 0; i < 16; i++) {
        f->t.gid.b[i] = (uint8_t)(0x50 + i);
    }
    f->snap_entries = 20;
    f->segment_bytes = STORE_SEGMENT_BYTES_MIN;
    assert_int_equal(start(f), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    tr_stop(&f->t, true);
    nftw(f->t.dir, tr_rm, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static bool taken_ge(struct tr *t, uint64_t n)
{
    struct replica_snap_info si;
    replica_snap_info(t->r, &si);
    return si.taken >= n;
}

/* Propose n entries of 200 bytes and wait until they are applied. */
static void propose(struct fixture *f, uint32_t n)
{
    struct tr *t = &f->t;
    char buf[200];
    struct replica_info ri;
    assert_true(tr_wait(t, tr_is_leader, 0));
    replica_info(t->r, &ri);
    for (uint32_t i = 0; i < n; i++) {
        memset(buf, 'a' + (int)((ri.last_index + i) % 26), sizeof buf);
        assert_int_equal(
            replica_propose(t->r, RAFT_ENTRY_NORMAL, buf, sizeof buf, 0, NULL),
            0);
    }
    assert_true(tr_wait(t, tr_applied_ge, ri.last_index + n));
}

static bool idle_snap(struct tr *t, uint64_t arg)
{
    struct replica_snap_info si;
    (void)arg;
    replica_snap_info(t->r, &si);
    return !si.writing;
}

/* Propose batches of 10 until n snapshots were taken (bounded). */
static void propose_until_taken(struct fixture *f, uint64_t n)
{
    for (int i = 0; i < 100 && !taken_ge(&f->t, n); i++) {
        propose(f, 10);
    }
    assert_true(tr_wait(&f->t, taken_ge, n));
    assert_true(tr_wait(&f->t, idle_snap, 0));
}

static void reopen(struct fixture *f)
{
    tr_stop(&f->t, true);
    f->t.r = NULL;
    assert_int_equal(start(f), 0);
    assert_true(tr_wait(&f->t, tr_is_leader, 0));
}

static void snapshots_are_taken_every_n_entries_and_raft_compacts(void **state)
{
    struct fixture *f = *state;
    propose_until_taken(f, 3);
    struct replica_snap_info si;
    replica_snap_info(f->t.r, &si);
    assert_true(si.enabled);
    assert_true(si.newest_index >= 60);
    assert_true(si.newest_index <= si.first_index + 1000);
    assert_true(si.older_index > 0 && si.older_index < si.newest_index);
    /* Without a cut nothing of the log goes. */
    assert_int_equal(si.first_index, 1);
    struct store_snapshot_pair p;
    assert_int_equal(store_snapshot_get(replica_store_group(f->t.r), &p, NULL),
                     0);
    assert_int_equal(p.index, si.newest_index);
    assert_int_equal(p.older_index, si.older_index);
}

static void reopen_restores_the_newest_and_replays_only_after_it(void **state)
{
    struct fixture *f = *state;
    propose_until_taken(f, 2);
    struct toy before = f->sm;
    struct replica_snap_info si;
    replica_snap_info(f->t.r, &si);
    reopen(f);
    assert_int_equal(f->sm.restored_at, si.newest_index);
    assert_int_equal(f->sm.first_applied, si.newest_index + 1);
    assert_int_equal(f->sm.count, before.count);
    assert_int_equal(f->sm.hash, before.hash);
    propose(f, 5);
    assert_int_equal(f->sm.count, before.count + 5);
}

static void corrupt_newest(struct fixture *f, uint64_t index)
{
    char path[512];
    snprintf(path, sizeof path, "%s/groups/", f->t.dir);
    char hex[33];
    store_group_id_hex(&f->t.gid, hex);
    snprintf(path, sizeof path, "%s/groups/%s/snap/%020llu.snap", f->t.dir, hex,
             (unsigned long long)index);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 100, SEEK_SET), 0);
    int c = fgetc(fp);
    assert_int_equal(fseek(fp, 100, SEEK_SET), 0);
    fputc(c ^ 0x10, fp);
    fclose(fp);
}

static unsigned quarantined(struct fixture *f)
{
    char path[512];
    snprintf(path, sizeof path, "%s/quarantine", f->t.dir);
    DIR *d = opendir(path);
    unsigned n = 0;
    struct dirent *e;
    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        n += strncmp(e->d_name, "snap-", 5) == 0;
    }
    closedir(d);
    return n;
}

static void
a_bad_newest_falls_back_to_the_older_and_is_quarantined(void **state)
{
    struct fixture *f = *state;
    propose_until_taken(f, 2);
    struct toy before = f->sm;
    struct replica_snap_info si;
    replica_snap_info(f->t.r, &si);
    tr_stop(&f->t, true);
    f->t.r = NULL;
    corrupt_newest(f, si.newest_index);
    assert_int_equal(start(f), 0);
    assert_true(tr_wait(&f->t, tr_is_leader, 0));
    assert_int_equal(f->sm.restored_at, si.older_index);
    assert_int_equal(f->sm.count, before.count);
    assert_int_equal(f->sm.hash, before.hash);
    assert_int_equal(quarantined(f), 1);
    struct replica_snap_info after;
    replica_snap_info(f->t.r, &after);
    assert_non_null(strstr(after.load, "quarantine"));
}

/* §5: prefix <= P dropped only under a committed cut AND P <= the older
 * kept snapshot, so a bad newest still recovers locally. */
static void a_cut_drops_the_prefix_only_up_to_the_older_snapshot(void **state)
{
    struct fixture *f = *state;
    propose(f, 150);
    propose_until_taken(f, 3);
    struct replica_info ri;
    replica_info(f->t.r, &ri);
    assert_int_equal(replica_compact(f->t.r, ri.applied, NULL), 0);
    assert_true(tr_wait(&f->t, idle_snap, 0));
    struct replica_snap_info si;
    replica_snap_info(f->t.r, &si);
    assert_int_equal(si.cut, ri.applied);
    assert_true(si.first_index > 1);
    assert_true(si.first_index <= si.older_index + 1);
    struct toy before = f->sm;
    tr_stop(&f->t, true);
    f->t.r = NULL;
    corrupt_newest(f, si.newest_index);
    assert_int_equal(start(f), 0);
    assert_true(tr_wait(&f->t, tr_is_leader, 0));
    assert_int_equal(f->sm.restored_at, si.older_index);
    assert_int_equal(f->sm.count, before.count);
    assert_int_equal(f->sm.hash, before.hash);
}

static void a_cut_above_the_applied_index_is_refused(void **state)
{
    struct fixture *f = *state;
    propose(f, 5);
    struct replica_info ri;
    replica_info(f->t.r, &ri);
    assert_int_equal(replica_compact(f->t.r, ri.applied + 1, NULL),
                     KEEL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            snapshots_are_taken_every_n_entries_and_raft_compacts, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            reopen_restores_the_newest_and_replays_only_after_it, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_bad_newest_falls_back_to_the_older_and_is_quarantined, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_cut_drops_the_prefix_only_up_to_the_older_snapshot, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_cut_above_the_applied_index_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
