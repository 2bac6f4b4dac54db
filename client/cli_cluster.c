/* keel cluster add-peer|remove-peer|replace-peer|transfer-leader: cluster
 * reconfiguration (issue 9) over the admin subjects srv_admin.h lists;
 * status and orphans run from cli_cluster_status.c and cli_orphans.c.
 *
 * Changes go one at a time: add-peer waits until the new node is a voter
 * (printing its catch-up), replace-peer adds then removes, remove-peer
 * waits until the streams' replicas moved off (cli_cluster_move.c). A refusal
 * the server calls retryable (503, err_code 10008: another change in flight,
 * leadership moving) is retried until --wait runs out; anything else is
 * printed as the server said it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli_cluster.h"
#include "cli_js.h"
#include "cli_verbs.h"

#define CLUSTER_WAIT_MS_DEFAULT 60000
#define CLUSTER_POLL_MS 500

static bool retryable(const char *errmsg)
{
    return strstr(errmsg, "(error 10008)") != NULL ||
           strstr(errmsg, "no JetStream answer") != NULL;
}

int cli_cluster_request_retry(natsConnection *nc, int64_t timeout_ms,
                              const char *what, const char *subject,
                              const char *body, int64_t deadline, json_t **out,
                              char *errmsg)
{
    for (;;) {
        int rv = cli_js_request(nc, timeout_ms, what, subject, body, out, NULL,
                                errmsg);
        if (rv == 0 || !retryable(errmsg) || cli_mono_ms() >= deadline) {
            return rv;
        }
        cli_nap_ms(CLUSTER_POLL_MS);
    }
}

static int request_retry(natsConnection *nc, const struct cli_conn_opts *conn,
                         const char *what, const char *subject,
                         const char *body, int64_t deadline, json_t **out,
                         char *errmsg)
{
    return cli_cluster_request_retry(nc, conn->timeout_ms, what, subject, body,
                                     deadline, out, errmsg);
}

static char *peer_body(const char *peer, bool force)
{
    json_t *o = json_pack("{s:s}", "peer", peer);
    if (o != NULL && force) {
        json_object_set_new(o, "force", json_true());
    }
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* Add peer as a learner and wait until the meta leader promoted it,
 * printing its catch-up whenever it moves. */
static int add_peer(natsConnection *nc, const struct cli_conn_opts *conn,
                    const char *what, const char *peer, int64_t wait_ms,
                    bool json, char *errmsg)
{
    int64_t deadline = cli_mono_ms() + wait_ms;
    char *body = peer_body(peer, false);
    json_t *reply = NULL;
    int64_t last_lag = -1;
    int reply_n = 0;
    int rv = body == NULL ? KEEL_ENOMEM : 0;
    while (rv == 0) {
        json_decref(reply);
        reply = NULL;
        rv = request_retry(nc, conn, what,
                           reply_n++ == 0 ? "$KEEL.API.CLUSTER.PEER.ADD"
                                          : "$KEEL.API.CLUSTER.PEER.INFO",
                           body, deadline, &reply, errmsg);
        if (rv != 0) {
            break;
        }
        const char *role = cli_js_str(reply, "role", "learner");
        int64_t lag = cli_js_int(reply, "lag", 0);
        if (strcmp(role, "voter") == 0) {
            break;
        }
        if (!json && lag != last_lag) {
            printf("%s: learner, %lld of %lld entries (%lld behind)\n", peer,
                   (long long)cli_js_int(reply, "match", 0),
                   (long long)cli_js_int(reply, "commit", 0), (long long)lag);
            fflush(stdout);
            last_lag = lag;
        }
        if (cli_mono_ms() >= deadline) {
            rv = keel_err(KEEL_ETIMEOUT, errmsg,
                          "%s: %s is a learner %lld entries behind after "
                          "--wait; it is promoted once caught up (run "
                          "add-peer again to follow it)",
                          what, peer, (long long)lag);
            break;
        }
        cli_nap_ms(CLUSTER_POLL_MS);
    }
    if (rv == 0 && json) {
        cli_js_print_json(reply);
    } else if (rv == 0) {
        printf("%s is a voter of the meta group\n", peer);
    }
    json_decref(reply);
    free(body);
    return rv;
}

