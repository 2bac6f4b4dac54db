/* Cluster links: listen, dial seeds and gossiped nodes with exponential
 * backoff and jitter, handshake (HELLO), one ping per link per
 * SRV_CLUSTER_PING_MS whatever the number of groups, dead-link detection,
 * bounded outbound queues, gossip of known nodes, and the group registry.
 */
#include "srv_cluster.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/bytes.h"
#include "keel/error.h"
#include "srv_cluster_tls.h"
#include "srv_log.h"
#include "srv_turn.h"
#include "srv_server.h"

static void link_close_cb(uv_handle_t *h);
static void link_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void link_flush(struct srv_cluster_link *l);

int srv_cluster_parse_url(const char *url, char *host, size_t host_len,
                          int *port)
{
    const char *p = strstr(url, "://");
    const char *at, *colon;
    char *end;

    p = p != NULL ? p + 3 : url;
    at = strchr(p, '@');
    if (at != NULL) {
        p = at + 1; /* route credentials: srv_cluster_tls.c */
    }
    colon = strrchr(p, ':');
    if (colon == NULL || colon == p || (size_t)(colon - p) >= host_len) {
        return KEEL_EINVAL;
    }
    long v = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || (*end != '\0' && *end != '/') || v < 0 ||
        v > 65535) {
        return KEEL_EINVAL;
    }
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = '\0';
    *port = (int)v;
    return 0;
}

uint64_t srv_cluster_rand(struct srv_cluster *cl)
{
    uint64_t x = cl->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    cl->rng = x;
    return x;
}

uint8_t *srv_cluster_scratch(struct srv_cluster *cl, size_t n)
{
    if (n > cl->scratch_cap) {
        size_t cap = n < 64 * 1024 ? 64 * 1024 : n;
        uint8_t *b = realloc(cl->scratch, cap);
        if (b == NULL) {
            return NULL;
        }
        cl->scratch = b;
        cl->scratch_cap = cap;
    }
    return cl->scratch;
}

static struct srv_cluster_node *node_find(struct srv_cluster *cl,
                                          const char *url)
{
    for (size_t i = 0; i < SRV_CLUSTER_NODES_MAX; i++) {
        if (cl->nodes[i].used && strcmp(cl->nodes[i].url, url) == 0) {
            return &cl->nodes[i];
        }
    }
    return NULL;
}

/* Remember a cluster URL to dial (a seed or gossip). Normalised to
 * host:port. Returns the node or NULL (bad URL, table full). */
static struct srv_cluster_node *node_add(struct srv_cluster *cl,
                                         const char *url)
{
    char host[SRV_CLUSTER_URL_BYTES - 16];
    char norm[SRV_CLUSTER_URL_BYTES];
    int port = 0;

    if (srv_cluster_parse_url(url, host, sizeof host, &port) != 0 ||
        port == 0) {
        SRV_WARN("cluster", "ignoring route '%s': use nats://host:port", url);
        return NULL;
    }
    snprintf(norm, sizeof norm, "%s:%d", host, port);
    struct srv_cluster_node *n = node_find(cl, norm);
    if (n != NULL) {
        return n;
    }
    for (size_t i = 0; i < SRV_CLUSTER_NODES_MAX; i++) {
        n = &cl->nodes[i];
        if (!n->used) {
            memset(n, 0, sizeof *n);
            n->used = true;
            snprintf(n->url, sizeof n->url, "%s", norm);
            /* Our own advertised URL in --routes: skip it up front. */
            n->self = strcmp(norm, cl->url) == 0;
            n->backoff_ms = SRV_CLUSTER_BACKOFF_MS_MIN;
            return n;
        }
    }
    SRV_WARN("cluster", "more than %d known nodes: ignoring %s",
             SRV_CLUSTER_NODES_MAX, norm);
    return NULL;
}

struct srv_cluster_link *srv_cluster_peer_link(const struct srv_cluster *cl,
                                               const char *name)
{
    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        struct srv_cluster_link *l = cl->links[i];
        if (l != NULL && l->established && !l->closing &&
            strcmp(l->peer_name, name) == 0) {
            return l;
        }
    }
    return NULL;
}

static struct srv_cluster_link *link_new(struct srv_cluster *cl, bool outbound)
{
    int slot = -1;

    for (int i = 0; i < SRV_CLUSTER_LINKS_MAX && slot < 0; i++) {
        if (cl->links[i] == NULL) {
            slot = i;
        }
    }
    if (slot < 0) {
        return NULL;
    }
    struct srv_cluster_link *l = calloc(1, sizeof *l);
    if (l == NULL) {
        return NULL;
    }
    uv_tcp_init(cl->loop, &l->tcp);
    l->tcp.data = l;
    l->cl = cl;
    l->slot = slot;
    l->outbound = outbound;
    l->opened_ms = uv_now(cl->loop);
    l->last_rx_ms = l->opened_ms;
    srv_outq_init(&l->out);
    srv_hmap_init(&l->rsubs);
    cl->links[slot] = l;
    cl->handles_open++;
    return l;
}

static void schedule_redial(struct srv_cluster *cl, struct srv_cluster_node *n)
{
    uint64_t now = uv_now(cl->loop);
    /* Jitter of +-25% keeps restarted nodes from dialing in lockstep. */
    uint64_t j =
        n->backoff_ms / 2 > 0 ? srv_cluster_rand(cl) % (n->backoff_ms / 2) : 0;
    n->next_dial_ms = now + n->backoff_ms * 3 / 4 + j;
    n->backoff_ms = n->backoff_ms * 2 > SRV_CLUSTER_BACKOFF_MS_MAX
                        ? SRV_CLUSTER_BACKOFF_MS_MAX
                        : n->backoff_ms * 2;
}

