/* The power-loss injector itself (suite 'fault'): a child process runs
 * under the LD_PRELOAD shim ($KEEL_PL_SHIM), writes files with and
 * without fdatasync and directory fsync, and dies by SIGKILL; then
 * tools/faults-powerloss ($KEEL_PL_TOOL) applies the power loss. A write
 * covered by a completed fdatasync survives, one that was not is gone; a
 * file whose directory entry was never fsynced is gone, one whose entry
 * was is there; an unlink no directory fsync made durable is undone; the
 * boot id the shim serves changes. The shim's graveyard holds only what a
 * power loss may still restore: an unlink a directory fsync made durable
 * leaves no grave, and past $KEEL_PL_GRAVE_MAX an unlink keeps none and
 * the shim says so (a soak once filled the disk with graves). A record a
 * kill cut between its writes hides nothing the restarted process
 * journals after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct fx {
    char root[64];
    char data[128];
    char journal[128];
    char boot[128];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->root, sizeof f->root, "/tmp/keel-pl-XXXXXX");
    assert_non_null(mkdtemp(f->root));
    snprintf(f->data, sizeof f->data, "%s/data", f->root);
    snprintf(f->journal, sizeof f->journal, "%s/pl.journal", f->root);
    snprintf(f->boot, sizeof f->boot, "%s/boot_id", f->root);
    assert_int_equal(mkdir(f->data, 0755), 0);
    FILE *b = fopen(f->boot, "w");
    assert_non_null(b);
    fputs("00000000-0000-0000-0000-000000000001\n", b);
    fclose(b);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->root);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void dir_sync(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static void put_file(const char *path, const char *text, bool sync)
{
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd >= 0) {
        (void)pwrite(fd, text, strlen(text), 0);
        if (sync) {
            (void)fdatasync(fd);
        }
        close(fd);
    }
}

/* Grave files next to the journal. */
static int graves_in(const char *root)
{
    int n = 0;
    DIR *d = opendir(root);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        n += strncmp(e->d_name, "pl.journal.grave.", 17) == 0;
    }
    closedir(d);
    return n;
}

/* The graveyard child: e's unlink is made durable, f's is not, then a file
 * of 8 KiB g is unlinked (over the bound when the test sets one). */
static void child_graves(const char *data)
{
    char p[256], big[8192];
    snprintf(p, sizeof p, "%s/e", data);
    put_file(p, "eee", true);
    snprintf(p, sizeof p, "%s/f", data);
    put_file(p, "fff", true);
    memset(big, 'g', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    snprintf(p, sizeof p, "%s/g", data);
    put_file(p, big, true);
    dir_sync(data);
    snprintf(p, sizeof p, "%s/e", data);
    (void)unlink(p);
    dir_sync(data); /* e's unlink is durable: nothing can bring e back */
    snprintf(p, sizeof p, "%s/f", data);
    (void)unlink(p); /* never made durable */
    snprintf(p, sizeof p, "%s/g", data);
    (void)unlink(p); /* never made durable */
    kill(getpid(), SIGKILL);
}

/* A child of the cut-record case: data/<name> holds `durable` (synced,
 * its entry too), then `unsynced` over it, then SIGKILL. */
static void child_overwrite(const char *data, const char *name,
                            const char *durable, const char *unsynced)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", data, name);
    put_file(p, durable, true);
    dir_sync(data);
    put_file(p, unsynced, false);
    kill(getpid(), SIGKILL);
}

/* The child, under the shim: the file operations, then SIGKILL. */
static void child(const char *data)
{
    char p[256];
    snprintf(p, sizeof p, "%s/a", data);
    int fd = open(p, O_RDWR | O_CREAT, 0644);
    (void)pwrite(fd, "synced", 6, 0);
    (void)fdatasync(fd);
    (void)pwrite(fd, "SYNCED", 6, 0);      /* overwrite, never synced */
    (void)pwrite(fd, "unsynced", 8, 4096); /* extension, never synced */
    close(fd);
    snprintf(p, sizeof p, "%s/c", data);
    put_file(p, "ccc", true);
    snprintf(p, sizeof p, "%s/d", data);
    put_file(p, "ddd", true);
    dir_sync(data); /* a, c and d are durable names from here on */
    snprintf(p, sizeof p, "%s/b", data); /* synced data, entry not durable */
    put_file(p, "bbb", true);
    snprintf(p, sizeof p, "%s/d", data);
    (void)unlink(p); /* never made durable */
    char id[64] = "";
    fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY);
    (void)read(fd, id, sizeof id - 1);
    snprintf(p, sizeof p, "%s/../seen_boot_id", data);
    FILE *out = fopen(p, "w"); /* outside the tracked root */
    fputs(id, out);
    fclose(out);
    kill(getpid(), SIGKILL);
}

static void read_file(const char *path, char *buf, size_t cap, long *size)
{
    struct stat st;
    memset(buf, 0, cap);
    *size = stat(path, &st) == 0 ? (long)st.st_size : -1;
    FILE *fp = fopen(path, "rb");
    if (fp != NULL) {
        (void)!fread(buf, 1, cap - 1, fp);
        fclose(fp);
    }
}

/* read_file of the file name under the data directory. */
static void read_data(struct fx *f, const char *name, char *buf, size_t cap,
                      long *size)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", f->data, name);
    read_file(path, buf, cap, size);
}

/* Run this program as the child `mode` under the shim until its SIGKILL
 * (grave_max: $KEEL_PL_GRAVE_MAX, NULL for the default; its stderr goes
 * to root/child.err). */
