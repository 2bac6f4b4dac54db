#include "netns.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <ftw.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define NS_PREFIX "keelit_" /* keelit_<pid>_<i> */
#define BR_PREFIX "kb"      /* kb<pid> */
#define VETH_PREFIX "kv"    /* kv<pid>_<i>, root end */
#define PEER_PREFIX "kp"    /* kp<pid>_<i>, namespace end */
#define STALE_NS_MAX 256    /* namespaces looked at per reap */
#define HTTP_BODY_MAX 65536
#define H_NETNS_CONNECT_MS 1000

/* Run a shell command built from fmt (names and addresses only: nothing
 * from outside the test); its output is discarded unless verbose. Returns
 * 0 when it exited with 0. */
static int sh(bool quiet, const char *fmt, ...)
{
    char cmd[512];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd - 16, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd - 16) {
        return -1;
    }
    if (quiet) {
        strcat(cmd, " >/dev/null 2>&1");
    }
    int st = system(cmd);
    if (st != 0 && !quiet) {
        fprintf(stderr, "netns: '%s' failed (status 0x%x)\n", cmd, st);
    }
    return st == 0 ? 0 : -1;
}

static bool pid_alive(long pid)
{
    return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

/* SIGKILL every process still inside namespace ns (keelds of a dead test
 * process), so deleting it frees its veth. */
static void kill_ns_pids(const char *ns)
{
    char cmd[128];
    char line[64];

    snprintf(cmd, sizeof cmd, "ip netns pids %s 2>/dev/null", ns);
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        return;
    }
    while (fgets(line, sizeof line, p) != NULL) {
        long pid = strtol(line, NULL, 10);
        if (pid > 1) {
            kill((pid_t)pid, SIGKILL);
        }
    }
    pclose(p);
}

static void reap_stale_ns(void)
{
    char line[128];
    FILE *p = popen("ip netns list 2>/dev/null", "r");

    if (p == NULL) {
        return;
    }
    for (int i = 0; i < STALE_NS_MAX && fgets(line, sizeof line, p) != NULL;
         i++) {
        char ns[64];
        if (sscanf(line, "%63s", ns) != 1 ||
            strncmp(ns, NS_PREFIX, strlen(NS_PREFIX)) != 0) {
            continue;
        }
        long pid = strtol(ns + strlen(NS_PREFIX), NULL, 10);
        if (pid <= 0 || pid == (long)getpid() || pid_alive(pid)) {
            continue;
        }
        kill_ns_pids(ns);
        (void)sh(true, "ip netns del %s", ns);
    }
    pclose(p);
}

/* Bridges and root veth ends of dead test processes. */
static void reap_stale_links(void)
{
    DIR *d = opendir("/sys/class/net");
    struct dirent *e;

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        bool br = strncmp(nm, BR_PREFIX, 2) == 0;
        bool veth = strncmp(nm, VETH_PREFIX, 2) == 0;
        if ((!br && !veth) || nm[2] < '0' || nm[2] > '9') {
            continue;
        }
        long pid = strtol(nm + 2, NULL, 10);
        if (pid > 0 && pid != (long)getpid() && !pid_alive(pid)) {
            (void)sh(true, "ip link del %s", nm);
        }
    }
    closedir(d);
}

void h_netns_reap_stale(void)
{
    reap_stale_ns();
    reap_stale_links();
}

/* Namespace end of node i's veth: address, lo, default route to bridge. */
static int net_node(struct h_netns *c, int i)
{
    struct h_netns_node *nd = &c->node[i];
    int pid = (int)c->owner;

    snprintf(nd->ns, sizeof nd->ns, NS_PREFIX "%d_%d", pid, i);
    snprintf(nd->veth, sizeof nd->veth, VETH_PREFIX "%d_%d", pid, i);
    snprintf(nd->addr, sizeof nd->addr, "10.%d.%d.%d", c->a, c->b, i + 1);
    snprintf(nd->name, sizeof nd->name, "n%d", i + 1);
    if (sh(false, "ip netns add %s", nd->ns) != 0 ||
        sh(false, "ip link add %s type veth peer name " PEER_PREFIX "%d_%d",
           nd->veth, pid, i) != 0 ||
        sh(false, "ip link set " PEER_PREFIX "%d_%d netns %s", pid, i,
           nd->ns) != 0 ||
        sh(false, "ip link set %s master %s up", nd->veth, c->bridge) != 0 ||
        sh(false, "ip -n %s addr add %s/24 dev " PEER_PREFIX "%d_%d", nd->ns,
           nd->addr, pid, i) != 0 ||
        sh(false, "ip -n %s link set " PEER_PREFIX "%d_%d up", nd->ns, pid,
           i) != 0 ||
        sh(false, "ip -n %s link set lo up", nd->ns) != 0) {
        return -1;
    }
    return 0;
}