static void update_connect_urls(struct srv_cluster *cl)
{
    const char *urls[SRV_CLUSTER_LINKS_MAX + 1];
    size_t n = 0;

    cl->snapshot_dirty = true;
    if (cl->srv == NULL || cl->stopping) {
        return;
    }
    urls[n++] = cl->client_url;
    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        struct srv_cluster_link *l = cl->links[i];
        if (l != NULL && l->established && !l->closing &&
            l->peer_client_url[0] != '\0') {
            urls[n++] = l->peer_client_url;
        }
    }
    srv_server_set_connect_urls(cl->srv, urls, n);
}

void srv_cluster_link_fail(struct srv_cluster_link *l, const char *why)
{
    struct srv_cluster *cl = l->cl;
    bool was_up = l->established;

    if (l->closing) {
        return;
    }
    l->closing = true;
    l->established = false;
    if (was_up) {
        SRV_INFO("cluster", "link to %s (%s) down: %s", l->peer_name,
                 l->peer_url, why);
        srv_cluster_interest_drop(cl, l);
    } else if (why != NULL) {
        SRV_DEBUG("cluster", "link %s closed before the handshake: %s",
                  l->node != NULL ? l->node->url : "(inbound)", why);
    }
    if (l->node != NULL) {
        if (l->node->dialing == l) {
            l->node->dialing = NULL;
        }
        schedule_redial(cl, l->node);
    }
    uv_close((uv_handle_t *)&l->tcp, link_close_cb);
    if (was_up) {
        update_connect_urls(cl);
        if (cl->peer_cb != NULL && !l->replaced &&
            srv_cluster_peer_link(cl, l->peer_name) == NULL) {
            cl->peer_cb(cl->peer_arg, l->peer_name, false);
        }
    }
}

static void link_close_cb(uv_handle_t *h)
{
    struct srv_cluster_link *l = h->data;
    struct srv_cluster *cl = l->cl;

    ASSERT(cl->links[l->slot] == l);
    cl->links[l->slot] = NULL;
    srv_outq_close(&l->out, &cl->pool);
    free(l->batch);
    srv_hmap_close(&l->rsubs);
    srv_cluster_sec_link_free(l);
    free(l->rbuf);
    free(l);
    ASSERT(cl->handles_open > 0);
    cl->handles_open--;
}

int srv_cluster_link_send(struct srv_cluster_link *l, unsigned kind,
                          const uint8_t *group, size_t group_len,
                          const void *payload, size_t len)
{
    return srv_cluster_link_send2(l, kind, group, group_len, NULL, 0, payload,
                                  len);
}

int srv_cluster_link_send2(struct srv_cluster_link *l, unsigned kind,
                           const uint8_t *group, size_t group_len,
                           const void *a, size_t alen, const void *b,
                           size_t blen)
{
    struct srv_cluster *cl = l->cl;
    uint8_t hdr[32 + SRV_CLUSTER_GROUP_ID_BYTES];
    struct srv_outpool *pool = &cl->pool;
    size_t len = alen + blen;

    if (l->closing || !l->connected) {
        return KEEL_ENOENT;
    }
    if (kind != SRV_CLUSTER_GROUP_BATCH) {
        srv_cluster_batch_flush(l); /* frames keep their order */
    }
    if (len + sizeof hdr > SRV_CLUSTER_FRAME_BYTES_MAX) {
        return KEEL_ETOOBIG;
    }
    size_t hn = srv_cluster_frame_header(hdr, kind, group, group_len, len);
    if (l->out.bytes + hn + len > SRV_CLUSTER_LINK_PENDING_BYTES_MAX) {
        SRV_WARN("cluster", "link to %s: %zu bytes queued, dropping the link",
                 l->peer_name, l->out.bytes);
        srv_cluster_link_fail(l, "outbound queue full");
        return KEEL_ELIMIT;
    }
    int rv = srv_outq_append(&l->out, pool, hdr, hn);
    if (rv == 0 && alen > 0) {
        rv = srv_outq_append(&l->out, pool, a, alen);
    }
    if (rv == 0 && blen > 0) {
        rv = srv_outq_append(&l->out, pool, b, blen);
    }
    if (rv != 0) {
        srv_cluster_link_fail(l, "out of memory");
        return KEEL_ELIMIT;
    }
    l->frames_out++;
    l->bytes_out += hn + len;
    if (l->out.bytes > l->out_peak) {
        l->out_peak = l->out.bytes;
    }
    if (l->out.bytes >= SRV_CONN_FLUSH_BYTES) {
        link_flush(l);
    }
    return 0;
}

static void link_write_cb(uv_write_t *req, int status)
{
    struct srv_cluster_link *l = req->data;
    struct srv_cluster *cl = l->cl;

    l->writing = false;
    srv_outq_end_flight(&l->out, &cl->pool);
    if (status < 0) {
        srv_cluster_link_fail(l, uv_strerror(status));
        return;
    }
    link_flush(l);
}

