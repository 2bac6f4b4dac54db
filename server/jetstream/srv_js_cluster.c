/* srv_js_cluster: the node directory, the Raft transport over cluster
 * links, the meta bootstrap exchange and the leader directory (see
 * srv_js_cluster.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <jansson.h>

#include "codec.h"
#include "keel/error.h"
#include "srv_cluster.h"
#include "srv_js_cluster.h"
#include "srv_js_int.h"
#include "srv_js_wire.h"
#include "srv_log.h"
#include "srv_server.h"

_Static_assert(SRV_JSC_NAME_BYTES == SRV_CLUSTER_NAME_BYTES, "name size");
_Static_assert(SRV_JSC_URL_BYTES == SRV_CLUSTER_URL_BYTES, "url size");
_Static_assert(SRV_JSC_GID_BYTES == SRV_CLUSTER_GROUP_ID_BYTES, "gid size");
_Static_assert(SRV_JSC_GID_BYTES == sizeof(struct store_group_id), "gid");

/* Room kept in a frame for the frame header around a Raft message. */
#define JSC_FRAME_HDR_BYTES 64
/* Halvings of one AppendEntries at most (64 entries -> 1). */
#define JSC_SPLIT_DEPTH_MAX 8
_Static_assert((1u << JSC_SPLIT_DEPTH_MAX) >= RAFT_APPEND_ENTRIES_MAX,
               "splitting must reach single entries");
/* Every node repeats its meta report this often. */
#define SRV_JSC_REPORT_MS 2000
/* Groups registered with the transport (streams + meta). */
#define JSC_GROUPS_MAX (SRV_JS_STREAMS_MAX + 1)
/* One announcement entry: bin16 gid + uint term, with headers. */
#define JSC_ANNOUNCE_ITEM_BYTES (2 + SRV_JSC_GID_BYTES + 9)

struct jsc_node {
    bool used;
    bool up;       /* link established now */
    bool reported; /* a META frame arrived since the link came up */
    bool join;     /* joins through a solo seed: the meta leader adds it */
    raft_node node;
    raft_incarnation inc;
    enum srv_jsc_state state;
    uint64_t fp; /* MEMBER: fingerprint of its meta configuration */
    char name[SRV_JSC_NAME_BYTES];
    char url[SRV_JSC_URL_BYTES];
    char seeds[SRV_JSC_SEEDS_BYTES];
    struct srv_tags tags; /* its server_tags, from its last META report */
};

struct jsc_group {
    uint8_t gid[SRV_JSC_GID_BYTES];
    struct replica **slot;
    bool on_cluster; /* registered with srv_cluster */
};

struct jsc_leader {
    uint64_t term;
    uint64_t seen_ms;
    bool self; /* this node leads: announced */
    char name[SRV_JSC_NAME_BYTES];
};

struct srv_jsc {
    struct srv_js *js;
    struct srv_cluster *cl; /* NULL until keeld started its links */
    char self[SRV_JSC_NAME_BYTES];
    raft_node self_node;
    raft_incarnation inc;
    enum srv_jsc_state state;
    /* Joins through a solo seed of its set (JOIN_SEED): reported, so the
     * meta leader adds it without an operator. */
    bool joining;
    uint64_t attach_ms; /* links attached: a solo seed waits from here */
    uint64_t boot_fp;   /* fingerprint of the configuration bootstrapped */
    /* Seed set by node name (srv_jsc_seed_set); "" until every route's
     * node was identified on a link. */
    char seeds[SRV_JSC_SEEDS_BYTES];
    struct jsc_node nodes[SRV_JSC_NODES_MAX];
    struct jsc_group *groups;
    size_t ngroups;
    struct srv_hmap leaders; /* gid -> struct jsc_leader */
    uv_timer_t timer;
    bool timer_open;
    bool stopping;
    bool announce_now;
    uint64_t last_announce_ms;
    uint64_t last_report_ms;     /* WAITING: last META broadcast */
    char why[SRV_JSC_WHY_BYTES]; /* last bootstrap wait reason logged */
    struct srv_js_wire wire;     /* AppendEntries encoded once per range */
};

static void send_meta(struct srv_jsc *jc, const char *to);

static uint64_t now_ms(const struct srv_jsc *jc)
{
    return uv_now(jc->js->loop);
}

/* ---- directory ---- */

static struct jsc_node *node_by_name(struct srv_jsc *jc, const char *name,
                                     bool add)
{
    struct jsc_node *free_slot = NULL;
    for (size_t i = 0; i < SRV_JSC_NODES_MAX; i++) {
        struct jsc_node *n = &jc->nodes[i];
        if (n->used && strcmp(n->name, name) == 0) {
            return n;
        }
        if (!n->used && free_slot == NULL) {
            free_slot = n;
        }
    }
    if (!add || free_slot == NULL || strlen(name) >= SRV_JSC_NAME_BYTES) {
        return NULL;
    }
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->used = true;
    free_slot->node = srv_jsc_node_id(name);
    snprintf(free_slot->name, sizeof free_slot->name, "%s", name);
    return free_slot;
}

