#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool h_poll(bool (*cond)(void *), void *arg, int timeout_ms)
{
    long long end = h_now_ms() + timeout_ms;
    struct timespec tick = {0, 5 * 1000 * 1000};

    for (;;) {
        if (cond(arg)) {
            return true;
        }
        if (h_now_ms() >= end) {
            return false;
        }
        /* The poll tick of a bounded wait for a condition, not a delay. */
        nanosleep(&tick, NULL);
    }
}

int h_keel(const char *servers, const char *args, bool quiet, char *out,
           size_t cap)
{
    char cmd[4096];
    const char *bin = getenv("KEEL");
    out[0] = '\0';
    if (bin == NULL) {
        return -1;
    }
    snprintf(cmd, sizeof cmd, "%s %s -s %s --timeout 5s %s", bin, args, servers,
             quiet ? "2>/dev/null" : "2>&1");
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        return -1;
    }
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool h_file_has(const char *path, const char *text)
{
    char buf[65536];
    FILE *fp = fopen(path, "r");
    size_t n = fp != NULL ? fread(buf, 1, sizeof buf - 1, fp) : 0;

    if (fp != NULL) {
        fclose(fp);
    }
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

int h_conf_write(char *dir, const char *name, const char *text, char *path,
                 size_t cap)
{
    if (mkdtemp(dir) == NULL) {
        return -1;
    }
    int n = snprintf(path, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) {
        return -1;
    }
    FILE *fp = fopen(path, "w");
    if (fp == NULL) {
        return -1;
    }
    int put = fputs(text, fp);
    return fclose(fp) != 0 || put < 0 ? -1 : 0;
}

void h_conf_remove(const char *dir, const char *path)
{
    unlink(path);
    rmdir(dir);
}

const char *h_keeld_path(void)
{
    const char *p = getenv("KEELD");
    return p != NULL ? p : "keeld";
}

int h_keeld_init(struct h_keeld *k)
{
    char tmpl[] = "/tmp/keel-it-XXXXXX";

    memset(k, 0, sizeof *k);
    k->pid = -1;
    k->http_port = -1;
    if (mkdtemp(tmpl) == NULL) {
        return -1;
    }
    snprintf(k->dir, sizeof k->dir, "%s", tmpl);
    snprintf(k->data_dir, sizeof k->data_dir, "%s/data", tmpl);
    snprintf(k->ports_dir, sizeof k->ports_dir, "%s/ports", tmpl);
    snprintf(k->log_path, sizeof k->log_path, "%s/keeld.log", tmpl);
    return mkdir(k->ports_dir, 0755);
}

static pid_t spawn_masked(const char *const *argv, const char *log_path,
                          bool block_stop)
{
    sigset_t set;
    sigset_t old;

    /* Blocked before the fork, so not even a signal sent the moment fork
     * returns finds the child unprotected; the mask survives exec, and a
     * signal sent before keeld's main runs waits, pending, instead of
     * killing a half-started child. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR2);
    if (block_stop) {
        sigprocmask(SIG_BLOCK, &set, &old);
    }
    pid_t pid = fork();

    if (pid != 0) {
        if (block_stop) {
            sigprocmask(SIG_SETMASK, &old, NULL);
        }
        return pid;
    }
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 2);
        dup2(fd, 1);
        close(fd);
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

static pid_t spawn(const char *const *argv, const char *log_path)
{
    return spawn_masked(argv, log_path, false);
}

static void print_log(const struct h_keeld *k)
{
    char line[1024];
    FILE *f = fopen(k->log_path, "r");

    if (f == NULL) {
        return;
    }
    fprintf(stderr, "---- keeld log %s ----\n", k->log_path);
    while (fgets(line, sizeof line, f) != NULL) {
        fputs(line, stderr);
    }
    fclose(f);
}

struct ports_wait {
    struct h_keeld *k;
    bool exited;
    int status;
};

static bool ports_ready(void *arg)
{
    struct ports_wait *w = arg;
    json_t *root;

    if (waitpid(w->k->pid, &w->status, WNOHANG) == w->k->pid) {
        w->exited = true;
        return true;
    }
    root = json_load_file(w->k->ports_file, 0, NULL);
    if (root == NULL) {
        return false;
    }
    w->k->port = h_ports_port(root, "client");
    if (w->k->port < 0) {
        /* nats-server names them "nats" only: KEELD may be a wrapper that
         * runs nats-server, to compare a case with the reference. */
        w->k->port = h_ports_port(root, "nats");
    }
    if (json_object_get(root, "monitoring") != NULL) {
        w->k->http_port = h_ports_port(root, "monitoring");
    }
    json_decref(root);
    return w->k->port > 0;
}

