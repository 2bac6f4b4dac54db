/* keel cluster remove-peer / replace-peer: after the meta group removed a
 * node, wait until every stream that had a replica on it has its replica
 * count back on other nodes, the new replica promoted (a learner is
 * promoted only once caught up) and the group no longer reconfiguring
 * (cli_cluster.h). Stopping the removed node before that can leave a
 * stream without a majority (docs/operations.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_cluster.h"
#include "cli_js.h"

#define MOVE_POLL_MS 500
#define MOVE_NAMES_PAGES_MAX 64

/* Does STREAM.INFO's cluster block name peer (leader or replica)? */
static bool names_peer(const json_t *cl, const char *peer)
{
    size_t i;
    const json_t *r;
    if (strcmp(cli_js_str(cl, "leader", ""), peer) == 0) {
        return true;
    }
    json_array_foreach(json_object_get(cl, "replicas"), i, r)
    {
        if (strcmp(cli_js_str(r, "name", ""), peer) == 0) {
            return true;
        }
    }
    return false;
}

int cli_cluster_streams_on(natsConnection *nc, int64_t timeout_ms,
                           const char *peer, int64_t deadline, json_t **names,
                           char *errmsg)
{
    json_t *all = json_array();
    int rv = all == NULL ? KEEL_ENOMEM : 0;
    *names = json_array();
    for (int page = 0; rv == 0 && page < MOVE_NAMES_PAGES_MAX; page++) {
        char body[64];
        json_t *reply = NULL;
        snprintf(body, sizeof body, "{\"offset\":%zu}", json_array_size(all));
        rv = cli_cluster_request_retry(nc, timeout_ms, "stream names",
                                       "STREAM.NAMES", body, deadline, &reply,
                                       errmsg);
        json_t *got = json_object_get(reply, "streams");
        size_t n = json_array_size(got);
        json_array_extend(all, got);
        bool done = n == 0 || (int64_t)json_array_size(all) >=
                                  cli_js_int(reply, "total", 0);
        json_decref(reply);
        if (done) {
            break;
        }
    }
    size_t i;
    const json_t *v;
    json_array_foreach(all, i, v)
    {
        char subject[CLI_SUBJECT_BYTES_MAX];
        json_t *info = NULL;
        if (rv != 0) {
            break;
        }
        snprintf(subject, sizeof subject, "STREAM.INFO.%s",
                 json_string_value(v));
        rv = cli_cluster_request_retry(nc, timeout_ms, "stream info", subject,
                                       NULL, deadline, &info, errmsg);
        if (rv == KEEL_ENOENT) {
            rv = 0; /* deleted meanwhile */
        } else if (rv == 0 &&
                   names_peer(json_object_get(info, "cluster"), peer)) {
            json_array_append(*names, (json_t *)v);
        }
        json_decref(info);
    }
    json_decref(all);
    return rv;
}

/* The removal reply says no node can take this stream's replica now. */
static const char *stuck(const json_t *reply, const char *stream)
{
    size_t i;
    const json_t *s;
    json_array_foreach(json_object_get(reply, "streams"), i, s)
    {
        if (strcmp(cli_js_str(s, "name", ""), stream) == 0 &&
            json_is_false(json_object_get(s, "moves"))) {
            return cli_js_str(s, "why", "no node can take it");
        }
    }
    return NULL;
}

/* One line of where the stream's replicas are ("n1 n2 n4 (lag 120)"). */
static void progress(const json_t *cl, char *out, size_t len)
{
    size_t used = 0;
    size_t i;
    const json_t *r;
    int w = snprintf(out, len, "leader %s, replicas",
                     cli_js_str(cl, "leader", "none"));
    used = w > 0 && (size_t)w < len ? (size_t)w : len - 1;
    json_array_foreach(json_object_get(cl, "replicas"), i, r)
    {
        int64_t lag = cli_js_int(r, "lag", 0);
        w = snprintf(out + used, len - used, " %s%s",
                     cli_js_str(r, "name", "?"), lag > 0 ? "(behind)" : "");
        used += w > 0 && (size_t)w < len - used ? (size_t)w : 0;
    }
    if (json_is_true(json_object_get(cl, "reconfiguring"))) {
        snprintf(out + used, len - used, ", reconfiguring");
    }
}

