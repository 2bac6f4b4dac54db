/* TLS for client conns with OpenSSL memory BIOs: libuv keeps owning the
 * socket; ciphertext read from it is fed into a session and ciphertext the
 * session produces is written by srv_conn. Loop thread only.
 *
 * The server context is replaced on srv_tls_reload (SIGHUP): sessions keep
 * a reference to the context they started with, new conns use the new one.
 */
#ifndef SRV_TLS_H
#define SRV_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "keel/assert.h"
#include "srv_config.h"

struct srv_tls;
struct ssl_st;
struct ssl_ctx_st;
struct bio_st;

struct srv_tls_session {
    struct ssl_st *ssl;
    struct bio_st *rbio; /* ciphertext in (owned by ssl) */
    struct bio_st *wbio; /* ciphertext out (owned by ssl) */
    bool established;
    bool seen_bytes; /* the first byte was checked for a TLS record */
};

/* Build the server context from cfg (tls_cert, tls_key, optional tls_ca,
 * tls_verify): TLS 1.2 or newer only. Returns 0, KEEL_ECONFIG (errmsg names
 * the file and OpenSSL's reason) or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_tls_init(struct srv_tls **out,
                               const struct srv_config *cfg, char *errmsg);

/* Load the files again into a new context for new conns. On failure the
 * old context stays in use and errmsg says why. */
KEEL_MUST_USE int srv_tls_reload(struct srv_tls *t, char *errmsg);

/* Free the context (sessions still open keep their own reference). NULL
 * is a no-op. */
void srv_tls_close(struct srv_tls *t);

/* Start a server-side session. Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_tls_session_init(struct srv_tls_session *s,
                                       struct srv_tls *t);

/* Start a session on any context: client (connect state, for dialed
 * cluster links) or server. Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_tls_session_start(struct srv_tls_session *s,
                                        struct ssl_ctx_st *ctx, bool client);

void srv_tls_session_close(struct srv_tls_session *s);

/* Whether data (the first bytes a client sent) can start a TLS record: a
 * plain-text client is told 'Secure Connection - TLS Required'. */
bool srv_tls_looks_like_tls(const char *data, size_t len);

/* Feed ciphertext read from the socket. Returns 0, or KEEL_EPROTO when the
 * handshake or a record failed (errmsg says why). */
KEEL_MUST_USE int srv_tls_feed(struct srv_tls_session *s, const char *data,
                               size_t len, char *errmsg);

/* Advance the handshake with what was fed. Returns 0 (check
 * s->established) or KEEL_EPROTO with errmsg. */
KEEL_MUST_USE int srv_tls_handshake(struct srv_tls_session *s, char *errmsg);

/* Decrypt up to cap bytes of application data into buf: *n_out 0 means
 * nothing more until more ciphertext is fed. Returns 0, KEEL_ESHUTDOWN
 * (the peer closed the session) or KEEL_EPROTO. */
KEEL_MUST_USE int srv_tls_read(struct srv_tls_session *s, char *buf, size_t cap,
                               size_t *n_out, char *errmsg);

/* Encrypt len bytes (the memory BIO takes all of it). Returns 0 or
 * KEEL_EPROTO. */
KEEL_MUST_USE int srv_tls_write(struct srv_tls_session *s, const char *data,
                                size_t len);

/* Ciphertext waiting to be sent, and taking it (up to cap bytes). */
size_t srv_tls_pending_out(const struct srv_tls_session *s);
size_t srv_tls_take_out(struct srv_tls_session *s, char *buf, size_t cap);

#endif