static void link_flush(struct srv_cluster_link *l)
{
    struct srv_outpool *pool = &l->cl->pool;
    uv_buf_t iov[SRV_OUT_IOV_MAX];
    size_t total = 0;

    if (srv_cluster_sec_tls(l)) {
        srv_cluster_tls_flush(l); /* encrypts the queue once the handshake
                                     is done */
        return;
    }
    if (l->closing || l->writing || l->out.bytes == 0 || !l->connected) {
        return;
    }
    unsigned cnt = srv_outq_iov(&l->out, iov, SRV_OUT_IOV_MAX, &total);
    int n = uv_try_write((uv_stream_t *)&l->tcp, iov, cnt);
    if (n == UV_EAGAIN) {
        n = 0;
    } else if (n < 0) {
        srv_cluster_link_fail(l, uv_strerror(n));
        return;
    }
    srv_outq_consume(&l->out, pool, (size_t)n);
    if (l->out.bytes == 0) {
        return;
    }
    cnt = srv_outq_iov(&l->out, iov, SRV_OUT_IOV_MAX, &total);
    srv_outq_start_flight(&l->out, total);
    l->wreq.data = l;
    int rv =
        uv_write(&l->wreq, (uv_stream_t *)&l->tcp, iov, cnt, link_write_cb);
    if (rv != 0) {
        srv_outq_end_flight(&l->out, pool);
        srv_cluster_link_fail(l, uv_strerror(rv));
        return;
    }
    l->writing = true;
}

static int send_json(struct srv_cluster_link *l, unsigned kind, json_t *o)
{
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    int rv = KEEL_ENOMEM;

    json_decref(o);
    if (s != NULL) {
        rv = srv_cluster_link_send(l, kind, NULL, 0, s, strlen(s));
        free(s);
    }
    return rv;
}

static void send_hello(struct srv_cluster_link *l)
{
    struct srv_cluster *cl = l->cl;
    json_t *o =
        json_pack("{s:i, s:s, s:s, s:s, s:s, s:s}", "proto", 1, "id",
                  cl->node_id, "name", cl->node_name, "cluster", cl->name,
                  "url", cl->url, "client_url", cl->client_url);
    srv_cluster_sec_hello(l, o); /* nonce when a route secret is set */
    if (send_json(l, SRV_CLUSTER_HELLO, o) != 0) {
        srv_cluster_link_fail(l, "cannot send the handshake");
    }
}

/* Tell l (or every established link when l is NULL) the cluster URLs this
 * node knows, so a node seeded with one route learns the rest. */
static void send_gossip(struct srv_cluster *cl, struct srv_cluster_link *l)
{
    json_t *a = json_array();

    if (a == NULL) {
        return;
    }
    json_array_append_new(a, json_string(cl->url));
    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        struct srv_cluster_link *x = cl->links[i];
        if (x != NULL && x->established && !x->closing) {
            json_array_append_new(a, json_string(x->peer_url));
        }
    }
    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        struct srv_cluster_link *x =
            l != NULL ? (i == 0 ? l : NULL) : cl->links[i];
        if (x != NULL && x->established && !x->closing) {
            (void)send_json(x, SRV_CLUSTER_GOSSIP, json_incref(a));
        }
    }
    json_decref(a);
}

static void on_gossip(struct srv_cluster *cl, const uint8_t *p, size_t len)
{
    json_t *a = json_loadb((const char *)p, len, 0, NULL);
    size_t i;
    json_t *v;

    json_array_foreach(a, i, v)
    {
        if (i >= SRV_CLUSTER_NODES_MAX) {
            break;
        }
        const char *u = json_string_value(v);
        if (u != NULL && strcmp(u, cl->url) != 0 && node_find(cl, u) == NULL) {
            SRV_DEBUG("cluster", "learned of node %s", u);
            (void)node_add(cl, u);
        }
    }
    json_decref(a);
}

static bool hello_str(json_t *o, const char *key, char *dst, size_t len)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (s == NULL || strlen(s) >= len) {
        return false;
    }
    memcpy(dst, s, strlen(s) + 1);
    return true;
}

/* When both nodes dialed each other, keep on both sides the link dialed
 * by the node whose name is smaller. Returns true when l is the loser. */
static bool lose_tie(struct srv_cluster *cl, struct srv_cluster_link *l)
{
    struct srv_cluster_link *old = srv_cluster_peer_link(cl, l->peer_name);

    if (old == NULL || old == l) {
        return false;
    }
    if (strcmp(old->peer_id, l->peer_id) != 0) {
        /* Another process of the peer (its id is new at every start):
         * the old one is gone even when TCP has not noticed (half-open
         * after a power loss or a partition), so the old link is stale
         * whatever the tie rule says. Keeping it left the restarted node
         * unlinked until the old link's silence ran out (DEAD_MS). Its
         * users see the peer go down and come up: it restarted. */
        SRV_INFO("cluster",
                 "%s restarted (server id %s, was %s): dropping the old link",
                 l->peer_name, l->peer_id, old->peer_id);
        srv_cluster_link_fail(old, "the peer restarted");
        return false;
    }
    bool self_smaller = strcmp(cl->node_name, l->peer_name) < 0;
    bool keep_new = l->outbound == self_smaller;
    SRV_DEBUG("cluster", "two links with %s: keeping the one dialed by %s",
              l->peer_name, self_smaller ? cl->node_name : l->peer_name);
    if (keep_new) {
        /* The peer stays reachable: no down/up flap for its users. */
        old->replaced = true;
        l->replacing = true;
        srv_cluster_link_fail(old, "replaced by the link dialed by the node "
                                   "with the smaller name");
        return false;
    }
    return true;
}

static void established(struct srv_cluster *cl, struct srv_cluster_link *l)
{
    l->established = true;
    if (l->node != NULL) {
        l->node->backoff_ms = SRV_CLUSTER_BACKOFF_MS_MIN;
        l->node->refused = false;
        snprintf(l->node->name, sizeof l->node->name, "%s", l->peer_name);
    }
    /* The URL it advertises is how others reach it: remember it too. */
    struct srv_cluster_node *n = node_add(cl, l->peer_url);
    if (n != NULL) {
        snprintf(n->name, sizeof n->name, "%s", l->peer_name);
        n->backoff_ms = SRV_CLUSTER_BACKOFF_MS_MIN;
    }
    SRV_INFO("cluster", "link to %s (%s, clients %s) up (%s)", l->peer_name,
             l->peer_url, l->peer_client_url,
             l->outbound ? "dialed" : "accepted");
    srv_cluster_interest_resend(cl, l);
    send_gossip(cl, NULL);
    update_connect_urls(cl);
    if (cl->peer_cb != NULL && !l->replacing) {
        cl->peer_cb(cl->peer_arg, l->peer_name, true);
    }
}

