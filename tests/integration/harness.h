/* Integration-test harness: start real keeld processes on kernel-chosen
 * ports (via --ports_file_dir), wait for them with bounded polls, stop them
 * by PID and remove their temporary directories.
 */
#ifndef KEEL_TEST_HARNESS_H
#define KEEL_TEST_HARNESS_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define H_START_TIMEOUT_MS 30000 /* a loaded 2-core CI machine */
#define H_STOP_TIMEOUT_MS 5000
#define H_ARGS_MAX 32

struct h_keeld {
    pid_t pid;
    char dir[128];        /* temp root, removed by h_keeld_cleanup */
    char data_dir[256];   /* dir/data */
    char ports_dir[256];  /* dir/ports */
    char ports_file[512]; /* ports_dir/keeld_<pid>.ports */
    char log_path[256];   /* keeld's stderr */
    int port;
    int http_port; /* -1 when not requested */
    char url[64];  /* nats://127.0.0.1:PORT */
};

/* Path of keeld from $KEELD (meson sets it). */
const char *h_keeld_path(void);

/* Make a fresh temp dir for k (no process yet). Returns 0 or -1. */
int h_keeld_init(struct h_keeld *k);

/* Start keeld in k's dirs with `-a 127.0.0.1 -p <port> -sd data
 * --ports_file_dir ports` plus extra (NULL-terminated, may be NULL), with
 * -m 0 when monitor. Waits (bounded) for the ports file. port 0 = any.
 * Returns 0, or -1 if keeld exited or timed out (its log is printed). */
int h_keeld_start(struct h_keeld *k, int port, bool monitor,
                  const char *const *extra);

/* Fork and exec keeld as h_keeld_start does, without waiting: k->pid is
 * set on return, k->port is not. The child starts with SIGTERM, SIGINT
 * and SIGUSR2 blocked (keeld unblocks them once its handlers are in
 * place), so a signal sent at once is never the default action. Returns
 * 0 or -1. */
int h_keeld_spawn(struct h_keeld *k, int port, bool monitor,
                  const char *const *extra);

/* SIGTERM, wait up to H_STOP_TIMEOUT_MS, then SIGKILL. *status gets the
 * wait status (may be NULL). Returns 0 if it exited with status 0 on
 * SIGTERM; otherwise prints its log and returns -1. */
int h_keeld_stop(struct h_keeld *k, int *status);

/* Stop if running and remove the temp dir. */
void h_keeld_cleanup(struct h_keeld *k);

/* Run keeld with args to completion (bounded); returns the wait status or
 * -1. stderr_out (may be NULL, len bytes) gets what it printed. */
int h_run_keeld(const char *const *args, char *stderr_out, size_t len);

/* Wait for pid to exit, up to timeout_ms; 0 and *status, or -1. */
int h_wait_pid(pid_t pid, int timeout_ms, int *status);

/* Poll cond(arg) every 5 ms until true or timeout_ms passed. */
bool h_poll(bool (*cond)(void *), void *arg, int timeout_ms);

/* Run $KEEL (the keel binary meson names) with args and `-s servers
 * --timeout 5s`; its stdout (and stderr after it unless quiet) into out
 * (cap bytes, NUL-terminated). Returns its exit status, -1 when it did
 * not run ($KEEL unset too). */
int h_keel(const char *servers, const char *args, bool quiet, char *out,
           size_t cap);

/* Does the file at path (its first 64 KiB) contain text? False when it
 * cannot be read. */
bool h_file_has(const char *path, const char *text);

/* Make the temp dir dir (a mkdtemp template, changed in place) and write
 * text to the file name in it; its path into path (cap bytes), for keeld's
 * -c. Returns 0 or -1. h_conf_remove removes the file and the dir. */
int h_conf_write(char *dir, const char *name, const char *text, char *path,
                 size_t cap);
void h_conf_remove(const char *dir, const char *path);

/* Monotonic milliseconds. */
long long h_now_ms(void);

/* Blocking raw TCP connect to 127.0.0.1:port; fd or -1. */
int h_tcp_connect(int port);

