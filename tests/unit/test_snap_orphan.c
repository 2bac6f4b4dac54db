/* Orphans (docs/design.md §5 S6, "No code path deletes
 * stream data because metadata says so"): data metadata says should not exist
 * moves to quarantine/orphans/ and is listed; nothing is deleted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "snap.h"
#include "store_test_util.h"

struct fixture {
    struct ts t; /* real fs: orphans are whole directories */
    struct snap_config cfg;
    char errmsg[KEEL_ERRMSG_MAX];
    char names[8][64];
    size_t n;
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    ts_init(&f->t, 5, true);
    f->cfg.data_dir = f->t.dir;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ts_fini(&f->t);
    test_free(f);
    return 0;
}

/* A stream group directory with one segment-like file of known bytes. */
static void make_group_dir(struct fixture *f, const char *hex, char *path,
                           size_t cap)
{
    char p[1024];

    snprintf(p, sizeof p, "%s/groups", f->t.dir);
    (void)mkdir(p, 0755);
    snprintf(path, cap, "%s/groups/%s", f->t.dir, hex);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(p, sizeof p, "%s/data.blk", path);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fprintf(fp, "acked messages of %s\n", hex);
    fclose(fp);
}

static int name_cb(void *arg, const char *name)
{
    struct fixture *f = arg;
    assert_true(f->n < 8);
    snprintf(f->names[f->n++], sizeof f->names[0], "%s", name);
    return 0;
}

static bool listed(struct fixture *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++) {
        if (strcmp(f->names[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static void an_orphaned_group_moves_to_quarantine_with_its_data(void **state)
{
    struct fixture *f = *state;
    char path[1024];
    char moved[1024];
    char line[128] = "";
    size_t n = 0;

    make_group_dir(f, "aabb", path, sizeof path);
    assert_int_equal(snap_quarantine_orphan(&f->cfg, path, "aabb", f->errmsg),
                     0);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
    snprintf(moved, sizeof moved, "%s/quarantine/orphans/aabb/data.blk",
             f->t.dir);
    FILE *fp = fopen(moved, "r");
    assert_non_null(fp);
    assert_non_null(fgets(line, sizeof line, fp));
    fclose(fp);
    assert_string_equal(line, "acked messages of aabb\n");
    assert_int_equal(snap_orphans_list(&f->cfg, name_cb, f, &n, f->errmsg), 0);
    assert_int_equal(n, 1);
    assert_true(listed(f, "aabb"));
}

static void
a_second_orphan_of_the_same_name_never_replaces_the_first(void **state)
{
    struct fixture *f = *state;
    char path[1024];
    size_t n = 0;

    make_group_dir(f, "ccdd", path, sizeof path);
    assert_int_equal(snap_quarantine_orphan(&f->cfg, path, "ccdd", f->errmsg),
                     0);
    make_group_dir(f, "ccdd", path, sizeof path);
    assert_int_equal(snap_quarantine_orphan(&f->cfg, path, "ccdd", f->errmsg),
                     0);
    assert_int_equal(snap_orphans_list(&f->cfg, name_cb, f, &n, f->errmsg), 0);
    assert_int_equal(n, 2);
    assert_true(listed(f, "ccdd"));
    assert_true(listed(f, "ccdd.1"));
}

static void no_orphans_lists_nothing(void **state)
{
    struct fixture *f = *state;
    size_t n = 7;

    assert_int_equal(snap_orphans_list(&f->cfg, name_cb, f, &n, f->errmsg), 0);
    assert_int_equal(n, 0);
}

static void a_missing_path_or_bad_name_is_refused(void **state)
{
    struct fixture *f = *state;
    char path[1024];

    snprintf(path, sizeof path, "%s/groups/none", f->t.dir);
    assert_int_equal(snap_quarantine_orphan(&f->cfg, path, "none", f->errmsg),
                     KEEL_ENOENT);
    make_group_dir(f, "eeff", path, sizeof path);
    assert_int_equal(snap_quarantine_orphan(&f->cfg, path, "../x", f->errmsg),
                     KEEL_EINVAL);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            an_orphaned_group_moves_to_quarantine_with_its_data, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_second_orphan_of_the_same_name_never_replaces_the_first, setup,
            teardown),
        cmocka_unit_test_setup_teardown(no_orphans_lists_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_missing_path_or_bad_name_is_refused,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