/* The peer is who it says (or no secret is set): keep one link per pair
 * and bring it up. */
static int hello_done(struct srv_cluster *cl, struct srv_cluster_link *l)
{
    if (l->node != NULL) {
        /* Who this URL is, even when the tie rule drops this link: a
         * seed named by a host name or another form than the URL the
         * node advertises is known by name, and not dialed again while
         * linked. */
        snprintf(l->node->name, sizeof l->node->name, "%s", l->peer_name);
    }
    if (lose_tie(cl, l)) {
        srv_cluster_link_fail(l, "duplicate link");
        return 0;
    }
    established(cl, l);
    return 0;
}

static int on_hello(struct srv_cluster *cl, struct srv_cluster_link *l,
                    const uint8_t *p, size_t len)
{
    if (srv_cluster_sec_awaiting_proof(l)) {
        /* Second HELLO: the peer's proof of the route secret. */
        int rv = srv_cluster_sec_on_proof(l, p, len);
        return rv == 0 ? hello_done(cl, l) : 0;
    }
    json_t *o = json_loadb((const char *)p, len, 0, NULL);
    char cname[SRV_CLUSTER_NAME_BYTES];
    bool ok = o != NULL && hello_str(o, "id", l->peer_id, sizeof l->peer_id) &&
              hello_str(o, "name", l->peer_name, sizeof l->peer_name) &&
              hello_str(o, "cluster", cname, sizeof cname) &&
              hello_str(o, "url", l->peer_url, sizeof l->peer_url) &&
              hello_str(o, "client_url", l->peer_client_url,
                        sizeof l->peer_client_url);
    char auth[32] = "", nonce[80] = ""; /* route secret challenge */
    bool wait = false;

    if (ok) {
        (void)hello_str(o, "auth", auth, sizeof auth);
        (void)hello_str(o, "nonce", nonce, sizeof nonce);
    }
    json_decref(o);
    if (!ok || l->established) {
        return KEEL_EPROTO;
    }
    if (strcmp(l->peer_id, cl->node_id) == 0) {
        if (l->node != NULL) {
            SRV_DEBUG("cluster", "route %s is this node: skipping it",
                      l->node->url);
            l->node->self = true;
        }
        srv_cluster_link_fail(l, NULL);
        return 0;
    }
    if (strcmp(cname, cl->name) != 0) {
        SRV_ERROR("cluster",
                  "refusing link with node %s (%s): it is in cluster '%s', "
                  "this node is in '%s'; give every node the same "
                  "--cluster_name",
                  l->peer_name, l->peer_url, cname, cl->name);
        if (l->node != NULL) {
            l->node->refused = true;
            l->node->backoff_ms = SRV_CLUSTER_BACKOFF_MS_MAX;
        }
        srv_cluster_link_fail(l, "cluster name mismatch");
        return 0;
    }
    if (strcmp(l->peer_name, cl->node_name) == 0) {
        SRV_ERROR("cluster",
                  "refusing link with %s: it has this node's name '%s'; "
                  "give every node a unique -n",
                  l->peer_url, cl->node_name);
        srv_cluster_link_fail(l, "duplicate node name");
        return 0;
    }
    if (srv_cluster_sec_on_hello(l, auth, nonce, &wait) != 0 || wait) {
        return 0; /* refused, or the proof HELLO comes next */
    }
    return hello_done(cl, l);
}

void srv_cluster_on_group(struct srv_cluster *cl, struct srv_cluster_link *l,
                          const uint8_t *g, size_t glen, const uint8_t *p,
                          size_t len)
{
    if (glen != SRV_CLUSTER_GROUP_ID_BYTES) {
        return;
    }
    const struct srv_cluster_group *grp =
        srv_hmap_get(&cl->groups, (const char *)g, glen);
    if (grp != NULL) {
        grp->cb(grp->arg, l->peer_name, p, len);
    }
    /* Else a group this node does not host (yet): Raft retries. */
}

/* Dispatch one frame: a switch over kinds. A frame other than HELLO
 * before the handshake is a protocol error. */
static int on_frame(struct srv_cluster_link *l, const uint8_t *body, size_t len)
{
    struct srv_cluster *cl = l->cl;
    const uint8_t *g, *p;
    size_t glen, plen;
    unsigned kind;

    if (srv_cluster_frame_decode(body, len, &kind, &g, &glen, &p, &plen) != 0) {
        return KEEL_EPROTO;
    }
    l->frames_in++;
    if (!l->established && kind != SRV_CLUSTER_HELLO) {
        return KEEL_EPROTO;
    }
    switch (kind) {
    case SRV_CLUSTER_HELLO:
        return on_hello(cl, l, p, plen);
    case SRV_CLUSTER_PING:
        (void)srv_cluster_link_send(l, SRV_CLUSTER_PONG, NULL, 0, NULL, 0);
        return 0;
    case SRV_CLUSTER_PONG:
        return 0;
    case SRV_CLUSTER_GOSSIP:
        on_gossip(cl, p, plen);
        return 0;
    case SRV_CLUSTER_INTEREST:
        return cl->srv != NULL ? srv_cluster_on_interest(cl, l, p, plen) : 0;
    case SRV_CLUSTER_MSG:
        return cl->srv != NULL ? srv_cluster_on_msg(cl, l, p, plen) : 0;
    case SRV_CLUSTER_GROUP:
        srv_cluster_on_group(cl, l, g, glen, p, plen);
        return 0;
    case SRV_CLUSTER_GROUP_BATCH:
        return srv_cluster_on_group_batch(cl, l, p, plen);
    default:
        ASSERT(kind >= SRV_CLUSTER_KIND_EXT_MIN &&
               kind <= SRV_CLUSTER_KIND_MAX);
        if (cl->kind_cb[kind] != NULL) {
            cl->kind_cb[kind](cl->kind_arg[kind], l->peer_name, p, plen);
        }
        return 0;
    }
}

