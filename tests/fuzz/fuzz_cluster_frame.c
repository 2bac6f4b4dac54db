/* libFuzzer target for what a cluster port reads from a peer: the byte
 * stream split into length-prefixed frames (as the link's read path does),
 * each frame decoded, HELLO payloads parsed as the handshake does (its
 * fields, the route secret's nonce and proof), INTEREST payloads applied
 * to a link's remote interest (then dropped, as a link going down does),
 * and route URLs as gossip carries them.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/error.h"
#include "srv_auth_route.h"
#include "srv_cluster.h"
#include "srv_route.h"

#define FRAMES_MAX 64

static struct srv_cluster cl;

/* The server's parts the interest code calls, as the loop would do them:
 * a dropped remote subscription is freed (no match result holds it
 * here); nothing is delivered and no link sends. */
void srv_server_bury_sub(struct srv_server *srv, struct srv_sub *sub)
{
    (void)srv;
    free(sub); /* the rsub, whose first member sub is */
}

void srv_route_deliver_routed(struct srv_server *srv, const struct srv_cmd *cmd,
                              const struct srv_slice *queues, size_t nqueues)
{
    (void)srv;
    (void)cmd;
    (void)queues;
    (void)nqueues;
}

int srv_cluster_link_send(struct srv_cluster_link *l, unsigned kind,
                          const uint8_t *group, size_t group_len,
                          const void *payload, size_t len)
{
    (void)l;
    (void)kind;
    (void)group;
    (void)group_len;
    (void)payload;
    (void)len;
    return KEEL_ENOENT;
}

uint8_t *srv_cluster_scratch(struct srv_cluster *c, size_t n)
{
    (void)c;
    (void)n;
    return NULL;
}

uint64_t srv_cluster_rand(struct srv_cluster *c)
{
    (void)c;
    return 4; /* chosen by a fair dice roll */
}

static void hello(const uint8_t *p, size_t len)
{
    uint8_t nonce[SRV_ROUTE_NONCE_BYTES];
    uint8_t want[SRV_ROUTE_PROOF_BYTES] = {0};
    char user[64], pass[64];
    json_t *o = json_loadb((const char *)p, len, 0, NULL);

    if (o == NULL) {
        return;
    }
    const char *n = json_string_value(json_object_get(o, "nonce"));
    const char *proof = json_string_value(json_object_get(o, "proof"));
    const char *url = json_string_value(json_object_get(o, "url"));
    (void)srv_route_unhex(n, nonce, sizeof nonce);
    (void)srv_route_proof_ok(want, proof);
    if (url != NULL) {
        (void)srv_route_url_creds(url, user, pass, sizeof user);
    }
    json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool inited;
    struct srv_cluster_link l;
    size_t off = 0;

    if (!inited) {
        inited = true;
        cl.srv = (struct srv_server *)&cl; /* non-NULL: core NATS on */
        srv_hmap_init(&cl.interest);
        if (srv_sublist_init(&cl.rsublist) != 0) {
            abort();
        }
    }
    memset(&l, 0, sizeof l);
    l.cl = &cl;
    srv_hmap_init(&l.rsubs);
    for (int i = 0; i < FRAMES_MAX && size - off >= 4; i++) {
        const uint8_t *h = data + off;
        size_t n =
            (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
        if (n == 0 || n > size - off - 4) {
            break;
        }
        const uint8_t *g, *p;
        size_t glen = 0, plen = 0;
        unsigned kind = 0;
        if (srv_cluster_frame_decode(h + 4, n, &kind, &g, &glen, &p, &plen) ==
            0) {
            ASSERT(kind >= 1 && kind <= SRV_CLUSTER_KIND_MAX);
            ASSERT(glen <= SRV_CLUSTER_GROUP_ID_BYTES);
            ASSERT(p >= h + 4 && p + plen <= h + 4 + n);
            if (kind == SRV_CLUSTER_HELLO || kind == SRV_CLUSTER_GOSSIP) {
                hello(p, plen);
            } else if (kind == SRV_CLUSTER_INTEREST) {
                (void)srv_cluster_on_interest(&cl, &l, p, plen);
            }
        }
        off += 4 + n;
    }
    /* The link goes down: its remote interest leaves the sublist. */
    srv_cluster_interest_drop(&cl, &l);
    ASSERT(l.rsubs.count == 0);
    srv_hmap_close(&l.rsubs);
    return 0;
}