/* Remove peer from the meta group (or, with stream, move that stream's
 * replica off it), then, unless no_wait, wait until every stream that
 * had a replica there has moved it (cli_cluster_move.c): only then may
 * the node be stopped. */
static int remove_peer(natsConnection *nc, const struct cli_conn_opts *conn,
                       const char *what, const char *peer, const char *stream,
                       bool force, int64_t wait_ms, bool no_wait, bool json,
                       char *errmsg)
{
    char subject[CLI_SUBJECT_BYTES_MAX];
    char *body = peer_body(peer, force);
    json_t *reply = NULL;
    json_t *names = NULL;
    if (body == NULL) {
        return KEEL_ENOMEM;
    }
    int rv = 0;
    if (no_wait) {
        names = json_array();
    } else if (stream != NULL) {
        names = json_pack("[s]", stream);
    } else {
        rv = cli_cluster_streams_on(nc, conn->timeout_ms, peer,
                                    cli_mono_ms() + wait_ms, &names, errmsg);
    }
    if (rv != 0 || names == NULL) {
        json_decref(names);
        free(body);
        return rv != 0 ? rv : KEEL_ENOMEM;
    }
    if (force) {
        fprintf(stderr,
                "WARNING: --force skips the check that a majority of the "
                "remaining voters is healthy: the meta group may stop "
                "answering until enough of them are back\n");
    }
    snprintf(subject, sizeof subject, "%s%s",
             stream != NULL ? "$JS.API.STREAM.PEER.REMOVE."
                            : "$JS.API.SERVER.REMOVE",
             stream != NULL ? stream : "");
    rv = request_retry(nc, conn, what, subject, body, cli_mono_ms() + wait_ms,
                       &reply, errmsg);
    if (rv == 0 && json) {
        cli_js_print_json(reply);
    } else if (rv == 0 && stream != NULL) {
        printf("the replica of stream %s on %s moves to another node\n", stream,
               peer);
    } else if (rv == 0) {
        printf("%s removed from the meta group\n", peer);
    }
    if (rv == 0 && json_array_size(names) > 0) {
        if (!json) {
            printf("waiting until %zu stream%s moved %s replica off %s "
                   "(--no-wait skips this)\n",
                   json_array_size(names),
                   json_array_size(names) == 1 ? "" : "s",
                   json_array_size(names) == 1 ? "its" : "their", peer);
            fflush(stdout);
        }
        rv = cli_cluster_wait_moved(nc, conn->timeout_ms, peer, names, reply,
                                    wait_ms, json, errmsg);
    }
    json_decref(names);
    json_decref(reply);
    free(body);
    return rv;
}

static int cluster_add_peer(const struct cli_cmd *cmd, int argc, char **argv,
                            char *errmsg)
{
    struct cli_js_run r;
    int64_t wait_ms = CLUSTER_WAIT_MS_DEFAULT;
    struct cli_flag flags[] = {
        {"wait", 0, CLI_FLAG_DURATION, &wait_ms, "DURATION",
         "give up waiting for the promotion after this long (default 60s)"},
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the last API reply"},
        CLI_FLAG_END,
    };
    int rv = cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv == 0 && !r.help) {
        rv = add_peer(r.nc, &r.conn, cmd->name, r.args.items[0], wait_ms,
                      r.json, errmsg);
    }
    cli_js_end(&r);
    return rv;
}

/* remove-peer NAME and replace-peer OLD NEW share their flags; replace-peer
 * adds NEW first, so the group never has fewer voters than before, and
 * prints only the steps. The row's name says which. */
