/* Core NATS across nodes: subscription interest propagates over the links
 * as absolute counts per (subject, queue) key, so a resend after a
 * reconnect is idempotent; a publish goes once to each node with matching
 * interest, naming the queue groups that node must serve; the receiver
 * delivers locally and never forwards again (full mesh, one hop), so each
 * subscriber sees a message once.
 */
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_cluster.h"
#include "srv_log.h"
#include "srv_route.h"
#include "srv_server.h"

#define KEY_BYTES_MAX (2 * SRV_CONTROL_LINE_BYTES_MAX + 2)

static size_t make_key(char *key, const char *subj, size_t slen,
                       const char *queue, size_t qlen)
{
    ASSERT(slen + qlen + 1 <= KEY_BYTES_MAX);
    memcpy(key, subj, slen);
    key[slen] = '\0';
    if (qlen > 0) {
        memcpy(key + slen + 1, queue, qlen);
    }
    return slen + 1 + qlen;
}

static void send_interest(struct srv_cluster *cl, struct srv_cluster_link *only,
                          const char *key, size_t key_len, uint64_t count)
{
    size_t slen = strlen(key);
    size_t qlen = key_len - slen - 1;
    uint8_t *buf = srv_cluster_scratch(cl, key_len + 32);
    uint8_t *p = buf;

    if (buf == NULL) {
        return;
    }
    p = srv_mp_put_array(p, 3);
    p = srv_mp_put_str(p, key, slen);
    p = srv_mp_put_str(p, key + slen + 1, qlen);
    p = srv_mp_put_uint(p, count);
    for (size_t i = 0; i < SRV_CLUSTER_LINKS_MAX; i++) {
        struct srv_cluster_link *l =
            only != NULL ? (i == 0 ? only : NULL) : cl->links[i];
        if (l != NULL && l->established && !l->closing) {
            (void)srv_cluster_link_send(l, SRV_CLUSTER_INTEREST, NULL, 0, buf,
                                        (size_t)(p - buf));
        }
    }
}

static void interest_change(struct srv_cluster *cl, const struct srv_sub *sub,
                            int delta)
{
    char key[KEY_BYTES_MAX];
    size_t n = make_key(key, sub->subject, sub->subject_len, sub->queue,
                        sub->queue_len);
    uintptr_t count = (uintptr_t)srv_hmap_get(&cl->interest, key, n);

    if (delta < 0) {
        if (count == 0) {
            return; /* added while the map was out of memory */
        }
        count--;
        if (count == 0) {
            (void)srv_hmap_del(&cl->interest, key, n);
        } else if (srv_hmap_put(&cl->interest, key, n, (void *)count) != 0) {
            return; /* replacing a value does not allocate */
        }
    } else {
        if (cl->interest.count >= SRV_CLUSTER_INTEREST_MAX ||
            srv_hmap_put(&cl->interest, key, n, (void *)(count + 1)) != 0) {
            SRV_WARN("cluster",
                     "cannot track interest in %s: other nodes "
                     "will not forward it",
                     sub->subject);
            return;
        }
        count++;
    }
    send_interest(cl, NULL, key, n, count);
}

void srv_cluster_interest_add(struct srv_cluster *cl, const struct srv_sub *sub)
{
    ASSERT(sub->conn != NULL || sub->fn != NULL);
    interest_change(cl, sub, +1);
}

void srv_cluster_interest_remove(struct srv_cluster *cl,
                                 const struct srv_sub *sub)
{
    ASSERT(sub->conn != NULL || sub->fn != NULL);
    interest_change(cl, sub, -1);
}

void srv_cluster_interest_resend(struct srv_cluster *cl,
                                 struct srv_cluster_link *l)
{
    size_t pos = 0;
    struct srv_hmap_slot *s;

    for (size_t i = 0; i < SRV_CLUSTER_INTEREST_MAX && !l->closing; i++) {
        s = srv_hmap_next(&cl->interest, &pos);
        if (s == NULL) {
            break;
        }
        send_interest(cl, l, s->key, s->key_len, (uintptr_t)s->value);
    }
}