const char *srv_jsc_name_of(const struct srv_jsc *jc, raft_node node)
{
    if (node == jc->self_node) {
        return jc->self;
    }
    for (size_t i = 0; i < SRV_JSC_NODES_MAX; i++) {
        if (jc->nodes[i].used && jc->nodes[i].node == node) {
            return jc->nodes[i].name;
        }
    }
    return NULL;
}

void srv_jsc_learn(struct srv_jsc *jc, const char *name, raft_incarnation inc)
{
    if (strcmp(name, jc->self) == 0) {
        return;
    }
    struct jsc_node *n = node_by_name(jc, name, true);
    if (n != NULL && n->inc == 0) {
        n->inc = inc;
    }
}

bool srv_jsc_peer_up(const struct srv_jsc *jc, const char *name)
{
    if (strcmp(name, jc->self) == 0) {
        return true;
    }
    for (size_t i = 0; i < SRV_JSC_NODES_MAX; i++) {
        if (jc->nodes[i].used && strcmp(jc->nodes[i].name, name) == 0) {
            return jc->nodes[i].up;
        }
    }
    return false;
}

bool srv_jsc_peer_report(const struct srv_jsc *jc, const char *name,
                         struct srv_jsc_peer_report *out)
{
    for (size_t i = 0; i < SRV_JSC_NODES_MAX; i++) {
        const struct jsc_node *n = &jc->nodes[i];
        if (n->used && n->reported && strcmp(n->name, name) == 0) {
            *out = (struct srv_jsc_peer_report){
                .up = n->up, .inc = n->inc, .state = n->state};
            return true;
        }
    }
    return false;
}

bool srv_jsc_next_joiner(const struct srv_jsc *jc,
                         const struct raft_config *cfg, char *name, size_t cap,
                         raft_incarnation *inc)
{
    const struct jsc_node *best = NULL;
    for (size_t i = 0; i < SRV_JSC_NODES_MAX; i++) {
        const struct jsc_node *n = &jc->nodes[i];
        /* Waiting with an empty log, or restarted with it (member, no
         * configuration: fingerprint 0); never a node of another group. */
        bool empty_log = n->state == SRV_JSC_WAITING ||
                         (n->state == SRV_JSC_MEMBER && n->fp == 0);
        if (!n->used || !n->up || !n->reported || !n->join || !empty_log ||
            raft_config_find(cfg, n->node) != NULL) {
            continue;
        }
        if (best == NULL || strcmp(n->name, best->name) < 0) {
            best = n;
        }
    }
    if (best == NULL || strlen(best->name) >= cap) {
        return false;
    }
    snprintf(name, cap, "%s", best->name);
    *inc = best->inc;
    return true;
}

bool srv_jsc_joining(const struct srv_jsc *jc)
{
    return jc->joining;
}

void srv_jsc_config_applied(struct srv_jsc *jc, const struct raft_config *cfg)
{
    if (jc->state != SRV_JSC_WAITING ||
        raft_config_find(cfg, jc->self_node) == NULL) {
        return;
    }
    SRV_INFO("js", "this node was added to the JetStream meta group");
    jc->state = SRV_JSC_MEMBER;
    if (jc->cl != NULL) {
        send_meta(jc, NULL);
    }
}

const char *srv_jsc_self_name(const struct srv_jsc *jc)
{
    return jc->self;
}

raft_node srv_jsc_self_node(const struct srv_jsc *jc)
{
    return jc->self_node;
}

enum srv_jsc_state srv_jsc_state(const struct srv_jsc *jc)
{
    return jc->state;
}

/* ---- Raft transport ---- */

static void on_group_frame(void *arg, const char *from, const uint8_t *data,
                           size_t len)
{
    /* Loop thread only, used within one call: decoded entries point into
     * data and live until replica_receive returns. */
    static struct raft_entry es[RAFT_APPEND_ENTRIES_MAX];
    struct replica **slot = arg;
    struct raft_msg m;
    char err[KEEL_ERRMSG_MAX];
    if (*slot == NULL) {
        return; /* the group is closing or not open yet: Raft retries */
    }
    if (raft_msg_decode(data, len, &m, es, err) != 0) {
        SRV_DEBUG("js", "undecodable Raft frame from %s: %s", from, err);
        return;
    }
    if (replica_receive(*slot, &m, err) != 0) {
        SRV_DEBUG("js", "Raft message from %s refused: %s", from, err);
    }
}

static int group_to_cluster(struct srv_jsc *jc, struct jsc_group *g)
{
    int rv =
        srv_cluster_register_group(jc->cl, g->gid, on_group_frame, g->slot);
    g->on_cluster = rv == 0;
    return rv;
}