static void run_child(struct fx *f, const char *mode, const char *grave_max)
{
    const char *shim = getenv("KEEL_PL_SHIM");
    assert_non_null(shim);
    pid_t pid = fork();
    if (pid == 0) {
        char err[192];
        snprintf(err, sizeof err, "%s/child.err", f->root);
        if (freopen(err, "w", stderr) == NULL) {
            _exit(126);
        }
        setenv("KEEL_PL_DIR", f->data, 1);
        setenv("KEEL_PL_JOURNAL", f->journal, 1);
        setenv("KEEL_PL_BOOT_ID", f->boot, 1);
        if (grave_max != NULL) {
            setenv("KEEL_PL_GRAVE_MAX", grave_max, 1);
        }
        setenv("LD_PRELOAD", shim, 1);
        char self[256];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
        execl(self, self, mode, f->data, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* Apply the power loss; the tool's summary line goes to out. */
static void power_loss(struct fx *f, char *out, size_t cap)
{
    char cmd[512];
    const char *tool = getenv("KEEL_PL_TOOL");
    assert_non_null(tool);
    snprintf(cmd, sizeof cmd, "'%s' '%s' --mode drop --boot-id '%s'", tool,
             f->journal, f->boot);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    memset(out, 0, cap);
    (void)!fread(out, 1, cap - 1, p);
    assert_int_equal(pclose(p), 0);
}

static void synced_survives_unsynced_is_gone(void **state)
{
    struct fx *f = *state;
    char cmd[512];
    char buf[64];
    long size = 0;
    run_child(f, "--child", NULL);
    power_loss(f, cmd, sizeof cmd);
    read_data(f, "a", buf, sizeof buf, &size);
    assert_string_equal(buf, "synced");
    assert_int_equal(size, 6);
    read_data(f, "b", buf, sizeof buf, &size);
    assert_int_equal(size, -1);
    read_data(f, "c", buf, sizeof buf, &size);
    assert_string_equal(buf, "ccc");
    read_data(f, "d", buf, sizeof buf, &size);
    assert_string_equal(buf, "ddd");
    snprintf(cmd, sizeof cmd, "%s/seen_boot_id", f->root);
    read_file(cmd, buf, sizeof buf, &size);
    assert_string_equal(buf, "00000000-0000-0000-0000-000000000001\n");
    read_file(f->boot, buf, sizeof buf, &size);
    assert_string_not_equal(buf, "00000000-0000-0000-0000-000000000001\n");
}

static void a_durable_unlink_keeps_no_grave(void **state)
{
    struct fx *f = *state;
    char buf[64], out[512];
    long size = 0;
    run_child(f, "--child-graves", NULL);
    /* Only f's and g's unlinks could still be undone: e's grave is gone. */
    assert_int_equal(graves_in(f->root), 2);
    power_loss(f, out, sizeof out);
    assert_non_null(strstr(out, "unlinks_without_grave=0"));
    assert_int_equal(graves_in(f->root), 0);
    read_data(f, "e", buf, sizeof buf, &size);
    assert_int_equal(size, -1);
    read_data(f, "f", buf, sizeof buf, &size);
    assert_string_equal(buf, "fff");
    read_data(f, "g", buf, sizeof buf, &size);
    assert_int_equal(size, 8191);
}

static void graves_past_the_bound_are_not_kept_and_said(void **state)
{
    struct fx *f = *state;
    char path[256], buf[512], out[512];
    long size = 0;
    /* Room for f's grave (one block), not for g's 8 KiB as well. */
    run_child(f, "--child-graves", "6000");
    assert_int_equal(graves_in(f->root), 1);
    snprintf(path, sizeof path, "%s/child.err", f->root);
    read_file(path, buf, sizeof buf, &size);
    assert_non_null(strstr(buf, "KEEL_PL_GRAVE_MAX is 6000"));
    power_loss(f, out, sizeof out);
    assert_non_null(strstr(out, "unlinks_without_grave=1"));
    read_data(f, "f", buf, sizeof buf, &size);
    assert_string_equal(buf, "fff");
    /* Its unlink counts as having reached the disk. */
    read_data(f, "g", buf, sizeof buf, &size);
    assert_int_equal(size, -1);
}

/* A kill -9 between the writes of one journal record leaves it cut
 * short; the node restarts (no power loss) and its shim appends to the
 * same journal. The power loss that follows must still undo the restarted
 * process's unsynced write (the mixed nemesis: the tool once read the cut
 * record on into the next process's and failed, "embedded null byte"). */
static void a_record_cut_by_a_kill_hides_nothing_after_it(void **state)
{
    struct fx *f = *state;
    char buf[64], out[512];
    long size = 0;
    run_child(f, "--child-first", NULL);
    FILE *j = fopen(f->journal, "ab");
    assert_non_null(j);
    fputs("W", j); /* killed right after a record's first write */
    fclose(j);
    run_child(f, "--child-second", NULL);
    power_loss(f, out, sizeof out);
    read_data(f, "e", buf, sizeof buf, &size);
    assert_string_equal(buf, "eee");
    read_data(f, "g", buf, sizeof buf, &size);
    assert_string_equal(buf, "ggg");
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child-first") == 0) {
        child_overwrite(argv[2], "e", "eee", "EEE");
        return 1;
    }
    if (argc == 3 && strcmp(argv[1], "--child-second") == 0) {
        child_overwrite(argv[2], "g", "ggg", "GGG");
        return 1;
    }
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        child(argv[2]);
        return 1;
    }
    if (argc == 3 && strcmp(argv[1], "--child-graves") == 0) {
        child_graves(argv[2]);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(synced_survives_unsynced_is_gone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_durable_unlink_keeps_no_grave, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            graves_past_the_bound_are_not_kept_and_said, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_record_cut_by_a_kill_hides_nothing_after_it, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
