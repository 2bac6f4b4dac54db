/* keel cluster status: every node's own view ($KEEL.API.CLUSTER.STATUS,
 * srv_js_status.c) merged into two tables — one row per node (up, meta
 * role, health, orphans) and one per stream replica (role, term, applied,
 * how far behind the leader, state). Exit 1 when a node did not answer or
 * is not healthy, so scripts and tests can wait on it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cluster.h"
#include "cli_js.h"

#define STATUS_SUBJECT "$KEEL.API.CLUSTER.STATUS"

static const char *server_name(const json_t *r)
{
    return cli_js_str(json_object_get(r, "server"), "name", "?");
}

/* The reply of node name, or NULL. */
static const json_t *reply_of(const json_t *replies, const char *name)
{
    size_t i;
    const json_t *r;
    json_array_foreach(replies, i, r)
    {
        if (strcmp(server_name(r), name) == 0) {
            return r;
        }
    }
    return NULL;
}

static void add_name(json_t *names, const char *n)
{
    if (n != NULL && n[0] != '\0' && !cli_cluster_has(names, n)) {
        json_array_append_new(names, json_string(n));
    }
}

/* Every node named anywhere: members, answering servers, missing ones. */
static json_t *all_nodes(const json_t *replies, const json_t *missing)
{
    json_t *names = json_array();
    size_t i, k;
    const json_t *r, *m;
    json_array_foreach(replies, i, r)
    {
        json_array_foreach(json_object_get(r, "members"), k, m)
        {
            add_name(names, cli_js_str(m, "name", NULL));
        }
        add_name(names, server_name(r));
    }
    json_array_foreach(missing, i, m)
    {
        add_name(names, json_string_value(m));
    }
    return names;
}

/* Does any answering node have a link to name? */
static bool seen_up(const json_t *replies, const char *name)
{
    size_t i, k;
    const json_t *r, *m;
    json_array_foreach(replies, i, r)
    {
        json_array_foreach(json_object_get(r, "members"), k, m)
        {
            if (strcmp(cli_js_str(m, "name", ""), name) == 0 &&
                json_is_true(json_object_get(m, "up"))) {
                return true;
            }
        }
    }
    return false;
}

/* Append "; what" to the problem list (bounded by its size). */
static void problem(char *buf, size_t len, const char *what)
{
    size_t used = strlen(buf);
    size_t n = strlen(what);
    if (used > 0 && used + 2 < len) {
        memcpy(buf + used, "; ", 2);
        used += 2;
    }
    if (used + 1 < len) {
        n = n < len - used - 1 ? n : len - used - 1; /* cut, not overrun */
        memcpy(buf + used, what, n);
        buf[used + n] = '\0';
    }
}

/* A node's server_tags, comma-separated ("-" when it has none). */
static void node_tags(const json_t *a, char *out, size_t cap)
{
    size_t i, used = 0;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        int w = snprintf(out + used, cap - used, "%s%s", used > 0 ? "," : "",
                         json_string_value(v) ? json_string_value(v) : "?");
        used += w > 0 && (size_t)w < cap - used ? (size_t)w : 0;
    }
    if (used == 0) {
        snprintf(out, cap, "-");
    }
}