/* Has the stream its replicas again, none on peer, not reconfiguring?
 * *line gets the progress line. */
static bool moved(natsConnection *nc, int64_t timeout_ms, const char *stream,
                  const char *peer, char *line, size_t len)
{
    char subject[CLI_SUBJECT_BYTES_MAX];
    char err[KEEL_ERRMSG_MAX];
    json_t *info = NULL;
    snprintf(subject, sizeof subject, "STREAM.INFO.%s", stream);
    if (cli_js_request(nc, timeout_ms, "stream info", subject, NULL, &info,
                       NULL, err) != 0) {
        snprintf(line, len, "%s", err);
        return false;
    }
    const json_t *cl = json_object_get(info, "cluster");
    int64_t want =
        cli_js_int(json_object_get(info, "config"), "num_replicas", 1);
    int64_t have = (json_object_get(cl, "leader") != NULL ? 1 : 0) +
                   (int64_t)json_array_size(json_object_get(cl, "replicas"));
    progress(cl, line, len);
    bool ok = have == want && !names_peer(cl, peer) &&
              json_object_get(cl, "reconfiguring") == NULL;
    json_decref(info);
    return ok;
}

int cli_cluster_wait_moved(natsConnection *nc, int64_t timeout_ms,
                           const char *peer, const json_t *streams,
                           const json_t *reply, int64_t wait_ms, bool quiet,
                           char *errmsg)
{
    int64_t deadline = cli_mono_ms() + wait_ms;
    bool tty = !quiet && isatty(STDOUT_FILENO) == 1;
    size_t n = json_array_size(streams);
    bool *done = calloc(n + 1, sizeof *done);
    char(*last)[256] = calloc(n + 1, sizeof *last);
    size_t left = n;
    int rv = done == NULL || last == NULL ? KEEL_ENOMEM : 0;
    for (size_t i = 0; rv == 0 && i < n; i++) {
        const char *name = json_string_value(json_array_get(streams, i));
        const char *why = stuck(reply, name);
        if (why != NULL) {
            fprintf(stderr,
                    "WARNING: stream %s keeps its replica on %s for now: "
                    "%s\n",
                    name, peer, why);
            done[i] = true;
            left--;
        }
    }
    while (rv == 0 && left > 0) {
        for (size_t i = 0; i < n; i++) {
            char line[256];
            const char *name = json_string_value(json_array_get(streams, i));
            if (done[i]) {
                continue;
            }
            done[i] = moved(nc, timeout_ms, name, peer, line, sizeof line);
            left -= done[i] ? 1 : 0;
            if ((done[i] && !quiet) || (tty && strcmp(line, last[i]) != 0)) {
                printf("stream %s: %s%s\n", name, line,
                       done[i] ? " (moved off)" : "");
                fflush(stdout);
            }
            snprintf(last[i], sizeof last[i], "%s", line);
        }
        if (left > 0 && cli_mono_ms() >= deadline) {
            for (size_t i = 0; i < n && rv == 0; i++) {
                if (!done[i]) {
                    rv = keel_err(
                        KEEL_ETIMEOUT, errmsg,
                        "%s left the meta group, but stream %s has not "
                        "moved its replica off it within --wait: do not stop "
                        "or wipe %s (if it is down, start it on its disk and "
                        "run keel cluster add-peer %s: out of the meta group "
                        "its replica cannot vote); replicas now: %s",
                        peer, json_string_value(json_array_get(streams, i)),
                        peer, peer, last[i]);
                }
            }
        }
        if (rv == 0 && left > 0) {
            cli_nap_ms(MOVE_POLL_MS);
        }
    }
    free(done);
    free(last);
    return rv;
}
