/* keel-faults on a cluster: one node per network namespace
 * (tests/integration/netns.c) with fixed client, monitoring and cluster
 * ports, so a restarted node comes back at the address its clients have;
 * keeld or nats-server 2.9 (`-js` with routes, the side-by-side runs). The
 * stream's peers and leader come from STREAM.INFO's cluster block; the
 * partitions are netns.c's blackhole routes between node namespaces (the
 * clients, in the root namespace, still reach every node); after healing,
 * f_cluster_converge waits until every replica holds the same log, so the
 * dumps compare settled state, not a follower still catching up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "faults.h"

#define F_INFO_MS 1000 /* one STREAM.INFO request */
#define F_JSZ_BYTES 65536

static char port_s[16], http_s[16], snap_s[16];
static const char *extra[H_NETNS_EXTRA_MAX + 1];

void f_urls_from(struct f_run_ctx *c, int first, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int j = 0; j < c->cfg.nodes; j++) {
        int i = (first + j) % c->cfg.nodes;
        int w = snprintf(out + used, len - used, "%s%s", j > 0 ? "," : "",
                         f_k(c, i)->url);
        if (w < 0 || (size_t)w >= len - used) {
            break;
        }
        used += (size_t)w;
    }
}

int f_cluster_prepare(struct f_run_ctx *c)
{
    size_t n = 0;
    snprintf(port_s, sizeof port_s, "%d", F_NATS_PORT);
    snprintf(http_s, sizeof http_s, "%d", F_NATS_HTTP_PORT);
    snprintf(snap_s, sizeof snap_s, "%d", 500);
    /* netns.c starts keeld with -p 0 -m 0; the later flags win. */
    extra[n++] = "-p";
    extra[n++] = port_s;
    extra[n++] = "-m";
    extra[n++] = http_s;
    extra[n++] = "--fsync";
    extra[n++] = c->cfg.policy;
    if (f_takes_snapshots(c)) {
        extra[n++] = "--snapshot_entries"; /* snapshot files to corrupt */
        extra[n++] = snap_s;
    }
    extra[n] = NULL;
    c->cluster = true;
    return h_netns_prepare(&c->net, c->cfg.nodes, "faults", extra);
}

/* nats-server's path: execv needs one (netns.c does not search PATH). */
static const char *nats_server_path(void)
{
    static char found[512];
    const char *path = getenv("PATH");
    char dirs[2048];
    snprintf(dirs, sizeof dirs, "%s", path != NULL ? path : "/usr/bin");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d != NULL;
         d = strtok_r(NULL, ":", &save)) {
        snprintf(found, sizeof found, "%s/nats-server", d);
        if (access(found, X_OK) == 0) {
            return found;
        }
    }
    return "/usr/sbin/nats-server";
}

/* The shim's environment for node i (set around the spawn only). */
void f_power_env(struct f_run_ctx *c, int i, bool on)
{
    char path[600];
    if (!on) {
        unsetenv("LD_PRELOAD");
        unsetenv("KEEL_PL_DIR");
        unsetenv("KEEL_PL_JOURNAL");
        unsetenv("KEEL_PL_BOOT_ID");
        return;
    }
    setenv("LD_PRELOAD", c->cfg.pl_shim, 1);
    setenv("KEEL_PL_DIR", f_k(c, i)->data_dir, 1);
    snprintf(path, sizeof path, "%s/pl.journal", f_k(c, i)->dir);
    setenv("KEEL_PL_JOURNAL", path, 1);
    snprintf(path, sizeof path, "%s/boot_id", f_k(c, i)->dir);
    setenv("KEEL_PL_BOOT_ID", path, 1);
}

bool f_takes_snapshots(const struct f_run_ctx *c)
{
    return strcmp(c->run_nem->name, "snapshot") == 0 ||
           strcmp(c->run_nem->name, "mixed") == 0;
}

int f_cluster_node_start(struct f_run_ctx *c, int i)
{
    if (!c->cfg.nats_server) {
        /* Every start of a node runs under the shim when the run may cut
         * its power, the membership nemesis's restarts too: a power loss
         * undoes the writes of every process since the last sync. */
        if (c->shim) {
            f_power_env(c, i, true);
        }
        int rv = h_netns_node_start(&c->net, i);
        if (c->shim) {
            f_power_env(c, i, false);
        }
        return rv;
    }
    struct h_netns_node *nd = &c->net.node[i];
    char listen[48];
    snprintf(listen, sizeof listen, "nats://%s:%d", nd->addr,
             H_NETNS_CLUSTER_PORT);
    const char *argv[] = {nats_server_path(),
                          "-a",
                          nd->addr,
                          "-p",
                          port_s,
                          "-m",
                          http_s,
                          "-js",
                          "-sd",
                          nd->k.data_dir,
                          "-n",
                          nd->name,
                          "--cluster",
                          listen,
                          "--cluster_name",
                          c->net.name,
                          "--routes",
                          c->net.routes,
                          NULL};
    return h_netns_node_exec(&c->net, i, argv, F_NATS_PORT, F_NATS_HTTP_PORT);
}