static void print_nodes(const json_t *replies, const json_t *names, FILE *out,
                        bool color, char *probs, size_t plen)
{
    static const char *const heads[] = {"Node",     "Up",      "Meta", "Health",
                                        ">Orphans", ">Uptime", "Tags"};
    struct cli_table t;
    size_t i;
    const json_t *n;
    if (cli_table_init(&t, 7, heads) != 0) {
        return;
    }
    json_array_foreach(names, i, n)
    {
        const char *name = json_string_value(n);
        const json_t *r = reply_of(replies, name);
        char orph[32] = "-", up[32] = "-", what[3 * KEEL_ERRMSG_MAX];
        char tags[256] = "-";
        const char *health = "-";
        const char *role = "-";
        if (r != NULL) {
            cli_js_count(r, "orphans_count", orph, sizeof orph);
            cli_fmt_duration_ns(
                cli_js_int(json_object_get(r, "server"), "uptime_ms", 0) *
                    1000000,
                up, sizeof up);
            role = cli_js_str(json_object_get(r, "meta"), "role", "-");
            node_tags(json_object_get(json_object_get(r, "server"), "tags"),
                      tags, sizeof tags);
            bool ok = strcmp(cli_js_str(r, "status", ""), "ok") == 0;
            /* Joining through its seed: not a problem, it is added. */
            bool joining = strcmp(cli_js_str(r, "status", ""), "joining") == 0;
            health = ok        ? "ok"
                     : joining ? "joining"
                               : cli_js_str(r, "error", "unavailable");
            if (!ok && !joining) {
                snprintf(what, sizeof what, "%s: %s", name, health);
                problem(probs, plen, what);
            }
        } else {
            bool silent = seen_up(replies, name);
            snprintf(what, sizeof what, "%s %s", name,
                     silent ? "did not answer" : "is down");
            problem(probs, plen, what);
        }
        const char *cells[] = {
            name,
            r != NULL ? "yes" : seen_up(replies, name) ? "no answer" : "DOWN",
            role,
            health,
            orph,
            up,
            tags};
        (void)cli_table_add(&t, cells);
    }
    cli_table_print(&t, out, color);
    cli_table_free(&t);
}

/* The group of stream in reply r, or NULL. */
static const json_t *group_of(const json_t *r, const char *stream)
{
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(r, "groups"), i, g)
    {
        if (strcmp(cli_js_str(g, "stream", ""), stream) == 0) {
            return g;
        }
    }
    return NULL;
}

/* Streams and, per stream, its replica names (from every answer). */
static json_t *streams_of(const json_t *replies)
{
    json_t *streams = json_object();
    size_t i, k, j;
    const json_t *r, *g, *p;
    json_array_foreach(replies, i, r)
    {
        json_array_foreach(json_object_get(r, "groups"), k, g)
        {
            const char *s = cli_js_str(g, "stream", "?");
            json_t *names = json_object_get(streams, s);
            if (names == NULL) {
                names = json_array();
                json_object_set_new(streams, s, names);
            }
            json_array_foreach(json_object_get(g, "peers"), j, p)
            {
                add_name(names, cli_js_str(p, "name", NULL));
            }
            add_name(names, server_name(r));
        }
    }
    return streams;
}

/* The leader's view of peer node in stream: its "peers" entry, or NULL. */
static const json_t *leader_view(const json_t *replies, const char *stream,
                                 const char *node)
{
    size_t i, k;
    const json_t *r, *p;
    json_array_foreach(replies, i, r)
    {
        const json_t *g = group_of(r, stream);
        if (g == NULL || strcmp(cli_js_str(g, "role", ""), "leader") != 0) {
            continue;
        }
        json_array_foreach(json_object_get(g, "peers"), k, p)
        {
            if (strcmp(cli_js_str(p, "name", ""), node) == 0) {
                return p;
            }
        }
    }
    return NULL;
}

static void replica_row(struct cli_table *t, const json_t *replies,
                        const char *stream, const char *node, char *probs,
                        size_t plen)
{
    const json_t *r = reply_of(replies, node);
    const json_t *g = r != NULL ? group_of(r, stream) : NULL;
    const json_t *lv = leader_view(replies, stream, node);
    char term[32] = "-", applied[32] = "-", behind[32] = "-";
    char what[3 * KEEL_ERRMSG_MAX];
    char state[KEEL_ERRMSG_MAX];
    char reps[16];
    int64_t nrep = 0;
    size_t i;
    const json_t *any;
    json_array_foreach(replies, i, any)
    {
        const json_t *ag = group_of(any, stream);
        nrep = ag != NULL ? cli_js_int(ag, "replicas", 0) : nrep;
    }
    snprintf(reps, sizeof reps, "%" PRId64, nrep);
    if (g != NULL) {
        cli_js_count(g, "term", term, sizeof term);
        cli_js_count(g, "applied", applied, sizeof applied);
        snprintf(state, sizeof state, "%s", cli_js_str(g, "state", "?"));
        if (strcmp(state, "ok") != 0) {
            snprintf(what, sizeof what, "%s on %s: %s", stream, node, state);
            problem(probs, plen, what);
        }
    } else {
        snprintf(state, sizeof state, "%s",
                 r != NULL ? "no group on this node" : "no answer");
    }
    if (lv != NULL && json_object_get(lv, "lag") != NULL) {
        cli_js_count(lv, "lag", behind, sizeof behind);
        if (json_is_true(json_object_get(lv, "offline"))) {
            snprintf(state, sizeof state, "offline (leader has no link)");
        } else if (!json_is_true(json_object_get(lv, "current")) &&
                   strcmp(state, "ok") == 0) {
            snprintf(state, sizeof state, "catching up");
        }
    }
    const char *cells[] = {
        stream, reps,    node,   g != NULL ? cli_js_str(g, "role", "-") : "-",
        term,   applied, behind, state};
    (void)cli_table_add(t, cells);
}