static int cluster_remove_replace(const struct cli_cmd *cmd, int argc,
                                  char **argv, char *errmsg)
{
    bool replace = strcmp(cmd->name, "cluster replace-peer") == 0;
    struct cli_js_run r;
    int64_t wait_ms = CLUSTER_WAIT_MS_DEFAULT;
    const char *stream = NULL;
    bool force = false, no_wait = false;
    struct cli_flag remove_flags[] = {
        {"force", 0, CLI_FLAG_BOOL, &force, NULL,
         "remove even if a majority of the remaining voters is not healthy"},
        {"stream", 0, CLI_FLAG_STR, &stream, "NAME",
         "move only this stream's replica off the node "
         "(STREAM.PEER.REMOVE)"},
        {"wait", 0, CLI_FLAG_DURATION, &wait_ms, "DURATION",
         "retry a busy cluster this long, then wait this long for the "
         "stream replicas to move off (default 60s)"},
        {"no-wait", 0, CLI_FLAG_BOOL, &no_wait, NULL,
         "return once the node is removed, before its replicas moved"},
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the API reply"},
        CLI_FLAG_END,
    };
    struct cli_flag replace_flags[] = {
        {"force", 0, CLI_FLAG_BOOL, &force, NULL,
         "remove OLD even if a majority of the remaining voters is not "
         "healthy"},
        {"wait", 0, CLI_FLAG_DURATION, &wait_ms, "DURATION",
         "limit of each step (default 60s)"},
        {"no-wait", 0, CLI_FLAG_BOOL, &no_wait, NULL,
         "return once OLD is removed, before its replicas moved"},
        CLI_FLAG_END,
    };
    int rv = cli_js_start(&r, cmd, replace ? replace_flags : remove_flags, argc,
                          argv, errmsg);
    if (rv == 0 && !r.help && replace) {
        rv = add_peer(r.nc, &r.conn, cmd->name, r.args.items[1], wait_ms, false,
                      errmsg);
    }
    if (rv == 0 && !r.help) {
        rv = remove_peer(r.nc, &r.conn, cmd->name, r.args.items[0], stream,
                         force, wait_ms, no_wait, r.json, errmsg);
    }
    cli_js_end(&r);
    return rv;
}

static int cluster_transfer_leader(const struct cli_cmd *cmd, int argc,
                                   char **argv, char *errmsg)
{
    struct cli_js_run r;
    const char *stream = NULL, *to = NULL;
    struct cli_flag flags[] = {
        {"stream", 0, CLI_FLAG_STR, &stream, "NAME",
         "the stream's group instead of the meta group"},
        {"to", 0, CLI_FLAG_STR, &to, "NODE",
         "the voter to hand leadership to (default: a healthy one at "
         "random)"},
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the API reply"},
        CLI_FLAG_END,
    };
    char subject[CLI_SUBJECT_BYTES_MAX];
    char *body = NULL;
    int rv = cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv != 0 || r.help) {
        goto out;
    }
    snprintf(subject, sizeof subject, "%s%s",
             stream != NULL ? "$JS.API.STREAM.LEADER.STEPDOWN."
                            : "$JS.API.META.LEADER.STEPDOWN",
             stream != NULL ? stream : "");
    if (to != NULL) {
        json_t *o = json_pack("{s:{s:s}}", "placement", "preferred", to);
        body = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        rv = body == NULL ? KEEL_ENOMEM : 0;
    }
    if (rv == 0) {
        rv = cli_js_request(r.nc, r.conn.timeout_ms, cmd->name, subject, body,
                            &r.reply, NULL, errmsg);
    }
    if (rv == 0 && r.json) {
        cli_js_print_json(r.reply);
    } else if (rv == 0) {
        printf("Leadership transfer of %s%s started\n",
               stream != NULL ? "stream " : "the meta group",
               stream != NULL ? stream : "");
    }
out:
    free(body);
    cli_js_end(&r);
    return rv;
}

/* Nodes one recover surveys: a cluster's most (SRV_CLUSTER_NODES_MAX). */
#define RECOVER_NODES_MAX 16

struct survey {
    const char *url;
    natsConnection *nc;
    json_t *o; /* the survey answer; NULL: unreachable or not hosting */
    uint64_t keep;
    /* The node's candidate: its live log, or (live log empty) its
     * quarantined log when that verifies from index 1 (decision 0031). */
    bool quarantine;
    int64_t last_index, last_term;
};