static int net_up(struct h_netns *c)
{
    snprintf(c->bridge, sizeof c->bridge, BR_PREFIX "%d", (int)c->owner);
    if (sh(false, "ip link add %s type bridge", c->bridge) != 0) {
        return -1;
    }
    c->net_up = true;
    if (sh(false, "ip addr add 10.%d.%d.254/24 dev %s", c->a, c->b,
           c->bridge) != 0 ||
        sh(false, "ip link set %s up", c->bridge) != 0) {
        return -1;
    }
    for (int i = 0; i < c->n; i++) {
        if (net_node(c, i) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Child side of spawn: enter the namespace, see hosts (when not "") as
 * /etc/hosts in a mount namespace of its own, log to the node's file,
 * exec. */
static void exec_in_ns(const char *ns, const char *hosts,
                       const char *const *argv, const char *log_path)
{
    char path[128];

    snprintf(path, sizeof path, "/var/run/netns/%s", ns);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) {
        _exit(126);
    }
    /* Private propagation first: the bind mount must not reach the
     * machine's mount namespace. */
    if (hosts[0] != '\0' &&
        (unshare(CLONE_NEWNS) != 0 ||
         mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
         mount(hosts, "/etc/hosts", NULL, MS_BIND, NULL) != 0)) {
        _exit(125);
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

struct start_wait {
    struct h_keeld *k;
    bool exited;
};

static bool ports_ready(void *arg)
{
    struct start_wait *w = arg;
    int st = 0;

    if (waitpid(w->k->pid, &st, WNOHANG) == w->k->pid) {
        w->exited = true;
        return true;
    }
    json_t *root = json_load_file(w->k->ports_file, 0, NULL);
    if (root == NULL) {
        return false;
    }
    w->k->port = h_ports_port(root, "client");
    w->k->http_port = h_ports_port(root, "monitoring");
    bool cluster = h_ports_port(root, "cluster") == H_NETNS_CLUSTER_PORT;
    json_decref(root);
    return w->k->port > 0 && w->k->http_port > 0 && cluster;
}

int h_netns_node_start(struct h_netns *c, int i)
{
    struct h_netns_node *nd = &c->node[i];
    struct h_keeld *k = &nd->k;
    const char *argv[32 + H_NETNS_EXTRA_MAX];
    char listen[40];
    size_t n = 0;

    snprintf(listen, sizeof listen, "nats://%s:%d", nd->addr,
             H_NETNS_CLUSTER_PORT);
    const char *fixed[] = {h_keeld_path(),
                           "-a",
                           nd->addr,
                           "-p",
                           "0",
                           "-m",
                           "0",
                           "-sd",
                           k->data_dir,
                           "--ports_file_dir",
                           k->ports_dir,
                           "-n",
                           nd->name,
                           "--cluster",
                           listen,
                           "--cluster_name",
                           c->name,
                           "--routes",
                           nd->routes != NULL ? nd->routes : c->routes};
    for (size_t j = 0; j < sizeof fixed / sizeof fixed[0]; j++) {
        argv[n++] = fixed[j];
    }
    for (size_t j = 0; c->extra[j] != NULL && j < H_NETNS_EXTRA_MAX; j++) {
        argv[n++] = c->extra[j];
    }
    if (nd->config != NULL) {
        argv[n++] = "-c";
        argv[n++] = nd->config;
    }
    argv[n] = NULL;
    k->port = -1;
    k->http_port = -1;
    k->pid = fork();
    if (k->pid == 0) {
        exec_in_ns(nd->ns, c->hosts, argv, k->log_path);
    }
    if (k->pid < 0) {
        return -1;
    }
    char ports_file[sizeof k->ports_file];
    snprintf(ports_file, sizeof ports_file, "%s/keeld_%d.ports", k->ports_dir,
             (int)k->pid);
    memcpy(k->ports_file, ports_file, sizeof ports_file);
    struct start_wait w = {k, false};
    if (!h_poll(ports_ready, &w, H_START_TIMEOUT_MS) || w.exited) {
        fprintf(stderr, "netns: node %s did not start (%s)\n", nd->name,
                w.exited ? "exited" : "timeout");
        h_netns_print_log(c, i);
        if (!w.exited) {
            (void)h_keeld_stop(k, NULL);
        }
        k->pid = -1;
        return -1;
    }
    char url[sizeof k->url];
    snprintf(url, sizeof url, "nats://%s:%d", nd->addr, k->port);
    memcpy(k->url, url, sizeof url);
    nd->running = true;
    return 0;
}

static int tcp_connect_addr(const char *addr, int port);

struct port_wait {
    struct h_netns_node *nd;
    bool exited;
};

static bool port_ready(void *arg)
{
    struct port_wait *w = arg;
    int st = 0;

    if (waitpid(w->nd->k.pid, &st, WNOHANG) == w->nd->k.pid) {
        w->exited = true;
        return true;
    }
    int fd = tcp_connect_addr(w->nd->addr, w->nd->k.port);
    if (fd >= 0) {
        close(fd);
    }
    return fd >= 0;
}

int h_netns_node_exec(struct h_netns *c, int i, const char *const *argv,
                      int port, int http_port)
{
    struct h_netns_node *nd = &c->node[i];
    struct h_keeld *k = &nd->k;

    k->port = port;
    k->http_port = http_port;
    k->pid = fork();
    if (k->pid == 0) {
        exec_in_ns(nd->ns, c->hosts, argv, k->log_path);
    }
    if (k->pid < 0) {
        return -1;
    }
    struct port_wait w = {nd, false};
    if (!h_poll(port_ready, &w, H_START_TIMEOUT_MS) || w.exited) {
        fprintf(stderr, "netns: %s on node %s did not start (%s)\n", argv[0],
                nd->name, w.exited ? "exited" : "timeout");
        h_netns_print_log(c, i);
        if (!w.exited) {
            (void)h_keeld_stop(k, NULL);
        }
        k->pid = -1;
        return -1;
    }
    char url[sizeof k->url];
    snprintf(url, sizeof url, "nats://%s:%d", nd->addr, port);
    memcpy(k->url, url, sizeof url);
    nd->running = true;
    return 0;
}

/* The cluster of this process, for the signal handler. */
static struct h_netns *active;

/* The test was killed (meson's timeout sends SIGTERM): SIGKILL its keelds
 * (kill is async-signal-safe) so none keeps running; the namespaces, now
 * empty, are reaped by the next test process (h_netns_reap_stale). */
static void on_fatal_signal(int sig)
{
    for (int i = 0; active != NULL && i < active->n; i++) {
        if (active->node[i].k.pid > 0) {
            kill(active->node[i].k.pid, SIGKILL);
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Dirs and network of n nodes, the first seeds of them in --routes. */
static int prepare_seeds(struct h_netns *c, int n, int seeds, const char *name,
                         const char *const *extra)
{
    size_t len = 0;

    memset(c, 0, sizeof *c);
    if (n < 1 || n > H_NETNS_NODES_MAX || seeds < 1 || seeds > n) {
        return -1;
    }
    active = c;
    signal(SIGTERM, on_fatal_signal);
    signal(SIGINT, on_fatal_signal);
    signal(SIGABRT, on_fatal_signal);
    h_netns_reap_stale();
    c->n = n;
    c->owner = getpid();
    /* 10.64.0.0 - 10.127.255.0: a /24 per pid (mod 16384). */
    c->a = 64 + (int)(((unsigned)c->owner >> 8) % 64);
    c->b = (int)((unsigned)c->owner & 0xff);
    size_t name_len = strnlen(name, sizeof c->name - 1);
    memcpy(c->name, name, name_len);
    for (size_t j = 0; extra != NULL && extra[j] != NULL; j++) {
        if (j == H_NETNS_EXTRA_MAX) {
            return -1;
        }
        c->extra[j] = extra[j];
    }
    char routes[sizeof c->routes];
    for (int i = 0; i < n; i++) {
        c->node[i].k.pid = -1;
    }
    for (int i = 0; i < seeds; i++) {
        len += (size_t)snprintf(routes + len, sizeof routes - len,
                                "%snats://10.%d.%d.%d:%d", i > 0 ? "," : "",
                                c->a, c->b, i + 1, H_NETNS_CLUSTER_PORT);
    }
    memcpy(c->routes, routes, sizeof routes);
    for (int i = 0; i < n; i++) {
        if (h_keeld_init(&c->node[i].k) != 0) {
            return -1;
        }
    }
    return net_up(c);
}

int h_netns_prepare(struct h_netns *c, int n, const char *name,
                    const char *const *extra)
{
    return prepare_seeds(c, n, n, name, extra);
}

int h_netns_start_seeds(struct h_netns *c, int n, int seeds, const char *name,
                        const char *const *extra)
{
    if (prepare_seeds(c, n, seeds, name, extra) != 0) {
        return -1;
    }
    for (int i = 0; i < seeds; i++) {
        if (h_netns_node_start(c, i) != 0) {
            return -1;
        }
    }
    if (h_netns_wait_mesh(c, H_START_TIMEOUT_MS) != 0) {
        fprintf(stderr, "netns: cluster of %d did not form a full mesh\n", n);
        for (int i = 0; i < n; i++) {
            h_netns_print_log(c, i);
        }
        return -1;
    }
    return 0;
}

int h_netns_start(struct h_netns *c, int n, const char *name,
                  const char *const *extra)
{
    return h_netns_start_seeds(c, n, n, name, extra);
}

int h_netns_hosts(struct h_netns *c)
{
    char path[sizeof c->hosts];

    snprintf(path, sizeof path, "/tmp/keelit_hosts_%d", (int)c->owner);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return -1;
    }
    fprintf(f, "127.0.0.1 localhost\n");
    for (int i = 0; i < c->n; i++) {
        fprintf(f, "%s %s\n", c->node[i].addr, c->node[i].name);
    }
    if (fclose(f) != 0) {
        return -1;
    }
    memcpy(c->hosts, path, sizeof path);
    return 0;
}

int h_netns_node_stop(struct h_netns *c, int i)
{
    c->node[i].running = false;
    return h_keeld_stop(&c->node[i].k, NULL);
}

int h_netns_node_kill(struct h_netns *c, int i)
{
    struct h_keeld *k = &c->node[i].k;

    c->node[i].running = false;
    if (k->pid <= 0) {
        return 0;
    }
    kill(k->pid, SIGKILL);
    int rv = h_wait_pid(k->pid, H_STOP_TIMEOUT_MS, NULL);
    k->pid = -1;
    return rv;
}

/* Connect to addr:port within H_NETNS_CONNECT_MS (an isolated node's
 * address never answers); fd or -1. */
static int tcp_connect_addr(const char *addr, int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int err = 0;
    socklen_t elen = sizeof err;

    if (fd < 0) {
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        close(fd);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        struct pollfd p = {fd, POLLOUT, 0};
        if (errno != EINPROGRESS || poll(&p, 1, H_NETNS_CONNECT_MS) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 ||
            err != 0) {
            close(fd);
            return -1;
        }
    }
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

int h_netns_http_get(struct h_netns *c, int i, const char *path, char *body,
                     size_t len)
{
    int fd = c->node[i].k.http_port > 0
                 ? tcp_connect_addr(c->node[i].addr, c->node[i].k.http_port)
                 : -1;
    if (fd < 0) {
        body[0] = '\0';
        return -1;
    }
    return h_http_get_fd(fd, path, body, len);
}

static int routez_links(struct h_netns *c, int i)
{
    static char body[HTTP_BODY_MAX];

    if (h_netns_http_get(c, i, "/routez", body, sizeof body) != 200) {
        return -1;
    }
    return h_routez_num_routes(body);
}

static bool reachable(const struct h_netns_node *nd)
{
    return nd->running && !nd->isolated;
}

static bool meshed(void *arg)
{
    struct h_netns *c = arg;
    int up = 0;

    for (int i = 0; i < c->n; i++) {
        up += reachable(&c->node[i]);
    }
    for (int i = 0; i < c->n; i++) {
        if (reachable(&c->node[i]) && routez_links(c, i) != up - 1) {
            return false;
        }
    }
    return true;
}

int h_netns_wait_mesh(struct h_netns *c, int timeout_ms)
{
    return h_poll(meshed, c, timeout_ms) ? 0 : -1;
}

static int blackhole(struct h_netns *c, const char *op, int i, int j)
{
    int rv = sh(false, "ip -n %s route %s blackhole %s/32", c->node[i].ns, op,
                c->node[j].addr);
    if (sh(false, "ip -n %s route %s blackhole %s/32", c->node[j].ns, op,
           c->node[i].addr) != 0) {
        rv = -1;
    }
    return rv;
}

int h_netns_partition(struct h_netns *c, int i, int j)
{
    return blackhole(c, "add", i, j);
}

int h_netns_heal(struct h_netns *c, int i, int j)
{
    return blackhole(c, "del", i, j);
}

int h_netns_isolate(struct h_netns *c, int i, bool isolated)
{
    c->node[i].isolated = isolated;
    return sh(false, "ip link set %s %s", c->node[i].veth,
              isolated ? "down" : "up");
}

void h_netns_print_log(struct h_netns *c, int i)
{
    char line[1024];
    FILE *f = fopen(c->node[i].k.log_path, "r");

    if (f == NULL) {
        return;
    }
    fprintf(stderr, "---- keeld %s log %s ----\n", c->node[i].name,
            c->node[i].k.log_path);
    while (fgets(line, sizeof line, f) != NULL) {
        fputs(line, stderr);
    }
    fclose(f);
}

int h_netns_cleanup(struct h_netns *c)
{
    int rv = 0;

    for (int i = 0; i < c->n; i++) {
        struct h_netns_node *nd = &c->node[i];
        if (nd->k.pid > 0 && h_keeld_stop(&nd->k, NULL) != 0) {
            rv = -1;
        }
        nd->running = false;
        if (nd->ns[0] != '\0') {
            kill_ns_pids(nd->ns);
            (void)sh(true, "ip netns del %s", nd->ns);
            (void)sh(true, "ip link del %s", nd->veth);
            nd->ns[0] = '\0'; /* a second cleanup does nothing */
        }
        if (!c->keep_dirs) {
            h_keeld_cleanup(&nd->k);
        }
    }
    if (c->net_up) {
        (void)sh(true, "ip link del %s", c->bridge);
        c->net_up = false;
    }
    if (c->hosts[0] != '\0') {
        unlink(c->hosts);
        c->hosts[0] = '\0';
    }
    active = NULL;
    return rv;
}

/* ---- finding a record's bytes in a stopped node's segments ---- */

#define BLK_FILE_BYTES_MAX (64u << 20)

static struct {
    const char *want;
    char *path;
    size_t cap;
    off_t off;
    bool found;
} blk_find;

static int blk_find_cb(const char *path, const struct stat *sb, int type,
                       struct FTW *ftw)
{
    (void)ftw;
    size_t n = strlen(path);
    if (type != FTW_F || n < 4 || strcmp(path + n - 4, ".blk") != 0 ||
        strstr(path, "/quarantine/") != NULL || sb->st_size <= 0 ||
        (uint64_t)sb->st_size > BLK_FILE_BYTES_MAX) {
        return 0;
    }
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        return 0;
    }
    char *buf = malloc((size_t)sb->st_size);
    ssize_t got = buf != NULL ? pread(fd, buf, (size_t)sb->st_size, 0) : -1;
    close(fd);
    size_t wl = strlen(blk_find.want);
    for (ssize_t i = 0; got > 0 && i + (ssize_t)wl <= got; i++) {
        if (memcmp(buf + i, blk_find.want, wl) == 0) {
            snprintf(blk_find.path, blk_find.cap, "%s", path);
            blk_find.off = (off_t)i;
            blk_find.found = true;
            free(buf);
            return 1;
        }
    }
    free(buf);
    return 0;
}

int h_netns_find_in_blk(struct h_netns *c, int i, const char *want, char *path,
                        size_t cap, off_t *off)
{
    blk_find.want = want;
    blk_find.path = path;
    blk_find.cap = cap;
    blk_find.found = false;
    if (nftw(c->node[i].k.data_dir, blk_find_cb, 16, FTW_PHYS) != 1 ||
        !blk_find.found) {
        return -1;
    }
    *off = blk_find.off;
    return 0;
}