static void print_groups(const json_t *replies, FILE *out, bool color,
                         char *probs, size_t plen)
{
    static const char *const heads[] = {"Stream",  ">Replicas", "Node",
                                        "Role",    ">Term",     ">Applied",
                                        ">Behind", "State"};
    struct cli_table t;
    json_t *streams = streams_of(replies);
    const char *stream;
    json_t *names;
    if (json_object_size(streams) == 0) {
        fprintf(out, "\nNo stream groups.\n");
        json_decref(streams);
        return;
    }
    if (cli_table_init(&t, 8, heads) != 0) {
        json_decref(streams);
        return;
    }
    json_object_foreach(streams, stream, names)
    {
        size_t i;
        const json_t *n;
        json_array_foreach(names, i, n)
        {
            replica_row(&t, replies, stream, json_string_value(n), probs, plen);
        }
    }
    fprintf(out, "\n");
    cli_table_print(&t, out, color);
    cli_table_free(&t);
    json_decref(streams);
}

int cli_cluster_status_print(const json_t *replies, const json_t *missing,
                             FILE *out, bool color, char *errmsg)
{
    char probs[KEEL_ERRMSG_MAX] = "";
    json_t *names = all_nodes(replies, missing);
    const json_t *first = json_array_get(replies, 0);
    const json_t *meta = json_object_get(first, "meta");
    const char *leader = cli_js_str(meta, "leader", "");
    fprintf(out, "Cluster %s: %zu of %zu nodes answered, meta leader %s",
            cli_js_str(json_object_get(first, "server"), "cluster", "-"),
            json_array_size(replies), json_array_size(names),
            leader[0] != '\0' ? leader : "(none)");
    if (leader[0] != '\0') {
        fprintf(out, " (term %" PRId64 ")", cli_js_int(meta, "term", 0));
    }
    fprintf(out, "\n\n");
    print_nodes(replies, names, out, color, probs, sizeof probs);
    size_t i, k;
    const json_t *r, *w;
    bool head = false;
    json_array_foreach(replies, i, r)
    {
        json_array_foreach(json_object_get(r, "warnings"), k, w)
        {
            fprintf(out, "%s  %s: %s\n", head ? "" : "\nWarnings:\n",
                    server_name(r), json_string_value(w));
            head = true;
        }
    }
    print_groups(replies, out, color, probs, sizeof probs);
    json_decref(names);
    if (probs[0] != '\0') {
        return keel_err(KEEL_EIO, errmsg, "not healthy: %s", probs);
    }
    return 0;
}

int cli_cluster_status(const struct cli_cmd *cmd, int argc, char **argv,
                       char *errmsg)
{
    struct cli_js_run r;
    json_t *replies = NULL, *missing = NULL;
    struct cli_flag flags[] = {
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL,
         "print every node's answer ({\"nodes\": [...], \"missing\": [...]})"},
        CLI_FLAG_END,
    };
    int rv = cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv != 0 || r.help) {
        return rv;
    }
    rv = cli_cluster_gather(r.nc, STATUS_SUBJECT, r.conn.timeout_ms, &replies,
                            &missing, errmsg);
    if (rv == 0 && r.json) {
        cli_cluster_print_json(replies, missing);
        /* Same exit status as the tables. */
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull != NULL) {
            rv = cli_cluster_status_print(replies, missing, devnull, false,
                                          errmsg);
            fclose(devnull);
        }
    } else if (rv == 0) {
        rv = cli_cluster_status_print(replies, missing, stdout,
                                      cli_color(stdout), errmsg);
    }
    json_decref(replies);
    json_decref(missing);
    cli_js_end(&r);
    return rv;
}
