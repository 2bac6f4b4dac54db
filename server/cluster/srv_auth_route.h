/* Cluster-link (route) authentication by shared secret: a
 * challenge-response carried by the HELLO exchange, so the secret never
 * crosses the link, not even on a plain-text one.
 *
 * Each side sends a fresh random nonce in its first HELLO. The dialer
 * proves knowledge of the secret first with
 *   HMAC-SHA256(secret, label | sender nonce | receiver nonce |
 *               sender name | receiver name | cluster name)
 * and the acceptor answers with its own proof only after checking the
 * dialer's, so a stranger that connects to the cluster port learns
 * nothing it could guess the secret from offline. Binding the direction
 * (sender first) and both names stops a proof from being reflected back
 * or replayed on another link (the nonces are fresh per link).
 *
 * The secret is "user\0password" from cluster { authorization } or a
 * route URL's user:pass@. Pure functions, any thread.
 */
#ifndef SRV_AUTH_ROUTE_H
#define SRV_AUTH_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"

/* Bytes MACed for one proof: label, two nonces and three names (node and
 * cluster names are shorter than 128 bytes each). */
#define SRV_ROUTE_PROOF_MSG_BYTES 1024

/* Hex text of a nonce or proof, with its NUL. */
#define SRV_ROUTE_HEX_BYTES (2 * SRV_ROUTE_NONCE_BYTES + 1)

struct srv_route_secret {
    uint8_t *bytes; /* user, NUL, password */
    size_t len;
};

/* Build the secret from user and password (either may be empty, not
 * both). Returns 0, KEEL_EINVAL (both empty, or longer than
 * SRV_AUTH_SECRET_BYTES_MAX each) or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_route_secret_init(struct srv_route_secret *s,
                                        const char *user, const char *pass);

/* Wipe and free the secret. */
void srv_route_secret_close(struct srv_route_secret *s);

/* Split "nats://user:pass@host:port" credentials out of a route URL into
 * user and pass (each cap bytes). Returns true when the URL has them. */
bool srv_route_url_creds(const char *url, char *user, char *pass, size_t cap);

/* A fresh random nonce. Returns 0 or KEEL_EIO (no randomness). */
KEEL_MUST_USE int srv_route_nonce(uint8_t nonce[SRV_ROUTE_NONCE_BYTES]);

/* The proof the side named sender sends to receiver (see above). */
void srv_route_proof(const struct srv_route_secret *s,
                     const uint8_t sender_nonce[SRV_ROUTE_NONCE_BYTES],
                     const uint8_t receiver_nonce[SRV_ROUTE_NONCE_BYTES],
                     const char *sender, const char *receiver,
                     const char *cluster, uint8_t proof[SRV_ROUTE_PROOF_BYTES]);

/* Does got (hex text from the peer) equal the proof expected of it?
 * Constant time in the proof bytes; malformed hex is false. */
bool srv_route_proof_ok(const uint8_t want[SRV_ROUTE_PROOF_BYTES],
                        const char *got);

/* Hex text of n (<= SRV_ROUTE_NONCE_BYTES) bytes into hex
 * (SRV_ROUTE_HEX_BYTES). */
void srv_route_hex(const uint8_t *b, size_t n, char *hex);

/* Parse exactly 2*n hex digits into b. Returns true on success. */
bool srv_route_unhex(const char *hex, uint8_t *b, size_t n);

#endif