static int spawn_keeld(struct h_keeld *k, int port, bool monitor,
                       const char *const *extra, bool block_stop)
{
    const char *argv[H_ARGS_MAX + 16];
    char port_s[16];
    size_t n = 0;

    snprintf(port_s, sizeof port_s, "%d", port);
    argv[n++] = h_keeld_path();
    argv[n++] = "-a";
    argv[n++] = "127.0.0.1";
    argv[n++] = "-p";
    argv[n++] = port_s;
    argv[n++] = "-sd";
    argv[n++] = k->data_dir;
    argv[n++] = "--ports_file_dir";
    argv[n++] = k->ports_dir;
    if (monitor) {
        argv[n++] = "-m";
        argv[n++] = "0";
    }
    for (size_t i = 0; extra != NULL && extra[i] != NULL && i < H_ARGS_MAX;
         i++) {
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    k->port = -1;
    k->http_port = -1;
    k->pid = spawn_masked(argv, k->log_path, block_stop);
    if (k->pid < 0) {
        return -1;
    }
    snprintf(k->ports_file, sizeof k->ports_file, "%s/keeld_%d.ports",
             k->ports_dir, (int)k->pid);
    return 0;
}

int h_keeld_spawn(struct h_keeld *k, int port, bool monitor,
                  const char *const *extra)
{
    return spawn_keeld(k, port, monitor, extra, true);
}

int h_keeld_start(struct h_keeld *k, int port, bool monitor,
                  const char *const *extra)
{
    if (spawn_keeld(k, port, monitor, extra, false) != 0) {
        return -1;
    }
    struct ports_wait w = {k, false, 0};
    if (!h_poll(ports_ready, &w, H_START_TIMEOUT_MS) || w.exited) {
        fprintf(stderr, "keeld did not start (%s)\n",
                w.exited ? "exited" : "timeout");
        print_log(k);
        if (!w.exited) {
            (void)h_keeld_stop(k, NULL);
        }
        k->pid = -1;
        return -1;
    }
    snprintf(k->url, sizeof k->url, "nats://127.0.0.1:%d", k->port);
    return 0;
}

int h_wait_pid(pid_t pid, int timeout_ms, int *status)
{
    long long end = h_now_ms() + timeout_ms;
    struct timespec tick = {0, 5 * 1000 * 1000};
    int st;

    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (status != NULL) {
                *status = st;
            }
            return 0;
        }
        if (r < 0 || h_now_ms() >= end) {
            return -1;
        }
        /* Poll tick of the bounded wait for the child's exit. */
        nanosleep(&tick, NULL);
    }
}

int h_keeld_stop(struct h_keeld *k, int *status)
{
    int st = 0;
    int rv = 0;

    if (k->pid <= 0) {
        return 0;
    }
    kill(k->pid, SIGTERM);
    if (h_wait_pid(k->pid, H_STOP_TIMEOUT_MS, &st) != 0) {
        fprintf(stderr, "keeld %d ignored SIGTERM; killing it\n", (int)k->pid);
        print_log(k);
        kill(k->pid, SIGKILL);
        (void)h_wait_pid(k->pid, H_STOP_TIMEOUT_MS, &st);
        rv = -1;
    }
    if (rv == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        /* A sanitizer report or a crash shows up as an unclean exit. */
        fprintf(stderr, "keeld %d exited uncleanly (status 0x%x)\n",
                (int)k->pid, st);
        print_log(k);
        rv = -1;
    }
    if (status != NULL) {
        *status = st;
    }
    k->pid = -1;
    return rv;
}

void h_keeld_cleanup(struct h_keeld *k)
{
    char cmd[PATH_MAX + 16];

    (void)h_keeld_stop(k, NULL);
    if (k->dir[0] != '\0' && strncmp(k->dir, "/tmp/keel-it-", 13) == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", k->dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "could not remove %s\n", k->dir);
        }
    }
    k->dir[0] = '\0';
}