/* Every node of --server/NATS_URL (a comma list) surveyed on its own. */
static size_t survey_all(const struct cli_conn_opts *conn, char *list,
                         const char *body, struct survey *sv, char *errmsg)
{
    size_t n = 0;
    char *save = NULL;
    for (char *u = strtok_r(list, ",", &save);
         u != NULL && n < RECOVER_NODES_MAX; u = strtok_r(NULL, ",", &save)) {
        struct cli_conn_opts one = *conn;
        struct survey *s = &sv[n++];
        char err[KEEL_ERRMSG_MAX];
        memset(s, 0, sizeof *s);
        s->url = u;
        one.servers = u;
        if (cli_connect_default(&one, &s->nc, err) != 0 ||
            cli_js_request(s->nc, conn->timeout_ms, "survey",
                           "$KEEL.API.CLUSTER.RECOVER.SURVEY", body, &s->o,
                           NULL, err) != 0) {
            printf("%-24s %s\n", u, err);
            json_decref(s->o);
            s->o = NULL;
        }
    }
    (void)errmsg;
    return n;
}

/* The node's candidate (sv->quarantine, last_index, last_term): the live
 * log unless it is empty and the quarantined log verifies from index 1. */
static void candidate_of(struct survey *sv)
{
    const json_t *q = json_object_get(sv->o, "quarantine");
    sv->last_index = cli_js_int(sv->o, "last_index", 0);
    sv->last_term = cli_js_int(sv->o, "last_term", 0);
    sv->quarantine = false;
    if (sv->last_index == 0 && cli_js_int(sv->o, "snapshot", 0) == 0 &&
        json_is_true(json_object_get(q, "usable")) &&
        cli_js_int(q, "last_index", 0) > 0) {
        sv->quarantine = true;
        sv->last_index = cli_js_int(q, "last_index", 0);
        sv->last_term = cli_js_int(q, "last_term", 0);
    }
}

/* a holds more than b: greater (last term, last index); on a tie a live
 * log wins over a quarantined one. */
static bool better(const struct survey *a, const struct survey *b)
{
    if (a->last_term != b->last_term) {
        return a->last_term > b->last_term;
    }
    if (a->last_index != b->last_index) {
        return a->last_index > b->last_index;
    }
    return !a->quarantine && b->quarantine;
}

/* The source: the candidate holding the most (Raft log matching: the
 * greatest (last term, last index) holds every committed entry any other
 * candidate holds); the new term: past every term seen. keep per node:
 * its candidate up to the source's last index, below its first damaged
 * record. Returns the source or NULL. */
static const struct survey *recover_plan(struct survey *sv, size_t n,
                                         int64_t *term)
{
    const struct survey *src = NULL;
    *term = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *o = sv[i].o;
        if (o == NULL) {
            continue;
        }
        candidate_of(&sv[i]);
        if (src == NULL || better(&sv[i], src)) {
            src = &sv[i];
        }
        int64_t t = cli_js_int(o, "term", 0);
        *term = t > *term ? t : *term;
    }
    *term += 1;
    for (size_t i = 0; src != NULL && i < n; i++) {
        if (sv[i].o == NULL) {
            continue;
        }
        int64_t keep = sv[i].last_index;
        int64_t faulty =
            sv[i].quarantine ? 0 : cli_js_int(sv[i].o, "faulty", 0);
        keep = keep < src->last_index ? keep : src->last_index;
        if (faulty > 0 && faulty <= keep) {
            keep = faulty - 1;
        }
        sv[i].keep = (uint64_t)keep;
    }
    return src;
}

/* What was chosen and why, for the screen and each node's log. */
static void plan_text(const struct survey *sv, size_t n,
                      const struct survey *src, char *out, size_t cap)
{
    const json_t *q = json_object_get(src->o, "quarantine");
    int len = snprintf(
        out, cap,
        "source %s, its %s%s%s: entries 1..%lld (last term %lld) kept, "
        "%lld entries holding every committed entry any candidate holds; "
        "chosen because it holds the most: the greatest (last term, last "
        "index) of the candidates (Raft log matching), a live log winning "
        "a tie; others:",
        cli_js_str(src->o, "node", "?"),
        src->quarantine ? "quarantined log in " : "live log",
        src->quarantine ? cli_js_str(q, "dir", "?") : "",
        src->quarantine ? " (the live log is empty)" : "",
        (long long)src->last_index, (long long)src->last_term,
        (long long)src->last_index);
    for (size_t i = 0; i < n && len > 0 && (size_t)len < cap; i++) {
        if (sv[i].o == NULL || &sv[i] == src) {
            continue;
        }
        len += snprintf(
            out + len, cap - (size_t)len, " %s %s 1..%lld (term %lld);",
            cli_js_str(sv[i].o, "node", "?"),
            sv[i].quarantine ? "quarantine" : "live",
            (long long)sv[i].last_index, (long long)sv[i].last_term);
    }
}