/* Parse every complete frame in l->rbuf, keep the incomplete rest. */
static int parse_frames(struct srv_cluster_link *l)
{
    size_t off = 0;
    int rv = 0;

    for (size_t i = 0; i < SRV_CLUSTER_FRAMES_PER_READ_MAX && !l->closing;
         i++) {
        if (l->rlen - off < 4) {
            break;
        }
        const uint8_t *h = l->rbuf + off;
        size_t n = (size_t)keel_get_be(h, 4);
        if (n == 0 || n > SRV_CLUSTER_FRAME_BYTES_MAX) {
            return KEEL_ETOOBIG;
        }
        if (l->rlen - off - 4 < n) {
            break;
        }
        rv = on_frame(l, h + 4, n);
        if (rv != 0) {
            return rv;
        }
        off += 4 + n;
    }
    if (!l->closing && off > 0) {
        memmove(l->rbuf, l->rbuf + off, l->rlen - off);
        l->rlen -= off;
    }
    return 0;
}

static void link_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct srv_cluster_link *l = h->data;
    (void)suggested;

    size_t want = l->rlen + SRV_READ_BYTES;
    if (want > l->rcap) {
        uint8_t *b = realloc(l->rbuf, want);
        if (b == NULL) {
            *buf = uv_buf_init(NULL, 0);
            return;
        }
        l->rbuf = b;
        l->rcap = want;
    }
    *buf = uv_buf_init((char *)l->rbuf + l->rlen, SRV_READ_BYTES);
}

static void link_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct srv_cluster_link *l = s->data;
    (void)buf;

    if (l->closing || n == 0) {
        return;
    }
    if (n < 0) {
        srv_cluster_link_fail(l, n == UV_EOF ? "closed by peer"
                                             : uv_strerror((int)n));
        return;
    }
    l->bytes_in += (size_t)n;
    l->last_rx_ms = uv_now(l->cl->loop);
    if (srv_cluster_sec_tls(l)) {
        char errmsg[KEEL_ERRMSG_MAX] = "";
        int trv = srv_cluster_tls_on_read(l, (size_t)n, errmsg);
        if (trv != 0) {
            srv_cluster_link_fail(l, errmsg[0] != '\0' ? errmsg : "TLS");
            return;
        }
    } else {
        l->rlen += (size_t)n;
    }
    int rv = parse_frames(l);
    if (rv != 0) {
        SRV_WARN("cluster", "link %s: bad frame (%s), dropping the link",
                 l->peer_name[0] != '\0' ? l->peer_name : "(handshaking)",
                 keel_strerror(rv));
        srv_cluster_link_fail(l, "bad frame");
    }
}

static void link_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    enum srv_turn_phase ph = srv_turn_enter(SRV_TURN_LINK_READ);
    link_read(s, n, buf);
    srv_turn_leave(ph);
}

static void link_start(struct srv_cluster_link *l)
{
    l->connected = true;
    uv_tcp_nodelay(&l->tcp, 1);
    if (srv_cluster_sec_link_start(l) != 0) {
        srv_cluster_link_fail(l, "cannot start the link's TLS or nonce");
        return;
    }
    send_hello(l);
    if (!l->closing) {
        uv_read_start((uv_stream_t *)&l->tcp, link_alloc_cb, link_read_cb);
        link_flush(l);
    }
}

static void connect_cb(uv_connect_t *req, int status)
{
    struct srv_cluster_link *l = req->data;

    if (l->closing) {
        return;
    }
    if (status < 0) {
        srv_cluster_link_fail(l, uv_strerror(status));
        return;
    }
    link_start(l);
}

/* One host name lookup. node is NULL once abandoned (too slow, or the
 * cluster stopping): the callback then only frees it. */
struct srv_cluster_resolve {
    uv_getaddrinfo_t req;
    struct srv_cluster *cl;
    struct srv_cluster_node *node;
    uint64_t started_ms;
};

static void dial_addr(struct srv_cluster *cl, struct srv_cluster_node *n,
                      const struct sockaddr *sa)
{
    struct srv_cluster_link *l = link_new(cl, true);
    if (l == NULL) {
        schedule_redial(cl, n);
        return;
    }
    l->node = n;
    n->dialing = l;
    l->creq.data = l;
    int rv = uv_tcp_connect(&l->creq, &l->tcp, sa, connect_cb);
    if (rv != 0) {
        srv_cluster_link_fail(l, uv_strerror(rv));
    }
}

static void resolve_failed(struct srv_cluster *cl, struct srv_cluster_node *n,
                           const char *why)
{
    if (!n->unresolved) {
        SRV_WARN("cluster",
                 "cannot resolve route %s: %s; trying again (check the "
                 "host name and DNS)",
                 n->url, why);
    }
    n->unresolved = true;
    schedule_redial(cl, n);
}

