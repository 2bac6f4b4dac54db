/* Cluster test harness over network namespaces: node i runs in its own
 * namespace with address 10.<a>.<b>.<i+1>/24 on a veth pair whose root end
 * is in a bridge (the root namespace has 10.<a>.<b>.254 on it, so the test's
 * clients reach every node). Every node listens for cluster links on the
 * fixed port H_NETNS_CLUSTER_PORT of its own address and gets the same full
 * --routes seed list (docs/design.md §7 bootstrap needs the full list); client
 * and monitoring ports are kernel-chosen and read from the ports file.
 *
 * <a>.<b> and every name carry the test process's pid, so test processes
 * running at once do not collide, and h_netns_reap_stale() removes what a
 * dead test process left behind. Needs root (CI runs as root).
 *
 * Faults: kill -9 / restart a node, partition two nodes (blackhole routes
 * both ways), isolate a node (its veth down).
 */
#ifndef KEEL_TEST_NETNS_H
#define KEEL_TEST_NETNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

#define H_NETNS_NODES_MAX 9
#define H_NETNS_CLUSTER_PORT 6222
#define H_NETNS_EXTRA_MAX 8 /* extra keeld arguments per node */

struct h_netns_node {
    struct h_keeld k; /* k.url is nats://10.a.b.i:PORT */
    char ns[32];      /* namespace name */
    char veth[24];    /* root end of the veth pair (in the bridge) */
    char addr[20];    /* 10.a.b.i */
    char name[16];    /* -n, "n1".. */
    /* --routes of this node; NULL: the cluster's (struct h_netns
     * routes). Must outlive the cluster. */
    const char *routes;
    /* A config file (-c) of this node alone (its server_tags...); NULL:
     * none. Must outlive the cluster. */
    const char *config;
    bool running;
    bool isolated;
};

struct h_netns {
    int n;
    int a, b; /* 10.a.b.0/24 */
    pid_t owner;
    char name[32]; /* --cluster_name */
    char bridge[24];
    char routes[H_NETNS_NODES_MAX * 32];      /* the full seed list */
    const char *extra[H_NETNS_EXTRA_MAX + 1]; /* NULL-terminated */
    bool net_up;                              /* bridge made */
    bool keep_dirs; /* cleanup leaves the temp dirs (a failing run's data) */
    /* Set by h_netns_hosts: a hosts file naming every node (n1 ->
     * 10.a.b.1 ...), bind-mounted on /etc/hosts in a private mount
     * namespace of every node started afterwards, as `ip netns exec`
     * does with /etc/netns/NS/hosts; the machine's /etc/hosts is never
     * touched. "" = none. */
    char hosts[64];
    struct h_netns_node node[H_NETNS_NODES_MAX];
};

/* Remove namespaces, bridges and keeld processes left by test processes
 * that no longer run (names carry their pid). Safe to call any time. */
void h_netns_reap_stale(void);

/* Reap stale leftovers, build the network of n nodes and start keeld in
 * each (`-a 10.a.b.i -p 0 -m 0 -n n<i> --cluster nats://10.a.b.i:6222
 * --cluster_name name --routes <all nodes>` plus extra, NULL-terminated,
 * at most H_NETNS_EXTRA_MAX; the pointers must outlive c). Waits (bounded)
 * for the full mesh. Returns 0 or -1 (what failed printed; the caller
 * still calls h_netns_cleanup). */
int h_netns_start(struct h_netns *c, int n, const char *name,
                  const char *const *extra);

/* As h_netns_start, but only nodes 0..seeds-1 are seeds (--routes) and
 * started; the others are ready to start (h_netns_node_start) with the
 * same --routes, as new nodes joining the cluster. */
int h_netns_start_seeds(struct h_netns *c, int n, int seeds, const char *name,
                        const char *const *extra);

/* h_netns_start without starting any node: dirs and network only, so the
 * caller can start each node itself (its own environment, or another
 * server with h_netns_node_exec), then h_netns_wait_mesh. */
int h_netns_prepare(struct h_netns *c, int n, const char *name,
                    const char *const *extra);

/* Run argv (argv[0] a path) in node i's namespace, logging to its log
 * file, and wait (bounded) until it accepts connections on its address at
 * port; http_port is recorded for h_netns_http_get / wait_mesh (another
 * NATS server: fixed ports, no ports file). Returns 0 or -1. */
int h_netns_node_exec(struct h_netns *c, int i, const char *const *argv,
                      int port, int http_port);

/* Write the hosts file of c's nodes (their names as host names) and use
 * it for every node started from now on. Returns 0 or -1. */
int h_netns_hosts(struct h_netns *c);

/* Start node i (0-based) again in its own data dir; waits for its ports
 * file, not for links. Returns 0 or -1. */
int h_netns_node_start(struct h_netns *c, int i);

/* SIGTERM node i, wait (bounded), SIGKILL after it. Returns 0 if it exited
 * cleanly. */
int h_netns_node_stop(struct h_netns *c, int i);

/* kill -9 node i and reap it. Returns 0 or -1. */
int h_netns_node_kill(struct h_netns *c, int i);

/* Wait until every running, non-isolated node has a link to every other
 * such node (its /routez). Returns 0 or -1 on timeout. */
int h_netns_wait_mesh(struct h_netns *c, int timeout_ms);

/* Cut (heal) the path between nodes i and j both ways with blackhole
 * routes in their namespaces. Returns 0 or -1. */
int h_netns_partition(struct h_netns *c, int i, int j);
int h_netns_heal(struct h_netns *c, int i, int j);

/* Take node i's link to the bridge down (isolated = true) or up again: the
 * test's clients lose it too. Returns 0 or -1. */
int h_netns_isolate(struct h_netns *c, int i, bool isolated);

/* HTTP GET on node i's monitoring port: status code or -1, body in body. */
int h_netns_http_get(struct h_netns *c, int i, const char *path, char *body,
                     size_t len);

/* The first live `.blk` segment file of stopped node i holding the bytes
 * want (outside quarantine/): its path and the offset. 0 or -1. */
int h_netns_find_in_blk(struct h_netns *c, int i, const char *want, char *path,
                        size_t cap, off_t *off);

/* Print node i's keeld log to stderr (for a failing assertion). */
void h_netns_print_log(struct h_netns *c, int i);

/* Stop every running node, delete the namespaces, veths and bridge, and
 * remove the temp dirs (unless keep_dirs). Returns 0 if every node exited
 * cleanly. Calling it again does nothing. (h_netns_start also makes
 * SIGTERM/SIGINT/SIGABRT of the test process SIGKILL its keelds first.) */
int h_netns_cleanup(struct h_netns *c);

#endif
