/* srv_js_meta_place: the pure decisions of clustered JetStream: node ids,
 * the canonical seed list, the meta bootstrap decision and stream
 * placement. No I/O, no clock: unit tested in test_srv_js_placement.c. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xxhash.h>

#include "keel/bytes.h"
#include "keel/error.h"
#include "srv_js_cluster.h"

raft_node srv_jsc_node_id(const char *name)
{
    ASSERT(name != NULL);
    uint64_t h = XXH3_64bits(name, strlen(name));
    return h == 0 ? 1 : h;
}

/* host:port of one URL (nats://, nats-route://, route://, user@ dropped);
 * 0 or KEEL_EINVAL. */
static int url_norm(const char *url, char *out, size_t cap)
{
    const char *p = strstr(url, "://");
    p = p != NULL ? p + 3 : url;
    const char *at = strrchr(p, '@');
    if (at != NULL) {
        p = at + 1;
    }
    size_t len = strcspn(p, "/");
    const char *colon = memrchr(p, ':', len);
    if (len == 0 || colon == NULL || colon == p || colon + 1 == p + len ||
        len >= cap) {
        return KEEL_EINVAL;
    }
    for (const char *d = colon + 1; d < p + len; d++) {
        if (*d < '0' || *d > '9') {
            return KEEL_EINVAL;
        }
    }
    memcpy(out, p, len);
    out[len] = '\0';
    return 0;
}

/* Append ",item" (no comma first) to out at *used; 0 or KEEL_ELIMIT
 * (out emptied). */