/* Read from fd until `want` appears in the accumulated text or timeout;
 * returns 0 when found. buf (len) receives the text. */
int h_read_until(int fd, const char *want, char *buf, size_t len,
                 int timeout_ms);

/* Minimal HTTP GET on 127.0.0.1:port; returns the status code or -1 and
 * the body in body (len). */
int h_http_get(int port, const char *path, char *body, size_t len);

/* The same on a connected socket fd (closed before it returns). */
int h_http_get_fd(int fd, const char *path, char *body, size_t len);

/* An h_poll condition: /varz on 127.0.0.1:port answers 200 with a body
 * (left in body) that contains want. */
struct h_varz_wait {
    int port;
    const char *want;
    char body[8192];
};
bool h_varz_has(void *arg);

/* The port of the first URL of key ("client", "monitoring", "cluster") in
 * a parsed ports file, or -1. */
int h_ports_port(json_t *root, const char *key);

/* num_routes of a /routez body, or -1. */
int h_routez_num_routes(const char *body);

/* Flip one bit of the first segment of a stream group under data_dir
 * (<data_dir>/js/groups/<hex>/log/00000000000000000001.blk), 3 bytes after
 * the first occurrence of needle (a payload the test published), so the
 * store finds a faulty record below its sync marker at the next start.
 * The server must be stopped. Returns 0, or -1 when no segment holds
 * needle. */
int h_flip_segment_byte(const char *data_dir, const char *needle);

/* The smallest segment base of the Raft group with the most entries
 * behind it under data_dir (<data_dir>/js/groups/<hex>/log/<base>.blk):
 * a stream's log start once the meta group is the smaller. 0 when there
 * is none. */
uint64_t h_log_start(const char *data_dir);

/* The byte at off of path (-1: unreadable), and that byte XOR 0x20
 * written back and fsynced (0, or -1). */
int h_byte_at(const char *path, off_t off);
int h_flip_byte(const char *path, off_t off);

/* ---- clusters (tests/integration/test_cluster_*.c) ---- */

#define H_CLUSTER_NODES_MAX 5

/* A local cluster of keeld nodes n1..nN on loopback: -p 0, -m 0, cluster
 * port 0, all found through their ports files. */
struct h_cluster {
    int n;
    char name[32]; /* --cluster_name */
    struct h_keeld k[H_CLUSTER_NODES_MAX];
    int cluster_port[H_CLUSTER_NODES_MAX]; /* -1 while stopped */
    bool running[H_CLUSTER_NODES_MAX];
};

/* Make the temp dirs of n nodes and start them: node 1 alone, then every
 * other node with --routes listing the running nodes (gossip completes the
 * mesh). Waits (bounded) until every node reports n-1 links in /routez.
 * Returns 0 or -1 (logs printed). */
int h_cluster_start(struct h_cluster *c, int n, const char *name);

/* (Re)start node i (0-based) in its own data dir with --routes to every
 * other running node. Does not wait for links. Returns 0 or -1. */
int h_cluster_node_start(struct h_cluster *c, int i);

/* Wait until every running node has a link to every other running node. */
int h_cluster_wait_mesh(struct h_cluster *c, int timeout_ms);

/* Interest keys node `from` reported to node i (its /routez), -1 if no
 * link to it. */
int h_cluster_remote_subs(struct h_cluster *c, int i, int from);

/* Does node i list interest `key` ("subject" or "subject queue") from
 * node `from` in its /routez? */
bool h_cluster_has_interest(struct h_cluster *c, int i, int from,
                            const char *key);

/* Wait (bounded by timeout_ms) until every other running node lists
 * interest key from node `node` in its /routez; false on timeout. */
bool h_cluster_wait_interest(struct h_cluster *c, int node, const char *key,
                             int timeout_ms);

/* Does a /routez body list interest key ("subject" or "subject queue")
 * received from the node named from? */
bool h_routez_has_interest(const char *body, const char *from, const char *key);

/* Stop every running node by PID (SIGTERM) and remove the temp dirs.
 * Returns 0 if each exited cleanly. */
int h_cluster_cleanup(struct h_cluster *c);

#endif