int srv_jsc_group_register(struct srv_jsc *jc, const uint8_t *gid,
                           struct replica **slot)
{
    ASSERT(slot != NULL);
    if (jc->ngroups == JSC_GROUPS_MAX) {
        return KEEL_ELIMIT;
    }
    for (size_t i = 0; i < jc->ngroups; i++) {
        if (memcmp(jc->groups[i].gid, gid, SRV_JSC_GID_BYTES) == 0) {
            return KEEL_EEXIST;
        }
    }
    struct jsc_group *g = &jc->groups[jc->ngroups++];
    memcpy(g->gid, gid, SRV_JSC_GID_BYTES);
    g->slot = slot;
    g->on_cluster = false;
    ASSERT(jc->ngroups <= JSC_GROUPS_MAX);
    return jc->cl != NULL ? group_to_cluster(jc, g) : 0;
}

void srv_jsc_group_unregister(struct srv_jsc *jc, const uint8_t *gid)
{
    for (size_t i = 0; i < jc->ngroups; i++) {
        struct jsc_group *g = &jc->groups[i];
        if (memcmp(g->gid, gid, SRV_JSC_GID_BYTES) != 0) {
            continue;
        }
        if (g->on_cluster && jc->cl != NULL) {
            (void)srv_cluster_unregister_group(jc->cl, gid);
        }
        jc->groups[i] = jc->groups[--jc->ngroups];
        srv_jsc_led(jc, gid, 0, false);
        return;
    }
}

/* Encode m and queue it to node to; an AppendEntries over one frame is
 * split in two consecutive AppendEntries (the second's prev is the
 * first's last entry), recursively. */
static void send_split(struct srv_jsc *jc, const char *to, const uint8_t *gid,
                       const struct raft_msg *m, unsigned depth)
{
    struct srv_js_wire_msg w;
    char err[KEEL_ERRMSG_MAX];
    int rv = srv_js_wire_encode(&jc->wire, gid, m, &w, err);
    uint32_t n = m->type == RAFT_MSG_APPEND ? m->append.n_entries : 0;
    if (rv == 0 &&
        w.head_len + w.body_len >
            SRV_CLUSTER_FRAME_BYTES_MAX - JSC_FRAME_HDR_BYTES &&
        n > 1 && depth < JSC_SPLIT_DEPTH_MAX) {
        srv_js_wire_msg_done(&w);
        uint32_t half = n / 2;
        struct raft_msg a = *m;
        struct raft_msg b = *m;
        a.append.n_entries = half;
        b.append.prev_index = m->append.prev_index + half;
        b.append.prev_term = m->append.entries[half - 1].term;
        b.append.entries = m->append.entries + half;
        b.append.n_entries = n - half;
        send_split(jc, to, gid, &a, depth + 1);
        send_split(jc, to, gid, &b, depth + 1);
        return;
    }
    if (rv == 0 && (n > 0 || m->type == RAFT_MSG_SNAPSHOT)) {
        /* Entries or a snapshot chunk: held back while the link is
         * backed up, a lost message the leader sends again once the
         * follower answers (docs/cluster.md, "Flow control"). */
        rv = srv_cluster_send_bulk(jc->cl, to, gid, w.head, w.head_len, w.body,
                                   w.body_len);
    } else if (rv == 0) {
        rv = srv_cluster_send2(jc->cl, to, gid, w.head, w.head_len, w.body,
                               w.body_len);
    } else {
        SRV_WARN("js", "Raft message to %s not encoded: %s", to, err);
    }
    srv_js_wire_msg_done(&w);
}

void srv_jsc_send(struct srv_jsc *jc, const uint8_t *gid,
                  const struct raft_msg *m)
{
    if (jc == NULL || jc->cl == NULL || jc->stopping) {
        return; /* no links yet: a lost message, Raft retries */
    }
    const char *to = srv_jsc_name_of(jc, m->to);
    if (to == NULL || m->to == jc->self_node) {
        return;
    }
    send_split(jc, to, gid, m, 0);
}

/* ---- leader directory ---- */

static struct jsc_leader *leader_get(struct srv_jsc *jc, const uint8_t *gid,
                                     bool add)
{
    struct jsc_leader *e =
        srv_hmap_get(&jc->leaders, (const char *)gid, SRV_JSC_GID_BYTES);
    if (e != NULL || !add) {
        return e;
    }
    e = calloc(1, sizeof *e);
    if (e == NULL || srv_hmap_put(&jc->leaders, (const char *)gid,
                                  SRV_JSC_GID_BYTES, e) != 0) {
        free(e);
        return NULL;
    }
    return e;
}

static void leader_set(struct srv_jsc *jc, const uint8_t *gid, uint64_t term,
                       const char *name)
{
    struct jsc_leader *e = leader_get(jc, gid, true);
    if (e == NULL || term < e->term) {
        return; /* an older term's leader: keep the newer one */
    }
    e->term = term;
    e->seen_ms = now_ms(jc);
    e->self = strcmp(name, jc->self) == 0;
    snprintf(e->name, sizeof e->name, "%s", name);
}

void srv_jsc_led(struct srv_jsc *jc, const uint8_t *gid, uint64_t term,
                 bool leader)
{
    if (leader) {
        leader_set(jc, gid, term, jc->self);
        jc->announce_now = true;
        return;
    }
    struct jsc_leader *e = leader_get(jc, gid, false);
    if (e != NULL && e->self) {
        free(srv_hmap_del(&jc->leaders, (const char *)gid, SRV_JSC_GID_BYTES));
    }
}