static void rsub_free(struct srv_cluster *cl, struct srv_cluster_rsub *rs)
{
    int rv = srv_sublist_remove(&cl->rsublist, &rs->sub);
    ASSERT(rv == 0);
    /* A match result may still point at it: free after the iteration. */
    srv_server_bury_sub(cl->srv, &rs->sub);
}

void srv_cluster_interest_drop(struct srv_cluster *cl,
                               struct srv_cluster_link *l)
{
    size_t pos = 0;
    struct srv_hmap_slot *s;

    if (cl->srv == NULL) {
        return;
    }
    while ((s = srv_hmap_next(&l->rsubs, &pos)) != NULL) {
        rsub_free(cl, s->value);
    }
    srv_hmap_close(&l->rsubs);
    srv_hmap_init(&l->rsubs);
    cl->snapshot_dirty = true;
}

static struct srv_cluster_rsub *rsub_new(struct srv_cluster_link *l,
                                         const uint8_t *subj, size_t slen,
                                         const uint8_t *queue, size_t qlen)
{
    struct srv_cluster_rsub *rs = calloc(1, sizeof *rs + slen + qlen + 2);
    if (rs == NULL) {
        return NULL;
    }
    char *p = (char *)(rs + 1);
    rs->link = l;
    rs->sub.subject = p;
    rs->sub.subject_len = slen;
    memcpy(p, subj, slen);
    if (qlen > 0) {
        rs->sub.queue = p + slen + 1;
        rs->sub.queue_len = qlen;
        memcpy(p + slen + 1, queue, qlen);
    }
    rs->sub.sid = p + slen; /* empty: never written to a conn */
    return rs;
}

/* A queue name from a peer: printable, no spaces (as SUB allows). A NUL
 * inside it made the sublist's copy shorter than its length, and removing
 * the interest read past it (found by fuzz_cluster_frame). */
static bool queue_name_valid(const uint8_t *q, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (q[i] <= ' ' || q[i] == 0x7f) {
            return false;
        }
    }
    return true;
}

int srv_cluster_on_interest(struct srv_cluster *cl, struct srv_cluster_link *l,
                            const uint8_t *p, size_t len)
{
    struct srv_mp_reader r = {p, p + len};
    const uint8_t *subj, *queue;
    size_t slen = 0, qlen = 0;
    uint32_t n = 0;
    uint64_t count = 0;
    char key[KEY_BYTES_MAX];

    if (srv_mp_get_array(&r, &n) != 0 || n != 3 ||
        srv_mp_get_bytes(&r, &subj, &slen) != 0 ||
        srv_mp_get_bytes(&r, &queue, &qlen) != 0 ||
        srv_mp_get_uint(&r, &count) != 0 || slen + qlen + 1 > KEY_BYTES_MAX ||
        !srv_subject_valid((const char *)subj, slen, true) ||
        !queue_name_valid(queue, qlen)) {
        return KEEL_EPROTO;
    }
    size_t kn =
        make_key(key, (const char *)subj, slen, (const char *)queue, qlen);
    struct srv_cluster_rsub *rs = srv_hmap_get(&l->rsubs, key, kn);
    cl->snapshot_dirty = true;
    if (count == 0) {
        if (rs != NULL) {
            (void)srv_hmap_del(&l->rsubs, key, kn);
            rsub_free(cl, rs);
        }
        return 0;
    }
    if (rs != NULL) {
        rs->count = count;
        return 0;
    }
    if (l->rsubs.count >= SRV_CLUSTER_INTEREST_MAX) {
        return KEEL_ELIMIT;
    }
    rs = rsub_new(l, subj, slen, queue, qlen);
    if (rs == NULL) {
        return KEEL_ENOMEM;
    }
    rs->count = count;
    int rv = srv_sublist_insert(&cl->rsublist, &rs->sub);
    if (rv == 0) {
        rv = srv_hmap_put(&l->rsubs, key, kn, rs);
        if (rv != 0) {
            (void)srv_sublist_remove(&cl->rsublist, &rs->sub);
        }
    }
    if (rv != 0) {
        free(rs);
        return rv == KEEL_EINVAL ? KEEL_EPROTO : rv;
    }
    return 0;
}