static void resolve_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct srv_cluster_resolve *r = req->data;
    struct srv_cluster_node *n = r->node;
    struct srv_cluster *cl = r->cl;
    struct sockaddr_storage ss;
    bool found = false;

    ASSERT(cl->resolves > 0);
    cl->resolves--;
    /* Bounded: the resolver returns a handful of addresses. */
    for (struct addrinfo *a = res; status == 0 && a != NULL && !found;
         a = a->ai_next) {
        if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
            a->ai_addrlen <= sizeof ss) {
            memcpy(&ss, a->ai_addr, a->ai_addrlen);
            found = true;
        }
    }
    uv_freeaddrinfo(res);
    free(r);
    if (n == NULL || cl->stopping) {
        return;
    }
    ASSERT(n->resolving == r);
    n->resolving = NULL;
    if (!found) {
        resolve_failed(cl, n, status != 0 ? uv_strerror(status) : "no address");
        return;
    }
    if (n->unresolved) {
        SRV_INFO("cluster", "route %s resolves again", n->url);
    }
    n->unresolved = false;
    dial_addr(cl, n, (struct sockaddr *)&ss);
}

/* Look host up on the worker pool, then dial; resolved again at every
 * dial, so a node that comes back with a new address is found. */
static void resolve_start(struct srv_cluster *cl, struct srv_cluster_node *n,
                          const char *host, int port)
{
    char service[8];
    struct addrinfo hints;

    if (cl->resolves >= SRV_CLUSTER_RESOLVES_MAX) {
        return; /* the next tick tries again */
    }
    struct srv_cluster_resolve *r = calloc(1, sizeof *r);
    if (r == NULL) {
        schedule_redial(cl, n);
        return;
    }
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof service, "%d", port);
    r->cl = cl;
    r->node = n;
    r->started_ms = uv_now(cl->loop);
    r->req.data = r;
    int rv =
        uv_getaddrinfo(cl->loop, &r->req, resolve_cb, host, service, &hints);
    if (rv != 0) {
        free(r);
        resolve_failed(cl, n, uv_strerror(rv));
        return;
    }
    cl->resolves++;
    n->resolving = r;
}

/* Give up on a lookup that took too long (or on every one when
 * stopping): its callback frees it. */
static void resolve_abandon(struct srv_cluster_node *n)
{
    struct srv_cluster_resolve *r = n->resolving;
    if (r == NULL) {
        return;
    }
    r->node = NULL;
    n->resolving = NULL;
    (void)uv_cancel((uv_req_t *)&r->req); /* fails once it runs: fine */
}

static void dial(struct srv_cluster *cl, struct srv_cluster_node *n)
{
    char host[SRV_CLUSTER_URL_BYTES];
    struct sockaddr_storage ss;
    int port = 0;

    if (srv_cluster_parse_url(n->url, host, sizeof host, &port) != 0) {
        SRV_WARN("cluster", "cannot dial %s: use nats://host:port", n->url);
        n->self = true; /* never dialable: stop trying */
        return;
    }
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) == 0 ||
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) == 0) {
        dial_addr(cl, n, (struct sockaddr *)&ss);
        return;
    }
    resolve_start(cl, n, host, port);
}

static bool node_linked(const struct srv_cluster *cl,
                        const struct srv_cluster_node *n)
{
    return n->name[0] != '\0' && srv_cluster_peer_link(cl, n->name) != NULL;
}

/* Every SRV_CLUSTER_TICK_MS: dial what is due, ping, drop dead links. */
static void tick(uv_timer_t *t)
{
    struct srv_cluster *cl = t->data;
    uint64_t now = uv_now(cl->loop);
    /* A tick that comes a ping interval late followed a long loop turn of
     * this node: what the peers sent meanwhile waits unread in the
     * sockets (libuv runs timers before the poll), so silence is judged
     * at the next tick, after this iteration read it (docs/cluster.md,
     * "Loop turns"). */
    uint64_t gap = cl->tick_ms != 0 ? now - cl->tick_ms : 0;
    bool late = gap > SRV_CLUSTER_PING_MS;
    cl->tick_ms = now;
    if (late) {
        cl->late_ticks++;
        SRV_INFO("cluster",
                 "loop turn of %llu ms: links judged at the next tick",
                 (unsigned long long)gap);
    }

    for (size_t i = 0; i < SRV_CLUSTER_NODES_MAX; i++) {
        struct srv_cluster_node *n = &cl->nodes[i];
        if (n->resolving != NULL &&
            now - n->resolving->started_ms > SRV_CLUSTER_RESOLVE_MS) {
            resolve_abandon(n);
            resolve_failed(cl, n, "the lookup timed out");
        }
        if (n->used && !n->self && n->dialing == NULL && n->resolving == NULL &&
            now >= n->next_dial_ms && !node_linked(cl, n)) {
            dial(cl, n);
        }
    }
    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        struct srv_cluster_link *l = cl->links[i];
        if (l == NULL || l->closing) {
            continue;
        }
        if (!l->established && l->connected &&
            now - l->opened_ms > SRV_CLUSTER_HANDSHAKE_MS) {
            srv_cluster_link_fail(l, "no handshake in time");
        } else if (l->established && !late &&
                   now - l->last_rx_ms > SRV_CLUSTER_DEAD_MS) {
            srv_cluster_link_fail(l, "no frames from the peer (dead link)");
        } else if (l->established &&
                   now - l->last_ping_ms >= SRV_CLUSTER_PING_MS) {
            l->last_ping_ms = now;
            (void)srv_cluster_link_send(l, SRV_CLUSTER_PING, NULL, 0, NULL, 0);
        }
    }
    /* Link or interest changes at once; the frame and byte counters of
     * /routez at least every ping interval. */
    if ((cl->snapshot_dirty || now - cl->snapshot_ms >= SRV_CLUSTER_PING_MS) &&
        cl->srv != NULL) {
        cl->snapshot_dirty = false;
        cl->snapshot_ms = now;
        srv_server_cluster_snapshot(cl->srv, srv_cluster_json(cl, false),
                                    srv_cluster_json(cl, true));
    }
}

