/* The power-loss injector itself (suite 'fault'): a child process runs
 * under the LD_PRELOAD shim ($KEEL_PL_SHIM), writes files with and
 * without fdatasync and directory fsync, and dies by SIGKILL; then
 * tools/faults-powerloss ($KEEL_PL_TOOL) applies the power loss. A write
 * covered by a completed fdatasync survives, one that was not is gone; a
 * file whose directory entry was never fsynced is gone, one whose entry
 * was is there; an unlink no directory fsync made durable is undone; the
 * boot id the shim serves changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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

static void synced_survives_unsynced_is_gone(void **state)
{
    struct fx *f = *state;
    char cmd[512];
    char buf[64];
    long size = 0;
    const char *shim = getenv("KEEL_PL_SHIM");
    const char *tool = getenv("KEEL_PL_TOOL");
    assert_non_null(shim);
    assert_non_null(tool);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("KEEL_PL_DIR", f->data, 1);
        setenv("KEEL_PL_JOURNAL", f->journal, 1);
        setenv("KEEL_PL_BOOT_ID", f->boot, 1);
        setenv("LD_PRELOAD", shim, 1);
        char self[256];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
        execl(self, self, "--child", f->data, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    snprintf(cmd, sizeof cmd, "'%s' '%s' --mode drop --boot-id '%s'", tool,
             f->journal, f->boot);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/a", f->data);
    read_file(cmd, buf, sizeof buf, &size);
    assert_string_equal(buf, "synced");
    assert_int_equal(size, 6);
    snprintf(cmd, sizeof cmd, "%s/b", f->data);
    read_file(cmd, buf, sizeof buf, &size);
    assert_int_equal(size, -1);
    snprintf(cmd, sizeof cmd, "%s/c", f->data);
    read_file(cmd, buf, sizeof buf, &size);
    assert_string_equal(buf, "ccc");
    snprintf(cmd, sizeof cmd, "%s/d", f->data);
    read_file(cmd, buf, sizeof buf, &size);
    assert_string_equal(buf, "ddd");
    snprintf(cmd, sizeof cmd, "%s/seen_boot_id", f->root);
    read_file(cmd, buf, sizeof buf, &size);
    assert_string_equal(buf, "00000000-0000-0000-0000-000000000001\n");
    read_file(f->boot, buf, sizeof buf, &size);
    assert_string_not_equal(buf, "00000000-0000-0000-0000-000000000001\n");
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        child(argv[2]);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(synced_survives_unsynced_is_gone, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