int srv_cluster_on_msg(struct srv_cluster *cl, struct srv_cluster_link *l,
                       const uint8_t *p, size_t len)
{
    struct srv_mp_reader r = {p, p + len};
    struct srv_slice queues[SRV_CLUSTER_QUEUES_PER_MSG_MAX];
    struct srv_cmd cmd;
    const uint8_t *subj, *reply, *data, *q;
    size_t slen = 0, rlen = 0, dlen = 0, qlen = 0;
    uint32_t n = 0, nq = 0;
    uint64_t hdr = 0;
    (void)l;

    if (srv_mp_get_array(&r, &n) != 0 || n != 5 ||
        srv_mp_get_bytes(&r, &subj, &slen) != 0 ||
        srv_mp_get_bytes(&r, &reply, &rlen) != 0 ||
        srv_mp_get_uint(&r, &hdr) != 0 || srv_mp_get_array(&r, &nq) != 0 ||
        nq > SRV_CLUSTER_QUEUES_PER_MSG_MAX || slen == 0 ||
        slen > SRV_CONTROL_LINE_BYTES_MAX ||
        rlen > SRV_CONTROL_LINE_BYTES_MAX) {
        return KEEL_EPROTO;
    }
    for (uint32_t i = 0; i < nq; i++) {
        if (srv_mp_get_bytes(&r, &q, &qlen) != 0) {
            return KEEL_EPROTO;
        }
        queues[i].ptr = (const char *)q;
        queues[i].len = qlen;
    }
    if (srv_mp_get_bytes(&r, &data, &dlen) != 0 || hdr > dlen) {
        return KEEL_EPROTO;
    }
    memset(&cmd, 0, sizeof cmd);
    cmd.op = hdr > 0 ? SRV_OP_HPUB : SRV_OP_PUB;
    cmd.subject.ptr = (const char *)subj;
    cmd.subject.len = slen;
    cmd.reply.ptr = (const char *)reply;
    cmd.reply.len = rlen;
    cmd.hdr_bytes = (size_t)hdr;
    cmd.total_bytes = dlen;
    cmd.payload = (const char *)data;
    cl->msgs_received++;
    srv_route_deliver_routed(cl->srv, &cmd, queues, nq);
    return 0;
}

static bool link_up(const struct srv_cluster_link *l)
{
    return l != NULL && l->established && !l->closing;
}

void srv_cluster_pub_begin(struct srv_cluster *cl, const struct srv_cmd *cmd,
                           struct srv_cluster_pub *p)
{
    p->r = NULL;
    if (cl->rsublist.count == 0) {
        return;
    }
    if (srv_sublist_match(&cl->rsublist, cmd->subject.ptr, cmd->subject.len,
                          &p->r) != 0) {
        p->r = NULL;
        return;
    }
    for (size_t i = 0; i < SRV_CLUSTER_QUEUES_PER_MSG_MAX; i++) {
        p->choice[i] = -1;
    }
}

/* Pick among local_n local members and the remote members of g by
 * weight (members per node): -2 for local, else the link slot. */
static int8_t choose(struct srv_cluster *cl, struct srv_sublist_qgroup *g,
                     size_t local_n)
{
    uint64_t w = 0;

    for (size_t i = 0; i < g->n; i++) {
        struct srv_cluster_rsub *rs = (struct srv_cluster_rsub *)g->subs[i];
        if (!rs->sub.removed && link_up(rs->link)) {
            w += rs->count;
        }
    }
    if (w == 0) {
        return -2;
    }
    uint64_t x = srv_cluster_rand(cl) % (local_n + w);
    if (x < local_n) {
        return -2;
    }
    x -= local_n;
    for (size_t i = 0; i < g->n; i++) {
        struct srv_cluster_rsub *rs = (struct srv_cluster_rsub *)g->subs[i];
        if (!rs->sub.removed && link_up(rs->link)) {
            if (x < rs->count) {
                return (int8_t)rs->link->slot;
            }
            x -= rs->count;
        }
    }
    return -2;
}