static int join_append(char *out, size_t cap, size_t *used, const char *item,
                       char *errmsg)
{
    ASSERT(*used < cap);
    int w = snprintf(out + *used, cap - *used, "%s%s", *used ? "," : "", item);
    if (w < 0 || (size_t)w >= cap - *used) {
        out[0] = '\0';
        return keel_err(KEEL_ELIMIT, errmsg, "seed list too long");
    }
    *used += (size_t)w;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static int cmp_pstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int srv_jsc_seeds_canon(const char *routes, char *out, size_t cap, char *errmsg)
{
    char urls[RAFT_SERVERS_MAX][SRV_JSC_URL_BYTES];
    char buf[SRV_JSC_SEEDS_BYTES];
    char *save = NULL;
    size_t n = 0;
    ASSERT(cap > 0);
    out[0] = '\0';
    if (strlen(routes) >= sizeof buf) {
        return keel_err(KEEL_ELIMIT, errmsg, "--routes is too long");
    }
    snprintf(buf, sizeof buf, "%s", routes);
    for (char *t = strtok_r(buf, ", \t", &save); t != NULL;
         t = strtok_r(NULL, ", \t", &save)) {
        if (n == RAFT_SERVERS_MAX) {
            return keel_err(KEEL_ELIMIT, errmsg,
                            "--routes names more than %d seeds",
                            RAFT_SERVERS_MAX);
        }
        if (url_norm(t, urls[n], sizeof urls[n]) != 0) {
            return keel_err(KEEL_EINVAL, errmsg,
                            "route '%s' is not nats://host:port", t);
        }
        n++;
    }
    qsort(urls, n, sizeof urls[0], cmp_str);
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(urls[i], urls[i - 1]) == 0) {
            continue; /* listed twice */
        }
        int rv = join_append(out, cap, &used, urls[i], errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    ASSERT(used < cap);
    return 0;
}

int srv_jsc_seed_set(const char *self, const char *const *names, size_t n,
                     char *out, size_t cap, char *errmsg)
{
    const char *v[RAFT_SERVERS_MAX + 1];
    size_t nv = 0;
    ASSERT(cap > 0);
    ASSERT(self != NULL && self[0] != '\0');
    out[0] = '\0';
    v[nv++] = self;
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t k = 0; k < nv && !dup; k++) {
            dup = strcmp(v[k], names[i]) == 0;
        }
        if (dup) {
            continue; /* two URLs of one node, or this node's own */
        }
        if (nv == RAFT_SERVERS_MAX) {
            return keel_err(KEEL_ELIMIT, errmsg,
                            "--routes names more than %d nodes",
                            RAFT_SERVERS_MAX);
        }
        v[nv++] = names[i];
    }
    qsort(v, nv, sizeof v[0], cmp_pstr);
    size_t used = 0;
    for (size_t i = 0; i < nv; i++) {
        if (strchr(v[i], ',') != NULL || v[i][0] == '\0') {
            out[0] = '\0';
            return keel_err(KEEL_EINVAL, errmsg,
                            "node name '%s' has a comma: give every node a "
                            "name without one (-n)",
                            v[i]);
        }
        int rv = join_append(out, cap, &used, v[i], errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    ASSERT(used < cap);
    return 0;
}

/* The report of the node called name: self or a peer; NULL when none. */
static const struct srv_jsc_report *
report_for(const struct srv_jsc_report *self,
           const struct srv_jsc_report *peers, size_t npeers, const char *name)
{
    if (strcmp(self->name, name) == 0) {
        return self;
    }
    for (size_t i = 0; i < npeers; i++) {
        if (peers[i].name != NULL && strcmp(peers[i].name, name) == 0) {
            return &peers[i];
        }
    }
    return NULL;
}

/* A peer that knows its seed set (every route's node identified). */
static bool seeds_known(const struct srv_jsc_report *p)
{
    return p->seeds != NULL && p->seeds[0] != '\0';
}

bool srv_jsc_set_has(const char *seeds, const char *name)
{
    size_t len = strlen(name);
    /* Bounded: the set holds at most RAFT_SERVERS_MAX names. */
    for (const char *p = seeds; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n == len && memcmp(p, name, len) == 0) {
            return true;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return false;
}

bool srv_jsc_report_solo(const struct srv_jsc_report *r)
{
    return seeds_known(r) && strcmp(r->seeds, r->name) == 0;
}

/* A linked solo seed of self's set other than self (it starts the meta
 * group alone and adds the nodes that name it), or NULL. */
static const struct srv_jsc_report *
solo_seed_of(const struct srv_jsc_report *self,
             const struct srv_jsc_report *peers, size_t npeers)
{
    for (size_t i = 0; i < npeers; i++) {
        const struct srv_jsc_report *p = &peers[i];
        if ((p->state == SRV_JSC_EMPTY || p->state == SRV_JSC_MEMBER) &&
            srv_jsc_report_solo(p) && srv_jsc_set_has(self->seeds, p->name)) {
            return p;
        }
    }
    return NULL;
}

/* seeds is {name, x}: x (the one seed of a single-seed setup) into out. */
static bool single_seed_of(const char *seeds, const char *name, char *out,
                           size_t cap)
{
    const char *comma = strchr(seeds, ',');
    if (comma == NULL || strchr(comma + 1, ',') != NULL ||
        !srv_jsc_set_has(seeds, name)) {
        return false;
    }
    size_t first = (size_t)(comma - seeds);
    bool name_first = first == strlen(name) && memcmp(seeds, name, first) == 0;
    const char *x = name_first ? comma + 1 : seeds;
    size_t len = name_first ? strlen(comma + 1) : first;
    if (len >= cap) {
        return false;
    }
    memcpy(out, x, len);
    out[len] = '\0';
    return true;
}

/* p and self both name one seed, the same: two joiners of a single-seed
 * cluster whose seed has not reported yet, not a disagreement. */
static bool same_single_seed(const struct srv_jsc_report *self,
                             const struct srv_jsc_report *p)
{
    char a[SRV_JSC_NAME_BYTES];
    char b[SRV_JSC_NAME_BYTES];
    return single_seed_of(self->seeds, self->name, a, sizeof a) &&
           single_seed_of(p->seeds, p->name, b, sizeof b) && strcmp(a, b) == 0;
}

/* p has the meta group. A seed that bootstrapped from this same seed set a
 * moment ago is a candidate instead (its fingerprint is checked against
 * ours). */
static bool peer_has_group(const struct srv_jsc_report *self,
                           const struct srv_jsc_report *p)
{
    bool same_boot =
        p->fp != 0 && seeds_known(p) && strcmp(p->seeds, self->seeds) == 0;
    return p->state == SRV_JSC_MEMBER && !same_boot;
}

/* p is empty with a seed list other than ours. A node that names this solo
 * seed joins through it. */
static bool peer_disagrees(const struct srv_jsc_report *self,
                           const struct srv_jsc_report *p)
{
    bool joins_us =
        srv_jsc_report_solo(self) && srv_jsc_set_has(p->seeds, self->name);
    return p->state == SRV_JSC_EMPTY && seeds_known(p) && !joins_us &&
           !same_single_seed(self, p) && strcmp(p->seeds, self->seeds) != 0;
}

/* Peers that block a bootstrap: one with the meta group (JOIN), a solo
 * seed of ours (JOIN_SEED), or a seed set other than ours (REFUSE). JOIN
 * and JOIN_SEED win over REFUSE, the first such peer names it; 0 when
 * none. */
static enum srv_jsc_boot check_peers(const struct srv_jsc_report *self,
                                     const struct srv_jsc_report *peers,
                                     size_t npeers, char *why)
{
    const struct srv_jsc_report *solo =
        srv_jsc_report_solo(self) ? NULL : solo_seed_of(self, peers, npeers);
    const struct srv_jsc_report *other = NULL;

    if (solo != NULL) {
        snprintf(why, SRV_JSC_WHY_BYTES,
                 "seed %s starts the JetStream meta group alone: this node "
                 "joins it (its leader adds it as a learner, then a voter)",
                 solo->name);
        return SRV_JSC_BOOT_JOIN_SEED;
    }
    for (size_t i = 0; i < npeers; i++) {
        if (peer_has_group(self, &peers[i])) {
            snprintf(why, SRV_JSC_WHY_BYTES,
                     "node %s already has a JetStream meta group: this "
                     "empty node waits to be added to it (keel cluster "
                     "add-peer)",
                     peers[i].name);
            return SRV_JSC_BOOT_JOIN;
        }
        if (other == NULL && peer_disagrees(self, &peers[i])) {
            other = &peers[i];
        }
    }
    if (other != NULL) {
        snprintf(why, SRV_JSC_WHY_BYTES,
                 "node %s has the seed list [%s], this node [%s]: give "
                 "every node the same --routes",
                 other->name, other->seeds, self->seeds);
        return SRV_JSC_BOOT_REFUSE;
    }
    return 0;
}

static bool config_has(const struct raft_config *cfg, raft_node id)
{
    for (uint32_t i = 0; i < cfg->n; i++) {
        if (cfg->servers[i].node == id) {
            return true;
        }
    }
    return false;
}

/* Why seed name (report r, NULL when not linked) is not ready to
 * bootstrap; false when it is. */
static bool seed_not_ready(const struct srv_jsc_report *self,
                           const struct srv_jsc_report *r, const char *name,
                           char *why)
{
    if (r == NULL ||
        (r->state != SRV_JSC_EMPTY && r->state != SRV_JSC_MEMBER)) {
        snprintf(why, SRV_JSC_WHY_BYTES,
                 "waiting for seed %s to connect and report an empty "
                 "data directory",
                 name);
        return true;
    }
    if (r != self && r->state == SRV_JSC_EMPTY && !seeds_known(r)) {
        snprintf(why, SRV_JSC_WHY_BYTES,
                 "waiting for seed %s to learn which node each of its "
                 "routes is",
                 name);
        return true;
    }
    return false;
}

enum srv_jsc_boot srv_jsc_boot_decide(const struct srv_jsc_report *self,
                                      const struct srv_jsc_report *peers,
                                      size_t npeers, struct raft_config *cfg,
                                      char *why)
{
    char buf[SRV_JSC_SEEDS_BYTES];
    char *save = NULL;
    ASSERT(self->state == SRV_JSC_EMPTY);
    ASSERT(cfg != NULL && why != NULL);
    ASSERT(seeds_known(self));
    memset(cfg, 0, sizeof *cfg);
    why[0] = '\0';
    enum srv_jsc_boot b = check_peers(self, peers, npeers, why);
    if (b != 0) {
        return b;
    }
    if (strlen(self->seeds) >= sizeof buf) {
        snprintf(why, SRV_JSC_WHY_BYTES, "seed list too long");
        return SRV_JSC_BOOT_REFUSE;
    }
    snprintf(buf, sizeof buf, "%s", self->seeds);
    /* Bounded: the seed set holds at most RAFT_SERVERS_MAX names. */
    for (char *u = strtok_r(buf, ",", &save); u != NULL;
         u = strtok_r(NULL, ",", &save)) {
        const struct srv_jsc_report *r = report_for(self, peers, npeers, u);
        if (seed_not_ready(self, r, u, why)) {
            memset(cfg, 0, sizeof *cfg);
            return SRV_JSC_BOOT_WAIT;
        }
        raft_node id = srv_jsc_node_id(r->name);
        if (config_has(cfg, id) || cfg->n == RAFT_SERVERS_MAX) {
            snprintf(why, SRV_JSC_WHY_BYTES,
                     "seed %s hashes like another node's name: rename "
                     "one of them (-n)",
                     u);
            memset(cfg, 0, sizeof *cfg);
            return SRV_JSC_BOOT_REFUSE;
        }
        cfg->servers[cfg->n++] = (struct raft_server){
            .node = id, .incarnation = r->inc, .role = RAFT_VOTER};
    }
    ASSERT(config_has(cfg, srv_jsc_node_id(self->name)));
    uint64_t fp = srv_jsc_config_fp(cfg);
    for (size_t i = 0; i < npeers; i++) {
        if (peers[i].state == SRV_JSC_MEMBER && peers[i].fp != fp) {
            snprintf(why, SRV_JSC_WHY_BYTES,
                     "node %s has a JetStream meta group of another "
                     "configuration: this empty node waits to be added",
                     peers[i].name);
            memset(cfg, 0, sizeof *cfg);
            return SRV_JSC_BOOT_JOIN;
        }
    }
    return SRV_JSC_BOOT_CREATE;
}

uint64_t srv_jsc_config_fp(const struct raft_config *cfg)
{
    uint64_t words[2 * RAFT_SERVERS_MAX];
    ASSERT(cfg->n <= RAFT_SERVERS_MAX);
    for (uint32_t i = 0; i < cfg->n; i++) {
        words[2 * i] = cfg->servers[i].node;
        words[2 * i + 1] = cfg->servers[i].incarnation;
    }
    uint64_t h = XXH3_64bits(words, 2 * cfg->n * sizeof words[0]);
    return h == 0 ? 1 : h;
}

struct place_key {
    const struct srv_jsc_member *m;
    uint32_t hosted;
    size_t idx;
};

static int cmp_load(const void *a, const void *b)
{
    const struct place_key *x = a;
    const struct place_key *y = b;
    if (x->hosted != y->hosted) {
        return x->hosted < y->hosted ? -1 : 1;
    }
    return strcmp(x->m->name, y->m->name);
}

static int cmp_name(const void *a, const void *b)
{
    const struct place_key *x = a;
    const struct place_key *y = b;
    return strcmp(x->m->name, y->m->name);
}

int srv_jsc_place(const struct srv_jsc_member *cand, size_t n,
                  const uint32_t *hosted, uint32_t r, size_t *chosen)
{
    struct place_key k[RAFT_SERVERS_MAX];
    if (r == 0 || r > n || n > RAFT_SERVERS_MAX) {
        return KEEL_ELIMIT;
    }
    ASSERT(cand != NULL && hosted != NULL);
    for (size_t i = 0; i < n; i++) {
        k[i] = (struct place_key){.m = &cand[i], .hosted = hosted[i], .idx = i};
    }
    qsort(k, n, sizeof k[0], cmp_load);
    qsort(k, r, sizeof k[0], cmp_name);
    for (uint32_t i = 0; i < r; i++) {
        chosen[i] = k[i].idx;
    }
    ASSERT(r <= n);
    return 0;
}

int srv_jsc_placement_to_json(const struct srv_jsc_placement *pl, json_t *e)
{
    char hex[2 * SRV_JSC_GID_BYTES + 1];
    ASSERT(pl->n <= SRV_JS_REPLICAS_MAX);
    for (size_t i = 0; i < SRV_JSC_GID_BYTES; i++) {
        snprintf(hex + 2 * i, 3, "%02x", pl->gid[i]);
    }
    json_t *a = json_array();
    int rv = a == NULL ? KEEL_ENOMEM : 0;
    for (uint32_t i = 0; rv == 0 && i < pl->n; i++) {
        char node[24];
        char inc[24];
        snprintf(node, sizeof node, "%016" PRIx64, pl->m[i].node);
        snprintf(inc, sizeof inc, "%016" PRIx64, pl->m[i].inc);
        json_t *o = json_pack("{s:s, s:s, s:s}", "name", pl->m[i].name, "node",
                              node, "inc", inc);
        if (o != NULL && pl->m[i].added) {
            json_object_set_new(o, "added", json_true());
        }
        if (o == NULL || json_array_append_new(a, o) != 0) {
            rv = KEEL_ENOMEM;
        }
    }
    if (rv == 0 && (json_object_set_new(e, "group", json_string(hex)) != 0 ||
                    json_object_set_new(e, "placement", a) != 0)) {
        return KEEL_ENOMEM; /* a was consumed */
    }
    if (rv != 0) {
        json_decref(a);
    }
    return rv;
}

/* 2*len hex digits into b; false when s is not exactly that. */
static bool hex_bytes(const char *s, uint8_t *b, size_t len)
{
    if (s == NULL || strlen(s) != 2 * len) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned v = 0;
        if (sscanf(s + 2 * i, "%2x", &v) != 1 ||
            !isxdigit((unsigned char)s[2 * i]) ||
            !isxdigit((unsigned char)s[2 * i + 1])) {
            return false;
        }
        b[i] = (uint8_t)v;
    }
    return true;
}

static bool hex_u64(const char *s, uint64_t *v)
{
    uint8_t b[8];
    if (!hex_bytes(s, b, sizeof b)) {
        return false;
    }
    *v = keel_get_be(b, sizeof b);
    return true;
}

int srv_jsc_placement_from_json(const json_t *e, struct srv_jsc_placement *pl)
{
    memset(pl, 0, sizeof *pl);
    const json_t *g = json_object_get(e, "group");
    const json_t *a = json_object_get(e, "placement");
    if (g == NULL) {
        return 0;
    }
    if (!hex_bytes(json_string_value(g), pl->gid, sizeof pl->gid) ||
        !json_is_array(a) || json_array_size(a) == 0 ||
        json_array_size(a) > SRV_JS_REPLICAS_MAX) {
        return KEEL_EPROTO;
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *o = json_array_get(a, i);
        const char *name = json_string_value(json_object_get(o, "name"));
        struct srv_jsc_member *m = &pl->m[i];
        if (name == NULL || name[0] == '\0' || strlen(name) >= sizeof m->name ||
            !hex_u64(json_string_value(json_object_get(o, "node")), &m->node) ||
            !hex_u64(json_string_value(json_object_get(o, "inc")), &m->inc) ||
            m->node == 0) {
            memset(pl, 0, sizeof *pl);
            return KEEL_EPROTO;
        }
        snprintf(m->name, sizeof m->name, "%s", name);
        m->added = json_is_true(json_object_get(o, "added"));
    }
    pl->n = (uint32_t)json_array_size(a);
    ASSERT(pl->n <= SRV_JS_REPLICAS_MAX);
    return 0;
}