static int cluster_recover(const struct cli_cmd *cmd, int argc, char **argv,
                           char *errmsg)
{
    struct cli_js_run run;
    struct survey sv[RECOVER_NODES_MAX];
    const char *stream = NULL;
    bool accept = false;
    size_t n = 0;
    int64_t term = 0;
    char plan[2048]; /* header and ~50 bytes per other node */
    struct cli_flag flags[] = {
        {"accept-loss", 0, CLI_FLAG_BOOL, &accept, NULL,
         "apply the plan (without it: survey and print the plan only)"},
        {"stream", 0, CLI_FLAG_STR, &stream, "NAME",
         "the stream's group instead of the meta group"},
        CLI_FLAG_END,
    };
    /* No connection here: survey_all connects to each node on its own. */
    int rv = cli_js_parse(&run, cmd, flags, argc, argv, errmsg);
    if (rv != 0 || run.help) {
        return rv;
    }
    const char *servers =
        run.conn.servers != NULL ? run.conn.servers : getenv("NATS_URL");
    char *list = servers != NULL ? strdup(servers) : NULL;
    json_t *b =
        stream != NULL ? json_pack("{s:s}", "stream", stream) : json_object();
    char *body = b != NULL ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (list == NULL || body == NULL) {
        rv = keel_err(KEEL_EUSAGE, errmsg,
                      "give every node's URL: -s URL,URL,... (or NATS_URL)");
        goto out;
    }
    size_t urls = 1;
    for (const char *c = list; *c != '\0'; c++) {
        urls += *c == ',';
    }
    if (urls > RECOVER_NODES_MAX) {
        /* A node left out of the survey could hold the longest log. */
        rv = keel_err(KEEL_EUSAGE, errmsg,
                      "%zu URLs: recover surveys at most %d nodes, a "
                      "cluster's most",
                      urls, RECOVER_NODES_MAX);
        goto out;
    }
    n = survey_all(&run.conn, list, body, sv, errmsg);
    const struct survey *src = recover_plan(sv, n, &term);
    for (size_t i = 0; i < n; i++) {
        const json_t *o = sv[i].o;
        if (o == NULL) {
            continue;
        }
        printf("%-8s last %lld (term %lld)  term %lld  commit %lld%s%s%s\n",
               cli_js_str(o, "node", "?"),
               (long long)cli_js_int(o, "last_index", 0),
               (long long)cli_js_int(o, "last_term", 0),
               (long long)cli_js_int(o, "term", 0),
               (long long)cli_js_int(o, "commit", 0),
               json_is_true(json_object_get(o, "amnesiac")) ? "  amnesiac" : "",
               cli_js_int(o, "faulty", 0) > 0 ? "  damaged" : "",
               json_is_true(json_object_get(o, "leader")) ? "  LEADER" : "");
        const json_t *q = json_object_get(o, "quarantine");
        if (q != NULL) {
            printf("         quarantine %s: %lld file(s), %s 1..%lld "
                   "(term %lld)%s%s\n",
                   cli_js_str(q, "dir", "?"),
                   (long long)cli_js_int(q, "files", 0),
                   json_is_true(json_object_get(q, "usable")) ? "verified"
                                                              : "not usable:",
                   (long long)cli_js_int(q, "last_index", 0),
                   (long long)cli_js_int(q, "last_term", 0),
                   json_is_true(json_object_get(q, "usable")) ? "; " : " ",
                   cli_js_str(q, "why", ""));
        }
        if (json_is_true(json_object_get(o, "leader"))) {
            rv = keel_err(KEEL_EINVAL, errmsg,
                          "%s leads the group: it needs no recover",
                          cli_js_str(o, "node", "?"));
        }
    }
    if (rv == 0 && src == NULL) {
        rv = keel_err(KEEL_ENOENT, errmsg,
                      "no node answered for the group: check -s");
    }
    if (rv != 0) {
        goto out;
    }
    plan_text(sv, n, src, plan, sizeof plan);
    printf("source %s: log through index %lld (term %lld); new term %lld.\n"
           "%s\n"
           "ACKNOWLEDGED ENTRIES AFTER INDEX %lld MAY BE LOST (no surveyed "
           "node holds them); each node's records after its keep index are "
           "copied to its quarantine/ and cut.\n",
           cli_js_str(src->o, "node", "?"), (long long)src->last_index,
           (long long)src->last_term, (long long)term, plan,
           (long long)src->last_index);
    for (size_t i = 0; i < n; i++) {
        if (sv[i].o != NULL) {
            printf("  %-8s keeps its %s through %llu\n",
                   cli_js_str(sv[i].o, "node", "?"),
                   sv[i].quarantine && sv[i].keep > 0
                       ? "quarantined log (restored by the install path)"
                       : "log",
                   (unsigned long long)sv[i].keep);
        }
    }
    if (!accept) {
        rv = keel_err(KEEL_EINVAL, errmsg,
                      "nothing changed: rerun with --accept-loss to apply "
                      "the plan");
        goto out;
    }
    for (size_t i = 0; i < n && rv == 0; i++) {
        json_t *reply = NULL;
        if (sv[i].o == NULL) {
            continue;
        }
        json_t *r = json_pack(
            "{s:I, s:I, s:b, s:b, s:b, s:s}", "term", (json_int_t)term, "keep",
            (json_int_t)sv[i].keep, "accept_loss", 1, "source", &sv[i] == src,
            "quarantine", sv[i].quarantine && sv[i].keep > 0, "plan", plan);
        if (r != NULL && stream != NULL) {
            json_object_set_new(r, "stream", json_string(stream));
        }
        char *rb = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        rv = rb == NULL ? KEEL_ENOMEM
                        : cli_js_request(sv[i].nc, run.conn.timeout_ms,
                                         cmd->name, "$KEEL.API.CLUSTER.RECOVER",
                                         rb, &reply, NULL, errmsg);
        free(rb);
        if (rv == 0) {
            printf("  %-8s recovered from its %s log through %lld: %lld "
                   "records quarantined%s%s\n",
                   cli_js_str(reply, "node", "?"),
                   cli_js_str(reply, "candidate", "live"),
                   (long long)cli_js_int(reply, "kept", 0),
                   (long long)cli_js_int(reply, "quarantined", 0),
                   cli_js_str(reply, "file", "")[0] != '\0' ? " to " : "",
                   cli_js_str(reply, "file", ""));
        }
        json_decref(reply);
    }
out:
    for (size_t i = 0; i < n; i++) {
        json_decref(sv[i].o);
        natsConnection_Destroy(sv[i].nc);
    }
    free(list);
    free(body);
    return rv;
}

/* keel cluster lameduck: the node -s names (the one this connection
 * reaches) enters lame duck mode and answers first. */
static void print_lameduck(const json_t *reply, const struct cli_js_run *r)
{
    (void)r;
    printf("%s %s lame duck mode: it refuses new clients, hands its %d "
           "leadership(s) over, then stops\n",
           cli_js_str(reply, "server", "?"),
           json_is_true(json_object_get(reply, "already")) ? "is in"
                                                           : "entered",
           (int)cli_js_int(reply, "leaderships", 0));
}

static int cluster_lameduck(const struct cli_cmd *cmd, int argc, char **argv,
                            char *errmsg)
{
    struct cli_js_run r;
    struct cli_flag flags[] = {
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the API reply"},
        CLI_FLAG_END,
    };
    int rv = cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv == 0 && !r.help) {
        rv = cli_js_show(&r, cmd->name, "$KEEL.API.SERVER.LAMEDUCK", NULL,
                         print_lameduck, errmsg);
    }
    cli_js_end(&r);
    return rv;
}

CLI_SUBCMD_GROUP(cli_cluster, "cluster", CLUSTER_VERBS)