void srv_jsc_leader_seen(struct srv_jsc *jc, const uint8_t *gid, uint64_t term,
                         raft_node leader)
{
    const char *name = srv_jsc_name_of(jc, leader);
    if (name != NULL && leader != 0) {
        leader_set(jc, gid, term, name);
    }
}

const char *srv_jsc_leader_name(const struct srv_jsc *jc, const uint8_t *gid)
{
    const struct jsc_leader *e =
        srv_hmap_get(&jc->leaders, (const char *)gid, SRV_JSC_GID_BYTES);
    return e != NULL && e->name[0] != '\0' ? e->name : NULL;
}

/* One frame to every link: [gid, term, gid, term, ...] of the groups this
 * node leads (coalesced: one frame per link per period). */
static void announce(struct srv_jsc *jc)
{
    size_t pos = 0;
    size_t n = 0;
    struct srv_hmap_slot *s;
    uint8_t *buf = malloc(SRV_MP_HEADER_BYTES_MAX +
                          jc->leaders.count * JSC_ANNOUNCE_ITEM_BYTES);
    if (buf == NULL) {
        return;
    }
    while ((s = srv_hmap_next(&jc->leaders, &pos)) != NULL) {
        n += ((struct jsc_leader *)s->value)->self ? 1 : 0;
    }
    uint8_t *p = srv_mp_put_array(buf, (uint32_t)(2 * n));
    pos = 0;
    /* Bounded by the directory size (groups of this node). */
    while ((s = srv_hmap_next(&jc->leaders, &pos)) != NULL) {
        const struct jsc_leader *e = s->value;
        if (e->self) {
            p = srv_mp_put_bin_header(p, SRV_JSC_GID_BYTES);
            memcpy(p, s->key, SRV_JSC_GID_BYTES);
            p = srv_mp_put_uint(p + SRV_JSC_GID_BYTES, e->term);
        }
    }
    if (n > 0) {
        (void)srv_cluster_broadcast_kind(jc->cl, SRV_CLUSTER_JS_LEADER, buf,
                                         (size_t)(p - buf));
    }
    free(buf);
}

static void on_leader_frame(void *arg, const char *from, const uint8_t *data,
                            size_t len)
{
    struct srv_jsc *jc = arg;
    struct srv_mp_reader r = {data, data + len};
    uint32_t n = 0;
    if (srv_mp_get_array(&r, &n) != 0 || n % 2 != 0) {
        return;
    }
    /* Bounded by the frame: each item takes bytes. */
    for (uint32_t i = 0; i < n; i += 2) {
        const uint8_t *gid = NULL;
        size_t glen = 0;
        uint64_t term = 0;
        if (srv_mp_get_bytes(&r, &gid, &glen) != 0 ||
            srv_mp_get_uint(&r, &term) != 0 || glen != SRV_JSC_GID_BYTES) {
            return;
        }
        leader_set(jc, gid, term, from);
    }
}

/* Forget leaders nobody re-announced (a dead node's groups). */
static void leaders_expire(struct srv_jsc *jc)
{
    uint8_t gone[SRV_JS_LIST_PAGE][SRV_JSC_GID_BYTES];
    size_t n = 0;
    size_t pos = 0;
    struct srv_hmap_slot *s;
    uint64_t now = now_ms(jc);
    while (n < SRV_JS_LIST_PAGE &&
           (s = srv_hmap_next(&jc->leaders, &pos)) != NULL) {
        const struct jsc_leader *e = s->value;
        if (!e->self && now - e->seen_ms > SRV_JSC_LEADER_STALE_MS) {
            memcpy(gone[n++], s->key, SRV_JSC_GID_BYTES);
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(srv_hmap_del(&jc->leaders, (const char *)gone[i],
                          SRV_JSC_GID_BYTES));
    }
}

/* ---- meta bootstrap exchange ---- */

static void send_meta(struct srv_jsc *jc, const char *to)
{
    char inc[24];
    char fp[24];
    const struct raft_config *mc = &jc->js->meta_cfg;
    uint64_t f = mc->n > 0 ? srv_jsc_config_fp(mc) : jc->boot_fp;
    snprintf(inc, sizeof inc, "%016" PRIx64, jc->inc);
    snprintf(fp, sizeof fp, "%016" PRIx64, jc->state == SRV_JSC_MEMBER ? f : 0);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:b, s:o*}", "name", jc->self,
                  "url", jc->cl->url, "inc", inc, "state", (int)jc->state,
                  "seeds", jc->seeds, "fp", fp, "join", jc->joining, "tags",
                  srv_tags_json(srv_jsc_self_tags(jc)));
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (s == NULL) {
        return;
    }
    if (to != NULL && srv_cluster_send_kind(jc->cl, to, SRV_CLUSTER_JS_META, s,
                                            strlen(s)) != 0) {
        SRV_DEBUG("js", "meta report to %s not queued", to);
    } else if (to == NULL) {
        (void)srv_cluster_broadcast_kind(jc->cl, SRV_CLUSTER_JS_META, s,
                                         strlen(s));
    }
    free(s);
}