int h_run_keeld(const char *const *args, char *stderr_out, size_t len)
{
    const char *argv[H_ARGS_MAX + 2];
    char log[] = "/tmp/keel-it-run-XXXXXX";
    int fd = mkstemp(log);
    int st = -1;
    size_t n = 0;

    if (fd < 0) {
        return -1;
    }
    close(fd);
    argv[n++] = h_keeld_path();
    for (size_t i = 0; args[i] != NULL && i < H_ARGS_MAX; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    pid_t pid = spawn(argv, log);
    if (pid < 0 || h_wait_pid(pid, H_START_TIMEOUT_MS, &st) != 0) {
        if (pid > 0) {
            kill(pid, SIGKILL);
            (void)h_wait_pid(pid, H_STOP_TIMEOUT_MS, NULL);
        }
        st = -1;
    }
    if (stderr_out != NULL) {
        FILE *f = fopen(log, "r");
        size_t got = f != NULL ? fread(stderr_out, 1, len - 1, f) : 0;
        stderr_out[got] = '\0';
        if (f != NULL) {
            fclose(f);
        }
    }
    unlink(log);
    return st;
}

int h_tcp_connect(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int h_read_until(int fd, const char *want, char *buf, size_t len,
                 int timeout_ms)
{
    long long end = h_now_ms() + timeout_ms;
    size_t got = 0;

    buf[0] = '\0';
    while (strstr(buf, want) == NULL) {
        long long left = end - h_now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || got + 1 >= len) {
            return -1;
        }
        if (poll(&p, 1, (int)left) <= 0) {
            continue;
        }
        ssize_t n = read(fd, buf + got, len - 1 - got);
        if (n <= 0) {
            return -1;
        }
        got += (size_t)n;
        buf[got] = '\0';
    }
    return 0;
}

int h_http_get_fd(int fd, const char *path, char *body, size_t len)
{
    enum { RESP_MAX = 65536 };
    char req[256];
    char *resp = malloc(RESP_MAX); /* not static: tests call from threads */
    int code = -1;

    body[0] = '\0';
    if (fd < 0 || resp == NULL) {
        free(resp);
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: localhost\r\n"
                     "Connection: close\r\n\r\n",
                     path);
    if (write(fd, req, (size_t)n) == n &&
        h_read_until(fd, "\r\n\r\n", resp, RESP_MAX, 5000) == 0) {
        /* Connection: close ends the body: read to EOF (bounded by the
         * socket timeout of a node that stopped answering). */
        struct timeval tv = {5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        size_t got = strlen(resp);
        ssize_t r;
        while (got + 1 < RESP_MAX &&
               (r = read(fd, resp + got, RESP_MAX - 1 - got)) > 0) {
            got += (size_t)r;
        }
        resp[got] = '\0';
        sscanf(resp, "HTTP/1.%*d %d", &code);
        const char *b = strstr(resp, "\r\n\r\n");
        snprintf(body, len, "%s", b != NULL ? b + 4 : "");
    }
    close(fd);
    free(resp);
    return code;
}

int h_http_get(int port, const char *path, char *body, size_t len)
{
    int fd = h_tcp_connect(port);
    if (fd < 0) {
        body[0] = '\0';
        return -1;
    }
    return h_http_get_fd(fd, path, body, len);
}

bool h_varz_has(void *arg)
{
    struct h_varz_wait *w = arg;
    return h_http_get(w->port, "/varz", w->body, sizeof w->body) == 200 &&
           strstr(w->body, w->want) != NULL;
}

int h_ports_port(json_t *root, const char *key)
{
    const char *url =
        json_string_value(json_array_get(json_object_get(root, key), 0));
    const char *colon = url != NULL ? strrchr(url, ':') : NULL;
    return colon != NULL ? atoi(colon + 1) : -1;
}

int h_routez_num_routes(const char *body)
{
    json_t *root = json_loads(body, 0, NULL);
    int n = root != NULL
                ? (int)json_integer_value(json_object_get(root, "num_routes"))
                : -1;
    json_decref(root);
    return n;
}

/* ---- clusters ---- */

static bool cluster_port_ready(void *arg)
{
    struct h_keeld *k = arg;
    json_t *root = json_load_file(k->ports_file, 0, NULL);
    int port = root != NULL ? h_ports_port(root, "cluster") : -1;
    json_decref(root);
    return port > 0;
}

int h_cluster_node_start(struct h_cluster *c, int i)
{
    char name[16];
    char routes[H_CLUSTER_NODES_MAX * 40] = "";
    size_t n = 0;

    snprintf(name, sizeof name, "n%d", i + 1);
    for (int j = 0; j < c->n; j++) {
        if (j != i && c->running[j]) {
            n += (size_t)snprintf(routes + n, sizeof routes - n,
                                  "%snats://127.0.0.1:%d", n > 0 ? "," : "",
                                  c->cluster_port[j]);
        }
    }
    const char *extra[] = {"-n",
                           name,
                           "--cluster",
                           "nats://127.0.0.1:0",
                           "--cluster_name",
                           c->name,
                           n > 0 ? "--routes" : NULL,
                           routes,
                           NULL};
    if (h_keeld_start(&c->k[i], 0, true, extra) != 0) {
        return -1;
    }
    if (!h_poll(cluster_port_ready, &c->k[i], H_START_TIMEOUT_MS)) {
        return -1;
    }
    json_t *root = json_load_file(c->k[i].ports_file, 0, NULL);
    c->cluster_port[i] = h_ports_port(root, "cluster");
    json_decref(root);
    c->running[i] = true;
    return 0;
}

static int routez_links(const struct h_keeld *k)
{
    char body[16384];
    if (h_http_get(k->http_port, "/routez", body, sizeof body) != 200) {
        return -1;
    }
    return h_routez_num_routes(body);
}

static bool meshed(void *arg)
{
    struct h_cluster *c = arg;
    int up = 0;

    for (int i = 0; i < c->n; i++) {
        up += c->running[i];
    }
    for (int i = 0; i < c->n; i++) {
        if (c->running[i] && routez_links(&c->k[i]) != up - 1) {
            return false;
        }
    }
    return true;
}

int h_cluster_wait_mesh(struct h_cluster *c, int timeout_ms)
{
    return h_poll(meshed, c, timeout_ms) ? 0 : -1;
}

int h_cluster_start(struct h_cluster *c, int n, const char *name)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    snprintf(c->name, sizeof c->name, "%s", name);
    for (int i = 0; i < n; i++) {
        c->cluster_port[i] = -1;
        if (h_keeld_init(&c->k[i]) != 0) {
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (h_cluster_node_start(c, i) != 0) {
            return -1;
        }
    }
    if (h_cluster_wait_mesh(c, H_START_TIMEOUT_MS) != 0) {
        fprintf(stderr, "cluster of %d did not form a full mesh\n", n);
        for (int i = 0; i < n; i++) {
            print_log(&c->k[i]);
        }
        return -1;
    }
    return 0;
}

int h_cluster_remote_subs(struct h_cluster *c, int i, int from)
{
    char body[16384];
    char want[16];
    size_t k;
    json_t *r;
    int subs = -1;

    snprintf(want, sizeof want, "n%d", from + 1);
    if (h_http_get(c->k[i].http_port, "/routez", body, sizeof body) != 200) {
        return -1;
    }
    json_t *root = json_loads(body, 0, NULL);
    json_array_foreach(json_object_get(root, "routes"), k, r)
    {
        const char *nm = json_string_value(json_object_get(r, "remote_name"));
        if (nm != NULL && strcmp(nm, want) == 0) {
            subs = (int)json_integer_value(json_object_get(r, "subscriptions"));
        }
    }
    json_decref(root);
    return subs;
}

bool h_routez_has_interest(const char *body, const char *from, const char *key)
{
    size_t k, j;
    json_t *r, *v;
    bool found = false;
    json_t *root = json_loads(body, 0, NULL);
    json_array_foreach(json_object_get(root, "routes"), k, r)
    {
        const char *nm = json_string_value(json_object_get(r, "remote_name"));
        if (nm == NULL || strcmp(nm, from) != 0) {
            continue;
        }
        json_array_foreach(json_object_get(r, "subscriptions_list"), j, v)
        {
            const char *s = json_string_value(v);
            found = found || (s != NULL && strcmp(s, key) == 0);
        }
    }
    json_decref(root);
    return found;
}

bool h_cluster_has_interest(struct h_cluster *c, int i, int from,
                            const char *key)
{
    char body[65536];
    char want[16];

    snprintf(want, sizeof want, "n%d", from + 1);
    return h_http_get(c->k[i].http_port, "/routez", body, sizeof body) == 200 &&
           h_routez_has_interest(body, want, key);
}

struct interest_wait {
    struct h_cluster *c;
    int node;        /* the node that subscribed */
    const char *key; /* "subject" or "subject queue" */
};

static bool interest_arrived(void *arg)
{
    struct interest_wait *w = arg;
    for (int i = 0; i < w->c->n; i++) {
        if (i != w->node && w->c->running[i] &&
            !h_cluster_has_interest(w->c, i, w->node, w->key)) {
            return false;
        }
    }
    return true;
}

bool h_cluster_wait_interest(struct h_cluster *c, int node, const char *key,
                             int timeout_ms)
{
    struct interest_wait w = {c, node, key};
    return h_poll(interest_arrived, &w, timeout_ms);
}

int h_cluster_cleanup(struct h_cluster *c)
{
    int rv = 0;

    for (int i = 0; i < c->n; i++) {
        if (c->k[i].pid > 0 && h_keeld_stop(&c->k[i], NULL) != 0) {
            rv = -1;
        }
        c->running[i] = false;
        h_keeld_cleanup(&c->k[i]);
    }
    return rv;
}

int h_flip_segment_byte(const char *data_dir, const char *needle)
{
    static char buf[1 << 20];
    char groups[512];
    snprintf(groups, sizeof groups, "%s/js/groups", data_dir);
    DIR *d = opendir(groups);
    struct dirent *e;
    bool done = false;
    if (d == NULL) {
        return -1;
    }
    while (!done && (e = readdir(d)) != NULL) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/log/00000000000000000001.blk",
                 groups, e->d_name);
        FILE *fp = fopen(path, "r+b");
        if (fp == NULL) {
            continue;
        }
        size_t n = fread(buf, 1, sizeof buf, fp);
        char *hit = memmem(buf, n, needle, strlen(needle));
        if (hit != NULL) {
            long off = (long)(hit - buf) + 3;
            buf[off] ^= 1;
            done = fseek(fp, off, SEEK_SET) == 0 &&
                   fwrite(buf + off, 1, 1, fp) == 1;
        }
        fclose(fp);
    }
    closedir(d);
    return done ? 0 : -1;
}

