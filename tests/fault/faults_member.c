/* keel-faults' membership nemesis (issue 9): while the publishers and the
 * consumer run, each event changes the cluster through the keel CLI, the
 * way an operator would (docs/operations.md "keel cluster"):
 *
 *   xfer-meta    transfer-leader [--to a random voter]
 *   xfer-stream  transfer-leader --stream FAULTS [--to a random replica]
 *   move         remove-peer NODE --stream FAULTS (a follower's replica
 *                moves to a node that does not host the stream)
 *   remove       remove-peer NODE (alive), its replica moves; the node is
 *                stopped, its data directory wiped, started again (a new
 *                incarnation that waits) and add-peer NODE
 *   kill-remove  kill -9 NODE, remove-peer NODE while it is down, its
 *                replica moves; wipe, start, add-peer NODE
 *
 * Every event ends with every node a meta voter again, so the next one
 * starts from the full membership; the stream (R3 on 5 nodes) always has
 * a free node for a moved replica. An event fails the run when a command
 * fails or the cluster does not settle within the bounds (a liveness
 * finding: the CLI's output and what was waited for are printed). A
 * removal whose replica move cannot finish within --wait (the stream's
 * group has no majority for the change while other faults hold a second
 * replica down: Raft's limit, docs/faults.md F24) is undone the way
 * docs/operations.md tells an operator to: the node, started on its disk
 * if it was killed, is added back. If the cluster then settles (every
 * node a voter, the stream R replicas, none reconfiguring) the event
 * counts in member_undone, printed with its reason; if not, it fails.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "faults.h"

#define M_SETTLE_MS 30000 /* a moved replica caught up */
#define M_OUT_BYTES 8192
#define M_RETRY_MS 10000 /* a transfer refused while the leader is cut off */
#define M_ACTIONS 5

enum m_action { M_XFER_META, M_XFER_STREAM, M_MOVE, M_REMOVE, M_KILL_REMOVE };

static const char *const m_names[M_ACTIONS] = {
    "xfer-meta", "xfer-stream", "move", "remove+wipe", "kill+remove+wipe"};

/* Time, not synchronisation: the pace of the bounded polls below. */
static void pace(void)
{
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
}

/* Every running node's URL but skip's (-1: none skipped). */
static void urls_but(struct f_run_ctx *c, int skip, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < c->cfg.nodes; i++) {
        if (i == skip || f_k(c, i)->pid <= 0) {
            continue;
        }
        int w = snprintf(out + used, len - used, "%s%s", used > 0 ? "," : "",
                         f_k(c, i)->url);
        if (w < 0 || (size_t)w >= len - used) {
            break;
        }
        used += (size_t)w;
    }
}

/* The first failure's reason, for the run's info line (stderr has all). */
static void why(struct f_run_ctx *c, const char *fmt, ...)
{
    va_list ap;
    if (c->member_why[0] != '\0') {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(c->member_why, sizeof c->member_why, fmt, ap);
    va_end(ap);
}

/* Run `keel <args>` once against the running nodes but skip; exit status
 * (0 success), its output in out. Printed with -v and when it fails. */
static int keel_cli_once(struct f_run_ctx *c, int skip, const char *args,
                         char *out, size_t len)
{
    char urls[512];
    char cmd[1400];
    urls_but(c, skip, urls, sizeof urls);
    snprintf(cmd, sizeof cmd, "'%s' %s -s '%s' 2>&1", c->cfg.keel, args, urls);
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        return -1;
    }
    size_t got = fread(out, 1, len - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    int rv = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rv != 0 || c->cfg.verbose) {
        fprintf(stderr, "keel-faults: keel %s -> %d\n%s", args, rv, out);
    }
    return rv;
}

/* Run `keel <args>` against the running nodes but skip; exit status (0
 * success). A leadership transfer refused with 10008 ("the leader cannot
 * be reached now; retry": a partition or a pause holds the leader) is
 * retried, as an operator would, for up to M_RETRY_MS; it changed nothing,
 * so only a refusal that lasts past the bound fails the event. */