int f_node_of(const struct f_run_ctx *c, const char *name)
{
    for (int i = 0; name != NULL && i < c->cfg.nodes; i++) {
        if (strcmp(c->net.node[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

json_t *f_stream_cluster(const char *urls)
{
    natsConnection *nc = NULL;
    natsMsg *m = NULL;
    json_t *r = NULL;
    if (f_connect(urls, &nc) == 0 &&
        natsConnection_RequestString(&m, nc, "$JS.API.STREAM.INFO." F_STREAM,
                                     "", F_INFO_MS) == NATS_OK) {
        r = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0,
                       NULL);
    }
    natsMsg_Destroy(m);
    natsConnection_Destroy(nc);
    json_t *cl = json_incref(json_object_get(r, "cluster"));
    json_decref(r);
    return cl;
}

/* Time, not synchronisation: the pace of the bounded polls below. */
static void pace(void)
{
    usleep(200 * 1000);
}

int f_cluster_leader(struct f_run_ctx *c, const char *urls)
{
    long long t0 = h_now_ms();
    while (h_now_ms() - t0 < F_RECOVERY_MS_MAX / 4) {
        json_t *cl = f_stream_cluster(urls);
        int l = f_node_of(c, json_string_value(json_object_get(cl, "leader")));
        json_decref(cl);
        if (l >= 0) {
            return l;
        }
        pace(); /* an election is under way: ask again, bounded */
    }
    return -1;
}

int f_cluster_hosts(struct f_run_ctx *c, const char *urls)
{
    long long t0 = h_now_ms();
    while (h_now_ms() - t0 < F_RECOVERY_MS_MAX) {
        json_t *cl = f_stream_cluster(urls);
        int l = f_node_of(c, json_string_value(json_object_get(cl, "leader")));
        json_t *r;
        size_t k;
        int n = l >= 0;
        memset(c->host, 0, sizeof c->host);
        if (l >= 0) {
            c->host[l] = true;
        }
        json_array_foreach(json_object_get(cl, "replicas"), k, r)
        {
            int f = f_node_of(c, json_string_value(json_object_get(r, "name")));
            if (f >= 0 && !c->host[f]) {
                c->host[f] = true;
                n++;
            }
        }
        json_decref(cl);
        if (n == c->cfg.replicas) {
            return 0;
        }
        pace();
    }
    return -1;
}

static void cut_pair(struct f_run_ctx *c, bool *cut, int i, int j)
{
    if (i != j && !cut[i * F_NODES_MAX + j]) {
        cut[i * F_NODES_MAX + j] = cut[j * F_NODES_MAX + i] = true;
        (void)h_netns_partition(&c->net, i, j);
    }
}

int f_cluster_cut(struct f_run_ctx *c, int leader, bool *cut)
{
    int n = c->cfg.nodes;
    int perm[F_NODES_MAX];
    int side = (n - 1) / 2; /* the minority's size */
    for (int i = 0; i < n; i++) {
        perm[i] = i;
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(f_rand(c) % (uint64_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    size_t used = strlen(c->injury_log);
    char what[64] = "";
    switch (c->nem->cut) {
    case F_CUT_LEADER:
        if (leader < 0) {
            return -1;
        }
        for (int j = 0; j < n; j++) {
            cut_pair(c, cut, leader, j);
        }
        snprintf(what, sizeof what, "cut n%d", leader + 1);
        break;
    case F_CUT_HALF: /* perm[0..side) | perm[side..n) */
        for (int a = 0; a < side; a++) {
            for (int b = side; b < n; b++) {
                cut_pair(c, cut, perm[a], perm[b]);
            }
        }
        snprintf(what, sizeof what, "cut minority n%d%s", perm[0] + 1,
                 side > 1 ? "+" : "");
        break;
    case F_CUT_BRIDGE: /* perm[0..side) | bridge perm[side] | the rest */
        for (int a = 0; a < side; a++) {
            for (int b = side + 1; b < n; b++) {
                cut_pair(c, cut, perm[a], perm[b]);
            }
        }
        snprintf(what, sizeof what, "bridge n%d", perm[side] + 1);
        break;
    case F_CUT_NONE:
        return -1;
    }
    if (used + strlen(what) + 3 < sizeof c->injury_log &&
        used < sizeof c->injury_log / 2) {
        snprintf(c->injury_log + used, sizeof c->injury_log - used, "%s%s",
                 used > 0 ? "; " : "", what);
    }
    c->injured++;
    return 0;
}

void f_cluster_heal(struct f_run_ctx *c, bool *cut)
{
    for (int i = 0; i < c->cfg.nodes; i++) {
        for (int j = i + 1; j < c->cfg.nodes; j++) {
            if (cut[i * F_NODES_MAX + j]) {
                (void)h_netns_heal(&c->net, i, j);
                cut[i * F_NODES_MAX + j] = cut[j * F_NODES_MAX + i] = false;
            }
        }
    }
}

/* Did node i's keeld refuse to open a group (damage it cannot repair
 * yet: replica.c's "refusing to open")? Then its replica never runs (the
 * node serves the stream from the others) and cannot converge. */
static bool refused(struct f_run_ctx *c, int i)
{
    char line[1024];
    bool found = false;
    FILE *f = fopen(f_k(c, i)->log_path, "r");
    while (f != NULL && !found && fgets(line, sizeof line, f) != NULL) {
        found = strstr(line, "refusing to open") != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    return found;
}

/* Node i's replica of the stream from /jsz: its last index, or -1 when the
 * node does not list the stream (yet), -2 when it is behind its own
 * commit (still applying). */
static long long replica_last(struct f_run_ctx *c, int i)
{
    static char body[F_JSZ_BYTES];
    if (h_netns_http_get(&c->net, i, "/jsz?streams=true", body, sizeof body) !=
        200) {
        return -1;
    }
    json_t *o = json_loads(body, 0, NULL);
    json_t *s;
    size_t k;
    long long last = -1;
    json_array_foreach(json_object_get(o, "stream_detail"), k, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        json_t *g = json_object_get(s, "group");
        if (name == NULL || strcmp(name, F_STREAM) != 0) {
            continue;
        }
        json_int_t li = json_integer_value(json_object_get(g, "last_index"));
        json_int_t cm = json_integer_value(json_object_get(g, "commit"));
        json_int_t ap = json_integer_value(json_object_get(g, "applied"));
        last = li == cm && cm == ap ? (long long)li : -2;
    }
    json_decref(o);
    return last;
}

static bool converged(struct f_run_ctx *c)
{
    long long want = -1;
    int listed = 0;
    for (int i = 0; i < c->cfg.nodes; i++) {
        if (!c->host[i] || f_k(c, i)->pid <= 0) {
            continue;
        }
        if (refused(c, i)) {
            continue; /* damaged replica, not opened: flagged in its dump */
        }
        long long last = replica_last(c, i);
        if (last < 0 || (want >= 0 && last != want)) {
            return false;
        }
        want = last;
        listed++;
    }
    return listed > c->cfg.replicas / 2;
}

/* Every running node's view of the stream in /jsz, on stderr: a replica
 * that never converged is gone with its process once the run stops
 * (finding F18's second failure left only its dump). */
static void print_groups(struct f_run_ctx *c)
{
    static char body[F_JSZ_BYTES];
    for (int i = 0; i < c->cfg.nodes; i++) {
        if (!c->host[i] || f_k(c, i)->pid <= 0 ||
            h_netns_http_get(&c->net, i, "/jsz?streams=true", body,
                             sizeof body) != 200) {
            continue;
        }
        json_t *o = json_loads(body, 0, NULL);
        json_t *s;
        size_t k;
        json_array_foreach(json_object_get(o, "stream_detail"), k, s)
        {
            const char *name = json_string_value(json_object_get(s, "name"));
            char *d = name != NULL && strcmp(name, F_STREAM) == 0
                          ? json_dumps(s, JSON_COMPACT)
                          : NULL;
            if (d != NULL) {
                fprintf(stderr, "keel-faults: not converged: node %d: %s\n", i,
                        d);
            }
            free(d);
        }
        json_decref(o);
    }
}

int f_cluster_converge(struct f_run_ctx *c)
{
    long long t0 = h_now_ms();
    if (c->cfg.nats_server) {
        return 0; /* no dumps to compare: nothing to wait for */
    }
    while (h_now_ms() - t0 < F_CONVERGE_MS_MAX) {
        if (converged(c)) {
            return (int)(h_now_ms() - t0);
        }
        pace();
    }
    print_groups(c);
    return -1;
}
