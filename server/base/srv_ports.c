#include "srv_ports.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keel/error.h"

int srv_ports_write(const char *dir, const char *host, int client_port,
                    int http_port, int cluster_port, char *path_out,
                    char *errmsg)
{
    char tmp[PATH_MAX];
    char body[1024];
    int n;
    FILE *f;

    /* "nats" is the key nats-server writes, for tools that read its ports
     * file; "client" is the one keeld always wrote. */
    n = snprintf(body, sizeof body,
                 "{\"client\":[\"nats://%s:%d\"],\"nats\":[\"nats://%s:%d\"]",
                 host, client_port, host, client_port);
    if (http_port >= 0) {
        n += snprintf(body + n, sizeof body - (size_t)n,
                      ",\"monitoring\":[\"http://%s:%d\"]", host, http_port);
    }
    if (cluster_port >= 0) {
        n += snprintf(body + n, sizeof body - (size_t)n,
                      ",\"cluster\":[\"nats://%s:%d\"]", host, cluster_port);
    }
    n += snprintf(body + n, sizeof body - (size_t)n, "}\n");
    snprintf(path_out, PATH_MAX, "%s/keeld_%d.ports", dir, (int)getpid());
    snprintf(tmp, sizeof tmp, "%s/.keeld_%d.ports.tmp", dir, (int)getpid());
    f = fopen(tmp, "w");
    if (f == NULL) {
        return keel_err(KEEL_EIO, errmsg, "cannot write ports file in %s: %s",
                        dir, strerror(errno));
    }
    bool ok = fwrite(body, 1, (size_t)n, f) == (size_t)n;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path_out) != 0) {
        int e = errno;
        unlink(tmp);
        return keel_err(KEEL_EIO, errmsg, "cannot write ports file %s: %s",
                        path_out, strerror(e));
    }
    return 0;
}

static int mkdir_p(const char *dir, char *errmsg)
{
    char p[PATH_MAX];

    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s != '\0'; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                return keel_err(KEEL_EIO, errmsg, "cannot create %s: %s", p,
                                strerror(errno));
            }
            *s = '/';
        }
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        return keel_err(KEEL_EIO, errmsg, "cannot create data directory %s: %s",
                        p, strerror(errno));
    }
    return 0;
}

int srv_datadir_lock(const char *dir, int *fd_out, char *errmsg)
{
    char path[PATH_MAX];
    char pid[32];
    int fd;
    int rv;

    rv = mkdir_p(dir, errmsg);
    if (rv != 0) {
        return rv;
    }
    snprintf(path, sizeof path, "%s/LOCK", dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        return keel_err(KEEL_EIO, errmsg, "cannot open %s: %s", path,
                        strerror(errno));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK) {
            return keel_err(KEEL_ELOCKED, errmsg,
                            "data directory %s is in use by another keeld "
                            "(pid %s)",
                            dir, pid[0] != '\0' ? pid : "?");
        }
        return keel_err(KEEL_EIO, errmsg, "cannot lock %s: %s", path,
                        strerror(e));
    }
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        close(fd);
        return keel_err(KEEL_EIO, errmsg, "cannot write %s: %s", path,
                        strerror(errno));
    }
    *fd_out = fd;
    return 0;
}
