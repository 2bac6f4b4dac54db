/* Security of cluster links: route authentication by shared secret
 * (srv_auth_route.h, carried by the HELLO exchange) and mutual TLS
 * (OpenSSL on memory BIOs, as srv_tls does for clients: libuv keeps the
 * socket, the link's read path feeds ciphertext in and its output queue
 * holds plaintext frames that are encrypted when flushed).
 *
 * srv_cluster.c calls these at its seams: start/close, link start/free,
 * HELLO build and check, read and flush. Everything is NULL-safe: a
 * cluster without a secret and without TLS has cl->sec == NULL and the
 * links behave as before. Loop thread only.
 */
#ifndef SRV_CLUSTER_TLS_H
#define SRV_CLUSTER_TLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"

struct srv_cluster;
struct srv_cluster_link;
struct srv_cluster_settings;

/* Build the cluster's security from s (auth_user/auth_pass, else the
 * first route URL with user:pass@; tls_cert/tls_key/tls_ca/tls_verify).
 * Sets cl->sec (NULL when neither is configured). Returns 0, KEEL_ECONFIG
 * (errmsg says what to fix) or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_cluster_sec_init(struct srv_cluster *cl,
                                       const struct srv_cluster_settings *s,
                                       char *errmsg);

/* Free cl->sec (links are gone). */
void srv_cluster_sec_close(struct srv_cluster *cl);

/* A link's TCP is up: make its nonce and TLS session (l->sec). Returns 0
 * or KEEL_ENOMEM / KEEL_EIO (the caller drops the link). */
KEEL_MUST_USE int srv_cluster_sec_link_start(struct srv_cluster_link *l);

/* Free l->sec (from the link's close callback). */
void srv_cluster_sec_link_free(struct srv_cluster_link *l);

/* Add this node's nonce and auth scheme to its first HELLO. */
void srv_cluster_sec_hello(struct srv_cluster_link *l, json_t *hello);

/* The peer's first HELLO passed the name checks; auth and nonce are its
 * "auth" and "nonce" members ("" when absent). Checks them and, as the
 * dialer, sends the proof. Returns 0 with *wait = true (a proof HELLO
 * must come next), 0 with *wait = false (no secret configured: the link
 * may come up now), or KEEL_EAUTH: the link was refused, logged at ERROR
 * and dropped (the dialer backs off). */
KEEL_MUST_USE int srv_cluster_sec_on_hello(struct srv_cluster_link *l,
                                           const char *auth, const char *nonce,
                                           bool *wait);

/* True while the next frame must be the peer's proof HELLO. */
bool srv_cluster_sec_awaiting_proof(const struct srv_cluster_link *l);

/* The peer's proof HELLO (payload p, len bytes): check it and, as the
 * acceptor, answer with this node's proof. Returns 0 (the link may be
 * established) or KEEL_EAUTH (refused, logged and dropped as above). */
KEEL_MUST_USE int srv_cluster_sec_on_proof(struct srv_cluster_link *l,
                                           const uint8_t *p, size_t len);

/* Is the link wrapped in TLS? */
bool srv_cluster_sec_tls(const struct srv_cluster_link *l);

/* n bytes of ciphertext were read into l->rbuf + l->rlen: decrypt them in
 * place, advancing l->rlen by the plaintext. Returns 0 or KEEL_EPROTO /
 * KEEL_ESHUTDOWN / KEEL_ENOMEM (drop the link; errmsg says why). */
KEEL_MUST_USE int srv_cluster_tls_on_read(struct srv_cluster_link *l, size_t n,
                                          char *errmsg);

/* Encrypt queued frames (once the handshake is done) and write the
 * ciphertext; one write in flight at a time, like the plain path. */
void srv_cluster_tls_flush(struct srv_cluster_link *l);

#endif