static void tick_cb(uv_timer_t *t)
{
    enum srv_turn_phase ph = srv_turn_enter(SRV_TURN_CLUSTER_TICK);
    tick(t);
    srv_turn_leave(ph);
}

/* Write what the loop iteration queued, batches first. */
static void flush_links(struct srv_cluster *cl)
{
    enum srv_turn_phase ph = srv_turn_enter(SRV_TURN_LINK_FLUSH);
    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        if (cl->links[i] != NULL) {
            srv_cluster_batch_flush(cl->links[i]);
            link_flush(cl->links[i]);
        }
    }
    srv_turn_leave(ph);
}

/* After the I/O callbacks of an iteration. */
static void check_cb(uv_check_t *h)
{
    flush_links(h->data);
}

/* Before the loop blocks: frames queued by timers and idle callbacks (Raft
 * heartbeats, a leader's AppendEntries) go out now, not after the next
 * wakeup. */
static void prepare_cb(uv_prepare_t *h)
{
    flush_links(h->data);
}

static void free_handle_cb(uv_handle_t *h)
{
    free(h);
}

static void on_accept(uv_stream_t *listener, int status)
{
    struct srv_cluster *cl = listener->data;

    if (status < 0 || cl->stopping) {
        return;
    }
    struct srv_cluster_link *l = link_new(cl, false);
    if (l == NULL) {
        uv_tcp_t *tmp = malloc(sizeof *tmp);
        SRV_WARN("cluster", "more than %d links: refusing a connection",
                 SRV_CLUSTER_LINKS_MAX);
        if (tmp != NULL) {
            uv_tcp_init(cl->loop, tmp);
            (void)uv_accept(listener, (uv_stream_t *)tmp);
            uv_close((uv_handle_t *)tmp, free_handle_cb);
        }
        return;
    }
    if (uv_accept(listener, (uv_stream_t *)&l->tcp) != 0) {
        srv_cluster_link_fail(l, "accept failed");
        return;
    }
    link_start(l);
}

static int listen_cluster(struct srv_cluster *cl, const char *listen,
                          char *errmsg)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    int port = 0;
    int rv;

    if (srv_cluster_parse_url(listen, cl->listen_host, sizeof cl->listen_host,
                              &port) != 0 ||
        (uv_ip4_addr(cl->listen_host, port, (struct sockaddr_in *)&ss) != 0 &&
         uv_ip6_addr(cl->listen_host, port, (struct sockaddr_in6 *)&ss) != 0)) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "invalid --cluster '%s': use nats://IP:PORT", listen);
    }
    uv_tcp_init(cl->loop, &cl->listener);
    cl->listener.data = cl;
    cl->listener_inited = true;
    cl->handles_open++;
    rv = uv_tcp_bind(&cl->listener, (struct sockaddr *)&ss, 0);
    if (rv == 0) {
        rv = uv_listen((uv_stream_t *)&cl->listener, 128, on_accept);
    }
    if (rv == 0) {
        rv = uv_tcp_getsockname(&cl->listener, (struct sockaddr *)&ss, &len);
    }
    if (rv != 0) {
        return keel_err(KEEL_EIO, errmsg,
                        "cannot listen for cluster links "
                        "on %s: %s",
                        listen, uv_strerror(rv));
    }
    cl->port = ntohs(ss.ss_family == AF_INET
                         ? ((struct sockaddr_in *)&ss)->sin_port
                         : ((struct sockaddr_in6 *)&ss)->sin6_port);
    bool any = strcmp(cl->listen_host, "0.0.0.0") == 0 ||
               strcmp(cl->listen_host, "::") == 0;
    snprintf(cl->url, sizeof cl->url, "%s:%d",
             any ? "127.0.0.1" : cl->listen_host, cl->port);
    return 0;
}

static void add_seeds(struct srv_cluster *cl, const char *routes)
{
    char buf[1024];
    char *save = NULL;

    snprintf(buf, sizeof buf, "%s", routes != NULL ? routes : "");
    for (char *tok = strtok_r(buf, ", \t", &save); tok != NULL;
         tok = strtok_r(NULL, ", \t", &save)) {
        struct srv_cluster_node *n = node_add(cl, tok);
        if (n != NULL) {
            n->seed = true;
        }
    }
}