static void on_meta_frame(void *arg, const char *from, const uint8_t *data,
                          size_t len)
{
    struct srv_jsc *jc = arg;
    json_t *o = json_loadb((const char *)data, len, 0, NULL);
    const char *url = json_string_value(json_object_get(o, "url"));
    const char *inc = json_string_value(json_object_get(o, "inc"));
    const char *seeds = json_string_value(json_object_get(o, "seeds"));
    const char *fp = json_string_value(json_object_get(o, "fp"));
    json_int_t state = json_integer_value(json_object_get(o, "state"));
    struct jsc_node *n = node_by_name(jc, from, true);
    if (n == NULL || url == NULL || inc == NULL || seeds == NULL ||
        fp == NULL || state < SRV_JSC_EMPTY || state > SRV_JSC_WAITING) {
        SRV_WARN("js", "ignoring a malformed JetStream meta report from %s",
                 from);
        json_decref(o);
        return;
    }
    n->up = true;
    n->reported = true;
    n->inc = strtoull(inc, NULL, 16);
    n->fp = strtoull(fp, NULL, 16);
    n->state = (enum srv_jsc_state)state;
    n->join = json_is_true(json_object_get(o, "join"));
    char terr[KEEL_ERRMSG_MAX];
    if (srv_tags_parse(json_object_get(o, "tags"), &n->tags, terr) != 0) {
        SRV_WARN("js", "the meta report of %s has tags keeld cannot read (%s)",
                 from, terr);
    }
    snprintf(n->url, sizeof n->url, "%s", url);
    snprintf(n->seeds, sizeof n->seeds, "%s", seeds);
    json_decref(o);
}

static void on_peer(void *arg, const char *name, bool up)
{
    struct srv_jsc *jc = arg;
    struct jsc_node *n = node_by_name(jc, name, true);
    if (n != NULL) {
        n->up = up;
        /* A report that arrived before this callback stays (the peer
         * sends it once per link); a link down forgets it. */
        n->reported = up && n->reported;
    }
    if (up) {
        send_meta(jc, name);
        jc->announce_now = true;
    }
}

/* Say why (once per change): ERROR for a refusal, INFO otherwise. */
static void boot_say(struct srv_jsc *jc, enum srv_jsc_boot b, const char *why)
{
    if (strcmp(why, jc->why) == 0) {
        return;
    }
    if (b == SRV_JSC_BOOT_REFUSE) {
        SRV_ERROR("js", "JetStream meta group not created: %s", why);
    } else {
        SRV_INFO("js", "JetStream meta group: %s", why);
    }
    snprintf(jc->why, sizeof jc->why, "%s", why);
}

/* The seed set from the identities the links learned; a change is told
 * to every peer at once. Returns false while a route's node is unknown
 * (why says which). */
static bool seeds_refresh(struct srv_jsc *jc, char *why)
{
    const char *names[SRV_CLUSTER_NODES_MAX];
    char set[SRV_JSC_SEEDS_BYTES];
    char err[KEEL_ERRMSG_MAX];
    size_t n = 0;
    const char *pending =
        srv_cluster_seed_names(jc->cl, names, SRV_CLUSTER_NODES_MAX, &n);
    set[0] = '\0';
    if (pending != NULL) {
        snprintf(why, SRV_JSC_WHY_BYTES,
                 "waiting to learn which node route %s is (its link is "
                 "not up yet)",
                 pending);
    } else if (srv_jsc_seed_set(jc->self, names, n, set, sizeof set, err) !=
               0) {
        snprintf(why, SRV_JSC_WHY_BYTES, "%s", err);
    }
    if (strcmp(set, jc->seeds) != 0) {
        snprintf(jc->seeds, sizeof jc->seeds, "%s", set);
        if (set[0] != '\0') {
            SRV_INFO("js", "seed set: %s", set);
        }
        send_meta(jc, NULL);
    }
    return set[0] != '\0';
}

/* A node restarted before it was added (its meta group open with no
 * configuration) still joins through its solo seed: say so again. */
static void joining_refresh(struct srv_jsc *jc)
{
    if (jc->joining || jc->seeds[0] == '\0' || jc->js->meta_cfg.n > 0) {
        return;
    }
    for (size_t i = 0; i < SRV_JSC_NODES_MAX; i++) {
        const struct jsc_node *n = &jc->nodes[i];
        struct srv_jsc_report r = {
            .name = n->name, .seeds = n->seeds, .state = n->state};
        if (n->used && n->up && n->reported && srv_jsc_report_solo(&r) &&
            strcmp(n->name, jc->self) != 0 &&
            srv_jsc_set_has(jc->seeds, n->name)) {
            SRV_INFO("js",
                     "JetStream meta group: this node joins through seed "
                     "%s",
                     n->name);
            jc->joining = true;
            send_meta(jc, NULL);
            return;
        }
    }
}

/* Bootstrap decision of an empty node, with the reports of linked peers;
 * seeds_why says what its own seed set waits for ("" when known). */
