/* The cluster API other modules call (Raft group frames, the group
 * registry, peers) and the JSON served by /varz and /routez.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_cluster.h"

int srv_cluster_send(struct srv_cluster *cl, const char *node,
                     const uint8_t *group_id, const void *data, size_t len)
{
    return srv_cluster_send2(cl, node, group_id, NULL, 0, data, len);
}

int srv_cluster_send2(struct srv_cluster *cl, const char *node,
                      const uint8_t *group_id, const void *a, size_t alen,
                      const void *b, size_t blen)
{
    struct srv_cluster_link *l = srv_cluster_peer_link(cl, node);

    ASSERT(group_id != NULL);
    ASSERT(alen == 0 || a != NULL);
    if (l == NULL) {
        return KEEL_ENOENT;
    }
    if (alen + blen <= SRV_CLUSTER_BATCH_ITEM_BYTES_MAX) {
        return srv_cluster_batch_add2(l, group_id, a, alen, b, blen);
    }
    return srv_cluster_link_send2(l, SRV_CLUSTER_GROUP, group_id,
                                  SRV_CLUSTER_GROUP_ID_BYTES, a, alen, b, blen);
}

int srv_cluster_send_bulk(struct srv_cluster *cl, const char *node,
                          const uint8_t *group_id, const void *a, size_t alen,
                          const void *b, size_t blen)
{
    struct srv_cluster_link *l = srv_cluster_peer_link(cl, node);

    if (l != NULL && l->out.bytes >= SRV_CLUSTER_LINK_GROUP_BYTES_MAX) {
        l->held_back++;
        return KEEL_EAGAIN;
    }
    return srv_cluster_send2(cl, node, group_id, a, alen, b, blen);
}

int srv_cluster_register_kind(struct srv_cluster *cl, unsigned kind,
                              srv_cluster_kind_cb cb, void *arg)
{
    if (kind < SRV_CLUSTER_KIND_EXT_MIN || kind > SRV_CLUSTER_KIND_MAX) {
        return KEEL_EINVAL;
    }
    if (cb != NULL && cl->kind_cb[kind] != NULL) {
        return KEEL_EEXIST;
    }
    cl->kind_cb[kind] = cb;
    cl->kind_arg[kind] = cb != NULL ? arg : NULL;
    return 0;
}

int srv_cluster_send_kind(struct srv_cluster *cl, const char *node,
                          unsigned kind, const void *data, size_t len)
{
    struct srv_cluster_link *l = srv_cluster_peer_link(cl, node);

    ASSERT(kind >= SRV_CLUSTER_KIND_EXT_MIN && kind <= SRV_CLUSTER_KIND_MAX);
    if (l == NULL) {
        return KEEL_ENOENT;
    }
    return srv_cluster_link_send(l, kind, NULL, 0, data, len);
}

size_t srv_cluster_broadcast_kind(struct srv_cluster *cl, unsigned kind,
                                  const void *data, size_t len)
{
    size_t n = 0;

    ASSERT(kind >= SRV_CLUSTER_KIND_EXT_MIN && kind <= SRV_CLUSTER_KIND_MAX);
    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        struct srv_cluster_link *l = cl->links[i];
        if (l != NULL && l->established && !l->closing &&
            srv_cluster_link_send(l, kind, NULL, 0, data, len) == 0) {
            n++;
        }
    }
    return n;
}

int srv_cluster_register_group(struct srv_cluster *cl, const uint8_t *group_id,
                               srv_cluster_group_cb cb, void *arg)
{
    ASSERT(cb != NULL);
    const char *key = (const char *)group_id;
    if (srv_hmap_get(&cl->groups, key, SRV_CLUSTER_GROUP_ID_BYTES) != NULL) {
        return KEEL_EEXIST;
    }
    if (cl->groups.count >= SRV_CLUSTER_GROUPS_MAX) {
        return KEEL_ELIMIT;
    }
    struct srv_cluster_group *g = malloc(sizeof *g);
    if (g == NULL) {
        return KEEL_ENOMEM;
    }
    memcpy(g->id, group_id, SRV_CLUSTER_GROUP_ID_BYTES);
    g->cb = cb;
    g->arg = arg;
    if (srv_hmap_put(&cl->groups, key, SRV_CLUSTER_GROUP_ID_BYTES, g) != 0) {
        free(g);
        return KEEL_ENOMEM;
    }
    return 0;
}

int srv_cluster_unregister_group(struct srv_cluster *cl,
                                 const uint8_t *group_id)
{
    struct srv_cluster_group *g = srv_hmap_del(
        &cl->groups, (const char *)group_id, SRV_CLUSTER_GROUP_ID_BYTES);
    free(g);
    return g != NULL ? 0 : KEEL_ENOENT;
}

void srv_cluster_set_peer_cb(struct srv_cluster *cl, srv_cluster_peer_cb cb,
                             void *arg)
{
    cl->peer_cb = cb;
    cl->peer_arg = arg;
}

size_t srv_cluster_peers(const struct srv_cluster *cl, const char **names,
                         size_t max)
{
    size_t n = 0;

    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX && n < max; i++) {
        const struct srv_cluster_link *l = cl->links[i];
        if (l != NULL && l->established && !l->closing) {
            names[n++] = l->peer_name;
        }
    }
    return n;
}

/* Interest keys l's peer reported, "subject" or "subject queue", at most
 * SRV_CLUSTER_ROUTEZ_SUBS_MAX (tests and operators look one up). */