int srv_cluster_start(struct srv_cluster *cl, uv_loop_t *loop,
                      struct srv_server *srv,
                      const struct srv_cluster_settings *s, char *errmsg)
{
    int rv;

    memset(cl, 0, sizeof *cl);
    cl->loop = loop;
    cl->srv = srv;
    srv_outpool_init(&cl->pool);
    srv_hmap_init(&cl->interest);
    srv_hmap_init(&cl->groups);
    rv = srv_sublist_init(&cl->rsublist);
    if (rv != 0) {
        return keel_err(rv, errmsg, "out of memory for the cluster");
    }
    snprintf(cl->name, sizeof cl->name, "%s",
             s->name != NULL && s->name[0] != '\0' ? s->name : "keel");
    snprintf(cl->node_id, sizeof cl->node_id, "%s", s->node_id);
    snprintf(cl->node_name, sizeof cl->node_name, "%s",
             s->node_name != NULL && s->node_name[0] != '\0' ? s->node_name
                                                             : s->node_id);
    snprintf(cl->client_url, sizeof cl->client_url, "%s",
             s->client_url != NULL ? s->client_url : "");
    if (uv_random(NULL, NULL, &cl->rng, sizeof cl->rng, 0, NULL) != 0 ||
        cl->rng == 0) {
        cl->rng = uv_hrtime() | 1;
    }
    rv = srv_cluster_sec_init(cl, s, errmsg);
    if (rv == 0) {
        rv = listen_cluster(cl, s->listen, errmsg);
    }
    if (rv != 0) {
        return rv;
    }
    add_seeds(cl, s->routes);
    uv_timer_init(loop, &cl->tick);
    cl->tick.data = cl;
    uv_timer_start(&cl->tick, tick_cb, 0, SRV_CLUSTER_TICK_MS);
    uv_check_init(loop, &cl->check);
    cl->check.data = cl;
    uv_check_start(&cl->check, check_cb);
    uv_prepare_init(loop, &cl->prepare);
    cl->prepare.data = cl;
    uv_prepare_start(&cl->prepare, prepare_cb);
    cl->handles_open += 3;
    cl->timers_inited = true;
    cl->snapshot_dirty = true;
    SRV_INFO("cluster",
             "node %s of cluster '%s' listening for links on %s "
             "(advertised %s)",
             cl->node_name, cl->name, s->listen, cl->url);
    return 0;
}

int srv_cluster_add_route(struct srv_cluster *cl, const char *url)
{
    struct srv_cluster_node *n = node_add(cl, url);
    if (n == NULL) {
        return KEEL_EINVAL;
    }
    n->seed = true;
    return 0;
}

const char *srv_cluster_seed_names(const struct srv_cluster *cl,
                                   const char **names, size_t max, size_t *n)
{
    const char *pending = NULL;
    *n = 0;
    for (size_t i = 0; i < SRV_CLUSTER_NODES_MAX; i++) {
        const struct srv_cluster_node *nd = &cl->nodes[i];
        if (!nd->used || !nd->seed) {
            continue;
        }
        const char *name = nd->self ? cl->node_name : nd->name;
        if (name[0] == '\0') {
            pending = pending != NULL ? pending : nd->url;
        } else if (*n < max) {
            names[(*n)++] = name;
        }
    }
    ASSERT(*n <= max);
    return pending;
}

static void handle_closed_cb(uv_handle_t *h)
{
    struct srv_cluster *cl = h->data;

    ASSERT(cl != NULL);
    ASSERT(cl->handles_open > 0);
    cl->handles_open--;
}

void srv_cluster_stop(struct srv_cluster *cl)
{
    if (cl->stopping || cl->loop == NULL) {
        return;
    }
    cl->stopping = true;
    if (cl->timers_inited) {
        uv_close((uv_handle_t *)&cl->tick, handle_closed_cb);
        uv_close((uv_handle_t *)&cl->check, handle_closed_cb);
        uv_close((uv_handle_t *)&cl->prepare, handle_closed_cb);
    }
    if (cl->listener_inited) {
        uv_close((uv_handle_t *)&cl->listener, handle_closed_cb);
    }
    for (size_t i = 0; i < SRV_CLUSTER_NODES_MAX; i++) {
        resolve_abandon(&cl->nodes[i]);
    }
    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        if (cl->links[i] != NULL) {
            srv_cluster_batch_flush(cl->links[i]);
            link_flush(cl->links[i]);
            srv_cluster_link_fail(cl->links[i], "shutting down");
        }
    }
}

void srv_cluster_close(struct srv_cluster *cl)
{
    srv_hmap_close(&cl->interest);
    srv_sublist_close(&cl->rsublist);
    srv_outpool_close(&cl->pool);
    srv_hmap_close_free(&cl->groups);
    free(cl->scratch);
    srv_cluster_sec_close(cl);
    cl->scratch = NULL;
}

/* ---- the hooks keeld registers with the NATS core (main.c) ---- */

static_assert(sizeof(struct srv_cluster_pub) <= sizeof(struct srv_pub_fwd),
              "raise SRV_PUB_FWD_BYTES: struct srv_cluster_pub grew");
static_assert(alignof(struct srv_cluster_pub) <= alignof(struct srv_pub_fwd),
              "struct srv_cluster_pub needs a stricter alignment");

static void fwd_begin(void *arg, const struct srv_cmd *cmd,
                      struct srv_pub_fwd *f)
{
    srv_cluster_pub_begin(arg, cmd, (struct srv_cluster_pub *)f->bytes);
}

static bool fwd_queue_remote(void *arg, struct srv_pub_fwd *f, const char *name,
                             size_t name_len, size_t local_n)
{
    return srv_cluster_pub_queue_remote(arg, (struct srv_cluster_pub *)f->bytes,
                                        name, name_len, local_n);
}

static size_t fwd_end(void *arg, struct srv_pub_fwd *f,
                      const struct srv_cmd *cmd)
{
    return srv_cluster_pub_end(arg, (struct srv_cluster_pub *)f->bytes, cmd);
}

static void fwd_interest_add(void *arg, const struct srv_sub *sub)
{
    srv_cluster_interest_add(arg, sub);
}

static void fwd_interest_remove(void *arg, const struct srv_sub *sub)
{
    srv_cluster_interest_remove(arg, sub);
}

static void fwd_stop(void *arg)
{
    srv_cluster_stop(arg);
}

const struct srv_fwd_hooks srv_cluster_fwd_hooks = {
    .begin = fwd_begin,
    .queue_remote = fwd_queue_remote,
    .end = fwd_end,
    .interest_add = fwd_interest_add,
    .interest_remove = fwd_interest_remove,
    .stop = fwd_stop,
};