static int keel_cli(struct f_run_ctx *c, int skip, const char *fmt, ...)
{
    char args[512];
    static char out[M_OUT_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    bool retry = strncmp(args, "cluster transfer-leader", 23) == 0;
    long long t0 = h_now_ms();
    int rv = keel_cli_once(c, skip, args, out, sizeof out);
    while (rv != 0 && retry && strstr(out, "(error 10008)") != NULL &&
           h_now_ms() - t0 < M_RETRY_MS) {
        pace();
        rv = keel_cli_once(c, skip, args, out, sizeof out);
    }
    if (rv != 0) {
        char *nl = strchr(out, '\n');
        if (nl != NULL) {
            *nl = '\0';
        }
        why(c, "keel %s -> %d: %s", args, rv, out);
    }
    return rv;
}

static const char *name_of(struct f_run_ctx *c, int i)
{
    return c->net.node[i].name;
}

/* The stream's leader and replicas, R of them, none on node gone (-1:
 * any), and no reconfiguration under way (a new replica is promoted only
 * once caught up; "current" itself flickers under the load). */
static bool settled(struct f_run_ctx *c, const char *urls, int gone)
{
    json_t *cl = f_stream_cluster(urls);
    int l = f_node_of(c, json_string_value(json_object_get(cl, "leader")));
    bool ok =
        l >= 0 && l != gone && json_object_get(cl, "reconfiguring") == NULL;
    int n = l >= 0 ? 1 : 0;
    size_t k;
    json_t *r;
    json_array_foreach(json_object_get(cl, "replicas"), k, r)
    {
        int f = f_node_of(c, json_string_value(json_object_get(r, "name")));
        ok = ok && f >= 0 && f != gone;
        n++;
    }
    json_decref(cl);
    return ok && n == c->cfg.replicas;
}

static int wait_settled(struct f_run_ctx *c, int gone, const char *why_s)
{
    char urls[512];
    long long t0 = h_now_ms();
    urls_but(c, gone, urls, sizeof urls);
    while (h_now_ms() - t0 < M_SETTLE_MS) {
        if (settled(c, urls, gone)) {
            return 0;
        }
        if (getenv("KEEL_FAULTS_DEBUG") != NULL) {
            json_t *cl = f_stream_cluster(urls);
            char *s = cl != NULL ? json_dumps(cl, JSON_COMPACT) : NULL;
            fprintf(stderr, "keel-faults: %lld ms %s\n", h_now_ms() - t0,
                    s != NULL ? s : "-");
            free(s);
            json_decref(cl);
        }
        pace();
    }
    json_t *cl = f_stream_cluster(urls);
    char *s = cl != NULL ? json_dumps(cl, JSON_COMPACT) : NULL;
    why(c, "%s: not settled in %d ms: %s", why_s, M_SETTLE_MS,
        s != NULL ? s : "no answer");
    fprintf(stderr,
            "keel-faults: %s: the stream did not settle within %d ms "
            "(%d replicas%s%s): %s\n",
            why_s, M_SETTLE_MS, c->cfg.replicas, gone >= 0 ? ", none on " : "",
            gone >= 0 ? name_of(c, gone) : "", s != NULL ? s : "no answer");
    free(s);
    json_decref(cl);
    return -1;
}

/* A random node among those host[] says (want true) or not (false). */
static int random_node(struct f_run_ctx *c, bool want)
{
    for (int guard = 0; guard < 1000; guard++) {
        int i = (int)(f_rand(c) % (uint64_t)c->cfg.nodes);
        if (c->host[i] == want && f_k(c, i)->pid > 0) {
            return i;
        }
    }
    return -1;
}

/* Node i's data directory replaced by an empty one (a new disk). */
static int wipe(struct f_run_ctx *c, int i)
{
    /* A wiped disk is a new disk: the power shim's journal of the old
     * one's unsynced writes goes with it. */
    char cmd[2200];
    const struct h_keeld *k = f_k(c, i);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' '%s/pl.journal' '%s'/pl.journal.grave.* && "
             "mkdir '%s'",
             k->data_dir, k->dir, k->dir, k->data_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Start node i again (the port may still be held: bounded retries). */
static int start(struct f_run_ctx *c, int i)
{
    for (int tries = 0; tries < 10; tries++) {
        if (f_cluster_node_start(c, i) == 0) {
            return 0;
        }
        pace();
    }
    fprintf(stderr, "keel-faults: %s did not start on its empty disk\n",
            name_of(c, i));
    why(c, "%s did not start on its empty disk", name_of(c, i));
    return -1;
}

/* Node i is out of the meta group and hosts no replica: wipe its disk,
 * start it, add it back (the CLI waits until it votes). */
static int wipe_and_add(struct f_run_ctx *c, int i)
{
    if (f_k(c, i)->pid > 0 && h_netns_node_stop(&c->net, i) != 0) {
        fprintf(stderr, "keel-faults: %s did not stop cleanly\n",
                name_of(c, i));
        c->unclean_stops++;
    }
    f_k(c, i)->pid = 0;
    if (wipe(c, i) != 0 || start(c, i) != 0) {
        return -1;
    }
    if (h_netns_wait_mesh(&c->net, F_RECOVERY_MS_MAX) != 0) {
        fprintf(stderr, "keel-faults: %s did not link to the others\n",
                name_of(c, i));
        why(c, "%s did not link to the others", name_of(c, i));
        return -1;
    }
    return keel_cli(c, -1, "cluster add-peer %s --wait %ds", name_of(c, i),
                    c->cfg.member_wait_s) == 0
               ? 0
               : -1;
}

/* A removal that did not complete (findings F21, F24): node i may be out
 * of the meta group while a stream still places a replica on it, so its
 * disk is never wiped (docs/operations.md: do not stop the node yet). It
 * is started again on that disk if it was killed and added back (it
 * learns the moves as a member). 0 once the cluster settled after that:
 * the node a voter (add-peer waits for it) and the stream with its R
 * replicas, none reconfiguring. */
static int undo_remove(struct f_run_ctx *c, int i)
{
    if (f_k(c, i)->pid <= 0 &&
        (start(c, i) != 0 ||
         h_netns_wait_mesh(&c->net, F_RECOVERY_MS_MAX) != 0)) {
        return -1;
    }
    if (keel_cli(c, -1, "cluster add-peer %s --wait %ds", name_of(c, i),
                 c->cfg.member_wait_s) != 0) {
        return -1;
    }
    return wait_settled(c, -1, "undone removal");
}

static int remove_node(struct f_run_ctx *c, int i, bool killed)
{
    if (killed && h_netns_node_kill(&c->net, i) != 0) {
        return -1;
    }
    if (killed) {
        f_k(c, i)->pid = 0;
    }
    /* Stop it only once its replica moved (docs/operations.md). */
    if (keel_cli(c, i, "cluster remove-peer %s --wait %ds", name_of(c, i),
                 c->cfg.member_wait_s) == 0 &&
        (!c->host[i] || wait_settled(c, i, "remove-peer") == 0)) {
        return wipe_and_add(c, i);
    }
    /* The event started with no failure recorded (f_member_event stops at
     * the first): the reason is this removal's. */
    char reason[sizeof c->member_why];
    snprintf(reason, sizeof reason, "%s", c->member_why);
    c->member_why[0] = '\0';
    if (undo_remove(c, i) != 0) {
        char undo[sizeof c->member_why];
        snprintf(undo, sizeof undo, "%s", c->member_why);
        c->member_why[0] = '\0';
        why(c, "%s; the undo failed: %s", reason, undo);
        return -1;
    }
    c->member_why[0] = '\0';
    if (c->member_undone++ == 0) {
        snprintf(c->undone_why, sizeof c->undone_why, "%s", reason);
    }
    fprintf(stderr,
            "keel-faults: the removal of %s did not complete (%s): undone, "
            "%s added back and the stream settled\n",
            name_of(c, i), reason, name_of(c, i));
    return 0;
}

static void log_action(struct f_run_ctx *c, enum m_action a, int node)
{
    size_t used = strlen(c->injury_log);
    c->injured++;
    if (used > sizeof c->injury_log / 2) {
        return;
    }
    snprintf(c->injury_log + used, sizeof c->injury_log - used, "%s%s%s%s",
             used > 0 ? "; " : "", m_names[a], node >= 0 ? " " : "",
             node >= 0 ? name_of(c, node) : "");
}

/* Refresh c->host from STREAM.INFO (the replicas move). */
static int hosts(struct f_run_ctx *c)
{
    char urls[512];
    urls_but(c, -1, urls, sizeof urls);
    return f_cluster_hosts(c, urls);
}

int f_member_event(struct f_run_ctx *c)
{
    /* Every action once per M_ACTIONS events: the node-replacing ones
     * first (a short CI run has them), then in a random order. */
    static int order[M_ACTIONS] = {M_REMOVE, M_XFER_META, M_KILL_REMOVE,
                                   M_XFER_STREAM, M_MOVE};
    static int next = 0;
    if (next == M_ACTIONS) {
        for (int i = M_ACTIONS - 1; i > 0; i--) {
            int j = (int)(f_rand(c) % (uint64_t)(i + 1));
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        next = 0;
    }
    enum m_action a = (enum m_action)order[next++];
    if (c->member_failed > 0) {
        return 0; /* the cluster is in an unknown state: no more changes */
    }
    if (hosts(c) != 0) {
        fprintf(stderr, "keel-faults: the stream's replicas are unknown\n");
        why(c, "the stream's replicas are unknown");
        c->member_failed++;
        return 0;
    }
    int node = -1;
    int rv = 0;
    long long t0 = h_now_ms();
    switch (a) {
    case M_XFER_META:
        node = f_rand(c) % 2 == 0 ? random_node(c, true) : -1;
        log_action(c, a, node);
        rv = keel_cli(c, -1, "cluster transfer-leader%s%s",
                      node >= 0 ? " --to " : "",
                      node >= 0 ? name_of(c, node) : "");
        break;
    case M_XFER_STREAM:
        node = f_rand(c) % 2 == 0 ? random_node(c, true) : -1;
        log_action(c, a, node);
        rv = keel_cli(
            c, -1, "cluster transfer-leader --stream " F_STREAM "%s%s",
            node >= 0 ? " --to " : "", node >= 0 ? name_of(c, node) : "");
        break;
    case M_MOVE:
        node = random_node(c, true);
        log_action(c, a, node);
        rv = node < 0
                 ? -1
                 : keel_cli(c, -1, "cluster remove-peer %s --stream " F_STREAM,
                            name_of(c, node));
        rv = rv == 0 ? wait_settled(c, node, "remove-peer --stream") : rv;
        break;
    case M_REMOVE:
    case M_KILL_REMOVE:
        /* Half the time a replica's node, else a spare. */
        node = random_node(c, f_rand(c) % 2 == 0);
        log_action(c, a, node);
        rv = node < 0 ? -1 : remove_node(c, node, a == M_KILL_REMOVE);
        break;
    }
    if (rv == 0) {
        rv = wait_settled(c, -1, m_names[a]);
    }
    if (rv != 0 || c->cfg.verbose) {
        fprintf(stderr, "keel-faults: membership event %s%s%s %s (%lld ms)\n",
                m_names[a], node >= 0 ? " " : "",
                node >= 0 ? name_of(c, node) : "", rv == 0 ? "done" : "FAILED",
                h_now_ms() - t0);
    }
    c->member_failed += rv != 0;
    return 0;
}

/* Every node a voter of the meta group (PEER.INFO through the leader). */
static bool all_voters(struct f_run_ctx *c, const char *urls)
{
    natsConnection *nc = NULL;
    bool ok = f_connect(urls, &nc) == 0;
    for (int i = 0; ok && i < c->cfg.nodes; i++) {
        char body[64];
        natsMsg *m = NULL;
        snprintf(body, sizeof body, "{\"peer\":\"%s\"}", name_of(c, i));
        ok = natsConnection_RequestString(&m, nc, "$KEEL.API.CLUSTER.PEER.INFO",
                                          body, 1000) == NATS_OK;
        json_t *o = ok ? json_loadb(natsMsg_GetData(m),
                                    (size_t)natsMsg_GetDataLength(m), 0, NULL)
                       : NULL;
        const char *role = json_string_value(json_object_get(o, "role"));
        ok = role != NULL && strcmp(role, "voter") == 0;
        json_decref(o);
        natsMsg_Destroy(m);
    }
    natsConnection_Destroy(nc);
    return ok;
}

int f_member_settle(struct f_run_ctx *c, const char *urls)
{
    long long t0 = h_now_ms();
    while (!all_voters(c, urls)) {
        if (h_now_ms() - t0 > M_SETTLE_MS) {
            fprintf(stderr, "keel-faults: not every node is a meta voter "
                            "at the end\n");
            why(c, "not every node is a meta voter at the end");
            c->member_failed++;
            return -1;
        }
        pace();
    }
    if (wait_settled(c, -1, "the end") != 0 || f_cluster_hosts(c, urls) != 0) {
        c->member_failed++;
        return -1;
    }
    return 0;
}