static json_t *route_subs_json(const struct srv_cluster_link *l)
{
    json_t *a = json_array();
    size_t pos = 0;
    struct srv_hmap_slot *s;
    char buf[SRV_CONTROL_LINE_BYTES_MAX * 2 + 2];

    for (size_t i = 0; i < SRV_CLUSTER_ROUTEZ_SUBS_MAX && a != NULL; i++) {
        s = srv_hmap_next(&l->rsubs, &pos);
        if (s == NULL) {
            break;
        }
        const struct srv_cluster_rsub *rs = s->value;
        snprintf(buf, sizeof buf, "%.*s%s%.*s", (int)rs->sub.subject_len,
                 rs->sub.subject, rs->sub.queue_len > 0 ? " " : "",
                 (int)rs->sub.queue_len,
                 rs->sub.queue != NULL ? rs->sub.queue : "");
        json_array_append_new(a, json_string(buf));
    }
    return a;
}

static json_t *route_json(const struct srv_cluster_link *l)
{
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, "
        "s:I, s:I, s:I}",
        "remote_id", l->peer_id, "remote_name", l->peer_name, "url",
        l->peer_url, "client_url", l->peer_client_url, "did_solicit",
        l->outbound, "subscriptions", (json_int_t)l->rsubs.count, "in_msgs",
        (json_int_t)l->frames_in, "out_msgs", (json_int_t)l->frames_out,
        "in_bytes", (json_int_t)l->bytes_in, "out_bytes",
        (json_int_t)l->bytes_out, "pending_bytes", (json_int_t)l->out.bytes,
        "pending_bytes_max", (json_int_t)l->out_peak, "held_back",
        (json_int_t)l->held_back);
    if (o != NULL) {
        json_object_set_new(o, "subscriptions_list", route_subs_json(l));
    }
    return o;
}

char *srv_cluster_json(const struct srv_cluster *cl, bool routez)
{
    json_t *routes = json_array();
    json_t *urls = json_array();
    json_t *o = NULL;
    size_t n = 0;

    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        const struct srv_cluster_link *l = cl->links[i];
        if (l != NULL && l->established && !l->closing) {
            json_array_append_new(routes, route_json(l));
            json_array_append_new(urls, json_string(l->peer_url));
            n++;
        }
    }
    if (routez) {
        json_decref(urls);
        o = json_pack("{s:s, s:s, s:s, s:I, s:o}", "server_id", cl->node_id,
                      "server_name", cl->node_name, "name", cl->name,
                      "num_routes", (json_int_t)n, "routes", routes);
    } else {
        json_decref(routes);
        o = json_pack("{s:s, s:s, s:i, s:o, s:I}", "name", cl->name, "addr",
                      cl->listen_host, "port", cl->port, "urls", urls,
                      "num_routes", (json_int_t)n);
    }
    char *s =
        o != NULL ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}