static void boot_check(struct srv_jsc *jc, const char *seeds_why)
{
    struct srv_jsc_report self = {.name = jc->self,
                                  .url = jc->cl->url,
                                  .inc = jc->inc,
                                  .state = SRV_JSC_EMPTY,
                                  .seeds = jc->seeds};
    struct srv_jsc_report peers[SRV_JSC_NODES_MAX];
    struct raft_config cfg;
    char why[SRV_JSC_WHY_BYTES];
    size_t np = 0;
    if (jc->seeds[0] == '\0') {
        boot_say(jc, SRV_JSC_BOOT_WAIT, seeds_why);
        return;
    }
    for (size_t i = 0; i < SRV_JSC_NODES_MAX; i++) {
        const struct jsc_node *n = &jc->nodes[i];
        if (n->used && n->up && n->reported) {
            peers[np++] = (struct srv_jsc_report){.name = n->name,
                                                  .url = n->url,
                                                  .inc = n->inc,
                                                  .state = n->state,
                                                  .seeds = n->seeds,
                                                  .fp = n->fp};
        }
    }
    enum srv_jsc_boot b = srv_jsc_boot_decide(&self, peers, np, &cfg, why);
    uint64_t waited = now_ms(jc) - jc->attach_ms;
    if (b == SRV_JSC_BOOT_CREATE && srv_jsc_report_solo(&self) &&
        waited < SRV_JSC_SOLO_WAIT_MS) {
        /* The nodes of an existing cluster redial a restarted seed within
         * the backoff maximum: a seed whose data directory was wiped
         * hears of the meta group first and joins it. */
        snprintf(why, sizeof why,
                 "this node is its only seed: it starts the meta group "
                 "alone after %d ms unless a node with one links first",
                 SRV_JSC_SOLO_WAIT_MS);
        b = SRV_JSC_BOOT_WAIT;
    }
    if (b == SRV_JSC_BOOT_CREATE) {
        char err[KEEL_ERRMSG_MAX];
        SRV_INFO("js",
                 "every seed is connected and empty: creating the "
                 "JetStream meta group (%u voters)",
                 cfg.n);
        if (srv_js_meta_bootstrap(jc->js, &cfg, err) != 0) {
            SRV_ERROR("js", "JetStream meta group not created: %s", err);
            return;
        }
        jc->state = SRV_JSC_MEMBER;
        jc->boot_fp = srv_jsc_config_fp(&cfg);
        send_meta(jc, NULL);
        return;
    }
    if (b == SRV_JSC_BOOT_JOIN || b == SRV_JSC_BOOT_JOIN_SEED) {
        char err[KEEL_ERRMSG_MAX];
        jc->state = SRV_JSC_WAITING;
        jc->joining = b == SRV_JSC_BOOT_JOIN_SEED;
        /* The meta group on an empty log with no configuration: it takes
         * the leader's AppendEntries once an operator adds this node. */
        if (srv_js_meta_bootstrap(jc->js, NULL, err) != 0) {
            SRV_ERROR("js", "JetStream meta group not opened: %s", err);
        }
        send_meta(jc, NULL);
    }
    boot_say(jc, b, why);
}

/* ---- placement ---- */

/* Groups the meta state places on node (one per stream placed there). */
static uint32_t hosted_by(const struct srv_js *js, raft_node node)
{
    uint32_t n = 0;
    /* Bounded by SRV_JS_STREAMS_MAX x SRV_JS_REPLICAS_MAX. */
    for (uint32_t i = 0; i < js->nstreams; i++) {
        const struct srv_jsc_placement *pl = &js->streams[i]->place;
        for (uint32_t k = 0; k < pl->n; k++) {
            n += pl->m[k].node == node ? 1 : 0;
        }
    }
    return n;
}

/* (node, inc) is a member of pl: a node whose disk was replaced (same
 * node, new incarnation) is not, and may take the replica again. */
static bool placed_on(const struct srv_jsc_placement *pl, raft_node node,
                      raft_incarnation inc)
{
    for (uint32_t i = 0; pl != NULL && i < pl->n; i++) {
        if (pl->m[i].node == node && pl->m[i].inc == inc) {
            return true;
        }
    }
    return false;
}

const struct srv_tags *srv_jsc_self_tags(const struct srv_jsc *jc)
{
    static const struct srv_tags none;
    const struct srv_server *srv = jc->js->srv;
    return srv != NULL && srv->cfg != NULL ? &srv->cfg->server_tags : &none;
}

const struct srv_tags *srv_jsc_tags_of(const struct srv_jsc *jc,
                                       const char *name)
{
    if (strcmp(name, jc->self) == 0) {
        return srv_jsc_self_tags(jc);
    }
    for (size_t i = 0; i < SRV_JSC_NODES_MAX; i++) {
        const struct jsc_node *n = &jc->nodes[i];
        if (n->used && n->reported && strcmp(n->name, name) == 0) {
            return &n->tags;
        }
    }
    return NULL;
}

/* Candidates for a placement: meta voters linked now (a placement on a
 * node that is down could not elect a leader) whose tags hold every tag
 * of want, none of those in skip. */