bool srv_cluster_pub_queue_remote(struct srv_cluster *cl,
                                  struct srv_cluster_pub *p, const char *name,
                                  size_t name_len, size_t local_n)
{
    if (p->r == NULL) {
        return false;
    }
    size_t n = p->r->nqgroups < SRV_CLUSTER_QUEUES_PER_MSG_MAX
                   ? p->r->nqgroups
                   : SRV_CLUSTER_QUEUES_PER_MSG_MAX;
    for (size_t i = 0; i < n; i++) {
        struct srv_sublist_qgroup *g = &p->r->qgroups[i];
        if (g->name_len == name_len && memcmp(g->name, name, name_len) == 0) {
            p->choice[i] = choose(cl, g, local_n);
            return p->choice[i] >= 0;
        }
    }
    return false;
}

/* Encode the MSG payload for one node: the queue groups whose choice is
 * slot. Returns its length, or 0 when out of memory. */
static size_t encode_msg(struct srv_cluster *cl,
                         const struct srv_cluster_pub *p, int slot, size_t nq,
                         const struct srv_cmd *cmd)
{
    size_t n = p->r->nqgroups < SRV_CLUSTER_QUEUES_PER_MSG_MAX
                   ? p->r->nqgroups
                   : SRV_CLUSTER_QUEUES_PER_MSG_MAX;
    size_t need = cmd->subject.len + cmd->reply.len + cmd->total_bytes +
                  (6 + nq) * SRV_MP_HEADER_BYTES_MAX;
    for (size_t i = 0; i < n; i++) {
        need += p->choice[i] == slot ? p->r->qgroups[i].name_len : 0;
    }
    uint8_t *buf = srv_cluster_scratch(cl, need);
    if (buf == NULL) {
        return 0;
    }
    uint8_t *w = srv_mp_put_array(buf, 5);
    w = srv_mp_put_str(w, cmd->subject.ptr, cmd->subject.len);
    w = srv_mp_put_str(w, cmd->reply.ptr, cmd->reply.len);
    w = srv_mp_put_uint(w, cmd->op == SRV_OP_HPUB ? cmd->hdr_bytes : 0);
    w = srv_mp_put_array(w, (uint32_t)nq);
    for (size_t i = 0; i < n; i++) {
        if (p->choice[i] == slot) {
            w = srv_mp_put_str(w, p->r->qgroups[i].name,
                               p->r->qgroups[i].name_len);
        }
    }
    w = srv_mp_put_bin_header(w, cmd->total_bytes);
    memcpy(w, cmd->payload, cmd->total_bytes);
    w += cmd->total_bytes;
    ASSERT((size_t)(w - buf) <= need);
    return (size_t)(w - buf);
}

size_t srv_cluster_pub_end(struct srv_cluster *cl, struct srv_cluster_pub *p,
                           const struct srv_cmd *cmd)
{
    bool plain[SRV_CLUSTER_LINKS_MAX] = {false};
    size_t nq[SRV_CLUSTER_LINKS_MAX] = {0};
    size_t sent = 0;

    if (p->r == NULL) {
        return 0;
    }
    for (size_t i = 0; i < p->r->npsubs; i++) {
        struct srv_cluster_rsub *rs = (struct srv_cluster_rsub *)p->r->psubs[i];
        if (!rs->sub.removed && link_up(rs->link)) {
            plain[rs->link->slot] = true;
        }
    }
    size_t ng = p->r->nqgroups < SRV_CLUSTER_QUEUES_PER_MSG_MAX
                    ? p->r->nqgroups
                    : SRV_CLUSTER_QUEUES_PER_MSG_MAX;
    for (size_t i = 0; i < ng; i++) {
        if (p->choice[i] == -1) { /* no local members of this group */
            p->choice[i] = choose(cl, &p->r->qgroups[i], 0);
        }
        if (p->choice[i] >= 0) {
            nq[p->choice[i]]++;
        }
    }
    for (int s = 0; s < SRV_CLUSTER_LINKS_MAX; s++) {
        struct srv_cluster_link *l = cl->links[s];
        if ((!plain[s] && nq[s] == 0) || !link_up(l)) {
            continue;
        }
        size_t len = encode_msg(cl, p, s, nq[s], cmd);
        if (len > 0 && srv_cluster_link_send(l, SRV_CLUSTER_MSG, NULL, 0,
                                             cl->scratch, len) == 0) {
            sent++;
        }
    }
    cl->msgs_forwarded += sent;
    srv_sublist_result_release(p->r);
    p->r = NULL;
    return sent;
}
