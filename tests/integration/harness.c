#include "harness.h"

#include <arpa/inet.h>
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

static pid_t spawn(const char *const *argv, const char *log_path)
{
    pid_t pid = fork();

    if (pid != 0) {
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

/* Parse "scheme://host:PORT" from the first element of key's array. */
static int port_of(json_t *root, const char *key)
{
    const char *url =
        json_string_value(json_array_get(json_object_get(root, key), 0));
    const char *colon = url != NULL ? strrchr(url, ':') : NULL;
    return colon != NULL ? atoi(colon + 1) : -1;
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
    w->k->port = port_of(root, "client");
    if (json_object_get(root, "monitoring") != NULL) {
        w->k->http_port = port_of(root, "monitoring");
    }
    json_decref(root);
    return w->k->port > 0;
}

int h_keeld_start(struct h_keeld *k, int port, bool monitor,
                  const char *const *extra)
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
    k->pid = spawn(argv, k->log_path);
    if (k->pid < 0) {
        return -1;
    }
    snprintf(k->ports_file, sizeof k->ports_file, "%s/keeld_%d.ports",
             k->ports_dir, (int)k->pid);
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

int h_http_get(int port, const char *path, char *body, size_t len)
{
    char req[256];
    char resp[16384];
    int fd = h_tcp_connect(port);
    int code = -1;

    if (fd < 0) {
        return -1;
    }
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: localhost\r\n"
                     "Connection: close\r\n\r\n",
                     path);
    if (write(fd, req, (size_t)n) == n &&
        h_read_until(fd, "\r\n\r\n", resp, sizeof resp, 5000) == 0) {
        /* Read to EOF: Connection: close ends the body. */
        size_t got = strlen(resp);
        ssize_t r;
        while (got + 1 < sizeof resp &&
               (r = read(fd, resp + got, sizeof resp - 1 - got)) > 0) {
            got += (size_t)r;
        }
        resp[got] = '\0';
        sscanf(resp, "HTTP/1.%*d %d", &code);
        const char *b = strstr(resp, "\r\n\r\n");
        snprintf(body, len, "%s", b != NULL ? b + 4 : "");
    }
    close(fd);
    return code;
}