static size_t candidates(struct srv_jsc *jc,
                         const struct srv_jsc_placement *skip,
                         const struct srv_tags *want,
                         struct srv_jsc_member *cand, uint32_t *hosted)
{
    const struct srv_js *js = jc->js;
    size_t n = 0;
    ASSERT(js->meta_cfg.n <= RAFT_SERVERS_MAX);
    for (uint32_t i = 0; i < js->meta_cfg.n; i++) {
        const struct raft_server *v = &js->meta_cfg.servers[i];
        const char *name = srv_jsc_name_of(jc, v->node);
        /* With tags asked for, a node counts once it reported its own. */
        const struct srv_tags *tags =
            name != NULL && want->n > 0 ? srv_jsc_tags_of(jc, name) : NULL;
        if (v->role != RAFT_VOTER || name == NULL ||
            !srv_jsc_peer_up(jc, name) ||
            placed_on(skip, v->node, v->incarnation) ||
            (want->n > 0 && (tags == NULL || !srv_tags_match(tags, want)))) {
            continue;
        }
        snprintf(cand[n].name, sizeof cand[n].name, "%s", name);
        cand[n].node = v->node;
        cand[n].inc = v->incarnation;
        cand[n].added = false;
        hosted[n] = hosted_by(js, v->node);
        n++;
    }
    return n;
}

/* Why no placement of r replicas was found among the n candidates that
 * match want: KEEL_ENOENT when tags were asked for (too few nodes carry
 * them, as nats-server words it: a config the client must change), else
 * KEEL_ELIMIT (too few voters up now: it passes). */
static int no_peers(const struct srv_tags *want, uint32_t r, size_t n,
                    char *errmsg)
{
    char tags[SRV_TAGS_MAX * (SRV_TAG_BYTES + 4) + 4];
    if (want->n > 0) {
        srv_tags_text(want, tags, sizeof tags);
        return keel_err(KEEL_ENOENT, errmsg,
                        "no suitable peers for placement, tags not matched %s "
                        "(%u replicas asked, %zu JetStream nodes up with "
                        "those tags)",
                        tags, r, n);
    }
    return keel_err(KEEL_ELIMIT, errmsg,
                    "%u replicas asked, %zu JetStream nodes are up", r, n);
}

int srv_jsc_place_replacement(struct srv_jsc *jc,
                              const struct srv_jsc_placement *cur,
                              const struct srv_tags *want,
                              struct srv_jsc_member *out, char *errmsg)
{
    struct srv_jsc_member cand[RAFT_SERVERS_MAX];
    uint32_t hosted[RAFT_SERVERS_MAX];
    size_t chosen[1];
    size_t n = candidates(jc, cur, want, cand, hosted);
    if (srv_jsc_place(cand, n, hosted, 1, chosen) != 0) {
        return want->n > 0 ? no_peers(want, cur->n + 1, n, errmsg)
                           : keel_err(KEEL_ELIMIT, errmsg,
                                      "no JetStream node is up that does not "
                                      "host the stream already: add one (keel "
                                      "cluster add-peer)");
    }
    *out = cand[chosen[0]];
    out->added = true;
    return 0;
}

int srv_jsc_place_stream(struct srv_jsc *jc, uint32_t r,
                         const struct srv_jsc_placement *prefer,
                         const struct srv_tags *want,
                         struct srv_jsc_placement *pl, char *errmsg)
{
    struct srv_jsc_member cand[RAFT_SERVERS_MAX];
    uint32_t hosted[RAFT_SERVERS_MAX];
    size_t chosen[RAFT_SERVERS_MAX];
    memset(pl, 0, sizeof *pl);
    size_t n = candidates(jc, NULL, want, cand, hosted);
    for (size_t i = 0; prefer != NULL && i < n; i++) {
        /* Least loaded first: a preferred node counts as hosting nothing,
         * every other one a stream more than it does. */
        hosted[i] = placed_on(prefer, cand[i].node, cand[i].inc)
                        ? 0
                        : (hosted[i] < UINT32_MAX ? hosted[i] + 1 : hosted[i]);
    }
    if (srv_jsc_place(cand, n, hosted, r, chosen) != 0) {
        return no_peers(want, r, n, errmsg);
    }
    if (getrandom(pl->gid, sizeof pl->gid, 0) != (ssize_t)sizeof pl->gid) {
        return keel_err(KEEL_EIO, errmsg, "no random group id");
    }
    for (uint32_t i = 0; i < r; i++) {
        pl->m[i] = cand[chosen[i]];
    }
    pl->n = r;
    ASSERT(pl->n <= SRV_JS_REPLICAS_MAX);
    return 0;
}

/* ---- lifecycle ---- */