uint64_t h_log_start(const char *data_dir)
{
    char path[768];
    uint64_t best = 0;
    snprintf(path, sizeof path, "%s/js/groups", data_dir);
    DIR *g = opendir(path);
    if (g == NULL) {
        return 0;
    }
    struct dirent *ge;
    while ((ge = readdir(g)) != NULL) {
        if (ge->d_name[0] == '.') {
            continue;
        }
        char lp[2048];
        snprintf(lp, sizeof lp, "%s/%s/log", path, ge->d_name);
        DIR *d = opendir(lp);
        if (d == NULL) {
            continue;
        }
        uint64_t lo = UINT64_MAX;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t n = strlen(e->d_name);
            if (n > 4 && strcmp(e->d_name + n - 4, ".blk") == 0) {
                uint64_t b = strtoull(e->d_name, NULL, 10);
                lo = b < lo ? b : lo;
            }
        }
        closedir(d);
        if (lo != UINT64_MAX && lo > best) {
            best = lo;
        }
    }
    closedir(g);
    return best;
}

int h_byte_at(const char *path, off_t off)
{
    unsigned char c = 0;
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? pread(fd, &c, 1, off) : -1;
    if (fd >= 0) {
        close(fd);
    }
    return n == 1 ? c : -1;
}

int h_flip_byte(const char *path, off_t off)
{
    int c = h_byte_at(path, off);
    unsigned char x = (unsigned char)(c ^ 0x20);
    int fd = open(path, O_WRONLY);
    ssize_t n = fd >= 0 && c >= 0 ? pwrite(fd, &x, 1, off) : -1;
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    return n == 1 ? 0 : -1;
}