static void attach(struct srv_jsc *jc, struct srv_cluster *cl)
{
    jc->cl = cl;
    jc->attach_ms = now_ms(jc);
    if (srv_cluster_register_kind(cl, SRV_CLUSTER_JS_META, on_meta_frame, jc) !=
            0 ||
        srv_cluster_register_kind(cl, SRV_CLUSTER_JS_LEADER, on_leader_frame,
                                  jc) != 0) {
        SRV_ERROR("js", "JetStream cluster frames already have a handler");
    }
    srv_cluster_set_peer_cb(cl, on_peer, jc);
    for (size_t i = 0; i < jc->ngroups; i++) {
        if (group_to_cluster(jc, &jc->groups[i]) != 0) {
            SRV_ERROR("js", "a JetStream group could not join the links");
        }
    }
    const char *names[SRV_JSC_NODES_MAX];
    size_t n = srv_cluster_peers(cl, names, SRV_JSC_NODES_MAX);
    for (size_t i = 0; i < n; i++) {
        on_peer(jc, names[i], true); /* links up before we attached */
    }
}

static void on_tick(uv_timer_t *t)
{
    struct srv_jsc *jc = t->data;
    if (jc->stopping) {
        return;
    }
    if (jc->cl == NULL) {
        struct srv_cluster *cl = srv_js_server(jc->js)->cluster;
        if (cl == NULL) {
            return;
        }
        attach(jc, cl);
    }
    char why[SRV_JSC_WHY_BYTES] = "";
    /* Every state reports its seed set: a member that bootstrapped a
     * moment ago (or restarted since) is recognised by the seeds still
     * deciding. */
    (void)seeds_refresh(jc, why);
    if (jc->state == SRV_JSC_EMPTY) {
        boot_check(jc, why);
    } else {
        joining_refresh(jc);
    }
    uint64_t now = now_ms(jc);
    if (now - jc->last_report_ms >= SRV_JSC_REPORT_MS) {
        /* Say it again: a report lost with a replaced link would leave a
         * new node waiting for a seed's report, or the meta leader
         * refusing to add a node that waits. */
        jc->last_report_ms = now;
        send_meta(jc, NULL);
    }
    if (jc->announce_now || now - jc->last_announce_ms >= SRV_JSC_ANNOUNCE_MS) {
        jc->announce_now = false;
        jc->last_announce_ms = now;
        announce(jc);
        leaders_expire(jc);
    }
}

int srv_jsc_create(struct srv_js *js, const char *name, raft_incarnation inc,
                   const char *routes, bool member, struct srv_jsc **out,
                   char *errmsg)
{
    *out = NULL;
    if (name == NULL || name[0] == '\0' || strlen(name) >= SRV_JSC_NAME_BYTES) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "clustered JetStream needs a node name: give each "
                        "node a unique, stable -n/--name");
    }
    struct srv_jsc *jc = calloc(1, sizeof *jc);
    if (jc == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "JetStream cluster layer");
    }
    /* Checked here (a bad route is a configuration error); the seed set
     * itself is learned on the links. */
    int rv = srv_jsc_seeds_canon(routes, jc->seeds, sizeof jc->seeds, errmsg);
    jc->seeds[0] = '\0';
    jc->groups = calloc(JSC_GROUPS_MAX, sizeof *jc->groups);
    if (rv == 0 && jc->groups == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "JetStream cluster groups");
    }
    if (rv != 0) {
        free(jc->groups);
        free(jc);
        return rv == KEEL_ENOMEM ? rv : KEEL_ECONFIG;
    }
    jc->js = js;
    jc->inc = inc;
    jc->state = member ? SRV_JSC_MEMBER : SRV_JSC_EMPTY;
    snprintf(jc->self, sizeof jc->self, "%s", name);
    jc->self_node = srv_jsc_node_id(name);
    srv_hmap_init(&jc->leaders);
    uv_timer_init(js->loop, &jc->timer);
    jc->timer.data = jc;
    jc->timer_open = true;
    uv_timer_start(&jc->timer, on_tick, 0, SRV_JSC_TICK_MS);
    *out = jc;
    return 0;
}

void srv_jsc_stop(struct srv_jsc *jc)
{
    if (jc == NULL || jc->stopping) {
        return;
    }
    jc->stopping = true;
    if (jc->timer_open) {
        uv_close((uv_handle_t *)&jc->timer, NULL);
        jc->timer_open = false;
    }
    if (jc->cl != NULL) {
        /* Clearing a handler cannot fail. */
        int rv =
            srv_cluster_register_kind(jc->cl, SRV_CLUSTER_JS_META, NULL, NULL);
        rv |= srv_cluster_register_kind(jc->cl, SRV_CLUSTER_JS_LEADER, NULL,
                                        NULL);
        ASSERT(rv == 0);
        srv_cluster_set_peer_cb(jc->cl, NULL, NULL);
        for (size_t i = 0; i < jc->ngroups; i++) {
            if (jc->groups[i].on_cluster) {
                (void)srv_cluster_unregister_group(jc->cl, jc->groups[i].gid);
            }
        }
    }
    jc->ngroups = 0;
}

void srv_jsc_free(struct srv_jsc *jc)
{
    if (jc == NULL) {
        return;
    }
    srv_hmap_close_free(&jc->leaders);
    srv_js_wire_free(&jc->wire);
    free(jc->groups);
    free(jc);
}
