/* Cluster-link security: the route secret's challenge-response in the
 * HELLO exchange and mutual TLS on memory BIOs (see srv_cluster_tls.h).
 */
#include "srv_cluster_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_auth_route.h"
#include "srv_cluster.h"
#include "srv_conn.h"
#include "srv_log.h"
#include "srv_tls.h"

#define ROUTE_AUTH_SCHEME "hmac-sha256"

struct srv_cluster_sec {
    /* Refusal log lines: at most SRV_CLUSTER_REFUSE_LOGS_PER_SEC per
     * second, so a stranger hammering the port cannot flood the log. */
    uint64_t log_window_ms;
    unsigned logged;
    unsigned suppressed;
    bool has_secret;
    struct srv_route_secret secret;
    SSL_CTX *accept_ctx; /* NULL without TLS */
    SSL_CTX *dial_ctx;
};

struct srv_cluster_link_sec {
    uint8_t nonce[SRV_ROUTE_NONCE_BYTES];
    uint8_t peer_nonce[SRV_ROUTE_NONCE_BYTES];
    bool awaiting_proof; /* first HELLO checked, proof HELLO not yet */
    bool tls_on;
    struct srv_tls_session tls;
    char *wbuf; /* ciphertext of the write in flight */
    size_t wcap;
    uv_write_t wreq;
};

/* OpenSSL's reason for the last failure, for errmsg. */
static const char *ssl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();

    if (e == 0) {
        snprintf(buf, len, "unknown OpenSSL error");
    } else {
        ERR_error_string_n(e, buf, len);
    }
    ERR_clear_error();
    return buf;
}

/* One side's context: both present the node certificate and both require
 * the other's, signed by ca_file (mutual TLS, always). */
static int new_ctx(const struct srv_cluster_settings *s, bool dial,
                   SSL_CTX **out, char *errmsg)
{
    SSL_CTX *ctx =
        SSL_CTX_new(dial ? TLS_client_method() : TLS_server_method());
    char why[160];
    int rv = 0;

    if (ctx == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "cannot create a TLS context");
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
    if (SSL_CTX_use_certificate_chain_file(ctx, s->tls_cert) != 1) {
        rv = keel_err(KEEL_ECONFIG, errmsg, "cluster TLS certificate %s: %s",
                      s->tls_cert, ssl_reason(why, sizeof why));
    } else if (SSL_CTX_use_PrivateKey_file(ctx, s->tls_key, SSL_FILETYPE_PEM) !=
                   1 ||
               SSL_CTX_check_private_key(ctx) != 1) {
        rv = keel_err(KEEL_ECONFIG, errmsg, "cluster TLS key %s: %s",
                      s->tls_key, ssl_reason(why, sizeof why));
    } else if (SSL_CTX_load_verify_locations(ctx, s->tls_ca, NULL) != 1) {
        rv = keel_err(KEEL_ECONFIG, errmsg, "cluster TLS CA file %s: %s",
                      s->tls_ca, ssl_reason(why, sizeof why));
    }
    if (rv != 0) {
        SSL_CTX_free(ctx);
        return rv;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       NULL);
    *out = ctx;
    return 0;
}

static int init_tls(struct srv_cluster_sec *sec,
                    const struct srv_cluster_settings *s, char *errmsg)
{
    bool any = (s->tls_cert != NULL && s->tls_cert[0] != '\0') ||
               (s->tls_key != NULL && s->tls_key[0] != '\0') ||
               (s->tls_ca != NULL && s->tls_ca[0] != '\0');
    if (!any) {
        return 0;
    }
    if (s->tls_cert == NULL || s->tls_cert[0] == '\0' || s->tls_key == NULL ||
        s->tls_key[0] == '\0' || s->tls_ca == NULL || s->tls_ca[0] == '\0') {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "cluster TLS needs cert_file, key_file and ca_file: "
                        "links are mutual TLS, each node checks the other's "
                        "certificate against ca_file");
    }
    int rv = new_ctx(s, false, &sec->accept_ctx, errmsg);
    if (rv == 0) {
        rv = new_ctx(s, true, &sec->dial_ctx, errmsg);
    }
    return rv;
}

/* The secret: the authorization block, else the listen URL or the first
 * route URL that carries user:pass@ (a cluster shares one secret). */
static int init_secret(struct srv_cluster_sec *sec,
                       const struct srv_cluster_settings *s, char *errmsg)
{
    char user[SRV_AUTH_SECRET_BYTES_MAX + 1] = "";
    char pass[SRV_AUTH_SECRET_BYTES_MAX + 1] = "";
    char buf[1024];
    char *save = NULL;
    int rv = 0;

    if ((s->auth_user != NULL && s->auth_user[0] != '\0') ||
        (s->auth_pass != NULL && s->auth_pass[0] != '\0')) {
        snprintf(user, sizeof user, "%s", s->auth_user ? s->auth_user : "");
        snprintf(pass, sizeof pass, "%s", s->auth_pass ? s->auth_pass : "");
    } else {
        /* --cluster nats://user:pass@host:port as nats-server reads it,
         * then the seeds. */
        snprintf(buf, sizeof buf, "%s,%s", s->listen != NULL ? s->listen : "",
                 s->routes != NULL ? s->routes : "");
        for (char *tok = strtok_r(buf, ", \t", &save);
             tok != NULL && user[0] == '\0' && pass[0] == '\0';
             tok = strtok_r(NULL, ", \t", &save)) {
            (void)srv_route_url_creds(tok, user, pass, sizeof user);
        }
    }
    if (strncmp(pass, "$pbkdf2", 7) == 0) {
        rv = keel_err(KEEL_ECONFIG, errmsg,
                      "cluster authorization: the route password must be "
                      "the secret itself, not a keel passwd hash (each "
                      "node proves it knows the secret to the other)");
    } else if (user[0] != '\0' || pass[0] != '\0') {
        rv = srv_route_secret_init(&sec->secret, user, pass);
        sec->has_secret = rv == 0;
        if (rv != 0) {
            rv = keel_err(rv, errmsg, "cluster authorization: %s",
                          keel_strerror(rv));
        }
    }
    OPENSSL_cleanse(pass, sizeof pass);
    OPENSSL_cleanse(buf, sizeof buf);
    return rv;
}

int srv_cluster_sec_init(struct srv_cluster *cl,
                         const struct srv_cluster_settings *s, char *errmsg)
{
    struct srv_cluster_sec *sec = calloc(1, sizeof *sec);

    cl->sec = NULL;
    if (sec == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    int rv = init_secret(sec, s, errmsg);
    if (rv == 0) {
        rv = init_tls(sec, s, errmsg);
    }
    if (rv != 0 || (!sec->has_secret && sec->accept_ctx == NULL)) {
        cl->sec = sec;
        srv_cluster_sec_close(cl);
        return rv;
    }
    cl->sec = sec;
    SRV_INFO("cluster", "links: %s%s%s", sec->has_secret ? "route secret" : "",
             sec->has_secret && sec->accept_ctx != NULL ? " and " : "",
             sec->accept_ctx != NULL ? "mutual TLS" : "");
    return 0;
}

void srv_cluster_sec_close(struct srv_cluster *cl)
{
    struct srv_cluster_sec *sec = cl->sec;

    if (sec == NULL) {
        return;
    }
    srv_route_secret_close(&sec->secret);
    SSL_CTX_free(sec->accept_ctx);
    SSL_CTX_free(sec->dial_ctx);
    free(sec);
    cl->sec = NULL;
}

int srv_cluster_sec_link_start(struct srv_cluster_link *l)
{
    struct srv_cluster_sec *sec = l->cl->sec;

    if (sec == NULL) {
        return 0;
    }
    struct srv_cluster_link_sec *ls = calloc(1, sizeof *ls);
    if (ls == NULL) {
        return KEEL_ENOMEM;
    }
    l->sec = ls;
    if (sec->has_secret && srv_route_nonce(ls->nonce) != 0) {
        return KEEL_EIO;
    }
    if (sec->accept_ctx != NULL) {
        SSL_CTX *ctx = l->outbound ? sec->dial_ctx : sec->accept_ctx;
        int rv = srv_tls_session_start(&ls->tls, ctx, l->outbound);
        if (rv != 0) {
            return rv;
        }
        ls->tls_on = true;
        char errmsg[KEEL_ERRMSG_MAX];
        /* The dialer's ClientHello goes out with the first flush. */
        if (l->outbound && srv_tls_handshake(&ls->tls, errmsg) != 0) {
            return KEEL_EIO;
        }
    }
    return 0;
}

void srv_cluster_sec_link_free(struct srv_cluster_link *l)
{
    struct srv_cluster_link_sec *ls = l->sec;

    if (ls == NULL) {
        return;
    }
    if (ls->tls_on) {
        srv_tls_session_close(&ls->tls);
    }
    free(ls->wbuf);
    free(ls);
    l->sec = NULL;
}

/* May a refusal be logged now? Counts what it suppresses and reports the
 * count when the next second opens. */
static bool refusal_log_ok(struct srv_cluster *cl)
{
    struct srv_cluster_sec *sec = cl->sec;
    uint64_t now = uv_now(cl->loop);

    if (sec == NULL) {
        return true;
    }
    if (now - sec->log_window_ms >= 1000) {
        if (sec->suppressed > 0) {
            SRV_ERROR("cluster", "%u more link refusals not logged",
                      sec->suppressed);
        }
        sec->log_window_ms = now;
        sec->logged = 0;
        sec->suppressed = 0;
    }
    if (sec->logged >= SRV_CLUSTER_REFUSE_LOGS_PER_SEC) {
        sec->suppressed++;
        return false;
    }
    sec->logged++;
    return true;
}

/* Refuse the link: ERROR with the peer's address, the dialer backs off to
 * the maximum, the link is dropped before any other frame is read. */
static int refuse(struct srv_cluster_link *l, const char *why)
{
    char addr[96];

    if (refusal_log_ok(l->cl)) {
        SRV_ERROR("cluster", "refusing %s link with %s (%s): %s",
                  l->outbound ? "dialed" : "accepted",
                  l->peer_name[0] != '\0' ? l->peer_name : "an unknown node",
                  srv_conn_peer_addr(&l->tcp, addr, sizeof addr), why);
    }
    if (l->node != NULL) {
        l->node->refused = true;
        l->node->backoff_ms = SRV_CLUSTER_BACKOFF_MS_MAX;
    }
    srv_cluster_link_fail(l, why);
    return KEEL_EAUTH;
}

void srv_cluster_sec_hello(struct srv_cluster_link *l, json_t *hello)
{
    struct srv_cluster_sec *sec = l->cl->sec;
    char hex[SRV_ROUTE_HEX_BYTES];

    if (sec == NULL || !sec->has_secret || hello == NULL || l->sec == NULL) {
        return;
    }
    srv_route_hex(l->sec->nonce, sizeof l->sec->nonce, hex);
    json_object_set_new(hello, "auth", json_string(ROUTE_AUTH_SCHEME));
    json_object_set_new(hello, "nonce", json_string(hex));
}

static void send_proof(struct srv_cluster_link *l)
{
    struct srv_cluster *cl = l->cl;
    uint8_t proof[SRV_ROUTE_PROOF_BYTES];
    char hex[SRV_ROUTE_HEX_BYTES];
    char text[SRV_ROUTE_HEX_BYTES + 16];

    srv_route_proof(&cl->sec->secret, l->sec->nonce, l->sec->peer_nonce,
                    cl->node_name, l->peer_name, cl->name, proof);
    srv_route_hex(proof, sizeof proof, hex);
    int n = snprintf(text, sizeof text, "{\"proof\":\"%s\"}", hex);
    if (srv_cluster_link_send(l, SRV_CLUSTER_HELLO, NULL, 0, text, (size_t)n) !=
        0) {
        srv_cluster_link_fail(l, "cannot send the route proof");
    }
}

int srv_cluster_sec_on_hello(struct srv_cluster_link *l, const char *scheme,
                             const char *nonce, bool *wait)
{
    struct srv_cluster_sec *sec = l->cl->sec;

    *wait = false;
    if (sec == NULL || !sec->has_secret) {
        if (scheme[0] != '\0') {
            return refuse(l, "it requires route credentials: give this node "
                             "the same cluster { authorization }");
        }
        return 0;
    }
    ASSERT(l->sec != NULL);
    if (strcmp(scheme, ROUTE_AUTH_SCHEME) != 0 ||
        !srv_route_unhex(nonce, l->sec->peer_nonce,
                         sizeof l->sec->peer_nonce)) {
        return refuse(l, "it sent no route credentials: give every node the "
                         "same cluster { authorization { user, password } }");
    }
    if (memcmp(l->sec->peer_nonce, l->sec->nonce, sizeof l->sec->nonce) == 0) {
        return refuse(l, "it echoed this node's nonce");
    }
    l->sec->awaiting_proof = true;
    *wait = true;
    /* The dialer proves first; the acceptor answers only a valid proof,
     * so a stranger on the cluster port gets nothing to attack offline. */
    if (l->outbound) {
        send_proof(l);
    }
    return 0;
}

bool srv_cluster_sec_awaiting_proof(const struct srv_cluster_link *l)
{
    return l->sec != NULL && l->sec->awaiting_proof;
}

int srv_cluster_sec_on_proof(struct srv_cluster_link *l, const uint8_t *p,
                             size_t len)
{
    struct srv_cluster *cl = l->cl;
    uint8_t want[SRV_ROUTE_PROOF_BYTES];
    json_t *o = json_loadb((const char *)p, len, 0, NULL);
    const char *got = json_string_value(json_object_get(o, "proof"));

    ASSERT(l->sec != NULL && cl->sec != NULL && cl->sec->has_secret);
    srv_route_proof(&cl->sec->secret, l->sec->peer_nonce, l->sec->nonce,
                    l->peer_name, cl->node_name, cl->name, want);
    bool ok = got != NULL && srv_route_proof_ok(want, got);
    json_decref(o);
    if (!ok) {
        return refuse(l, "wrong route credentials: give every node the same "
                         "cluster { authorization { user, password } }");
    }
    l->sec->awaiting_proof = false;
    if (!l->outbound) {
        send_proof(l);
    }
    return l->closing ? KEEL_EAUTH : 0;
}

bool srv_cluster_sec_tls(const struct srv_cluster_link *l)
{
    return l->sec != NULL && l->sec->tls_on;
}

/* Room for SRV_READ_BYTES more plaintext at l->rbuf + l->rlen. */
static int grow_rbuf(struct srv_cluster_link *l)
{
    size_t want = l->rlen + SRV_READ_BYTES;

    if (want <= l->rcap) {
        return 0;
    }
    uint8_t *b = realloc(l->rbuf, want);
    if (b == NULL) {
        return KEEL_ENOMEM;
    }
    l->rbuf = b;
    l->rcap = want;
    return 0;
}

int srv_cluster_tls_on_read(struct srv_cluster_link *l, size_t n, char *errmsg)
{
    struct srv_cluster_link_sec *ls = l->sec;
    char addr[96];
    int rv;

    ASSERT(ls != NULL && ls->tls_on);
    rv = srv_tls_feed(&ls->tls, (const char *)l->rbuf + l->rlen, n, errmsg);
    if (rv == 0 && !ls->tls.established) {
        rv = srv_tls_handshake(&ls->tls, errmsg);
        if (rv != 0 && refusal_log_ok(l->cl)) {
            SRV_ERROR("cluster", "refusing %s link with %s: %s",
                      l->outbound ? "dialed" : "accepted",
                      srv_conn_peer_addr(&l->tcp, addr, sizeof addr), errmsg);
        }
        if (rv != 0) {
            if (l->node != NULL) {
                l->node->refused = true;
                l->node->backoff_ms = SRV_CLUSTER_BACKOFF_MS_MAX;
            }
        }
    }
    /* A read of SRV_READ_BYTES ciphertext (plus a partial record from
     * before) decrypts to less than two rounds. */
    for (int i = 0;
         rv == 0 && ls->tls.established && i < SRV_CLUSTER_TLS_READ_ROUNDS_MAX;
         i++) {
        size_t got = 0;
        rv = grow_rbuf(l);
        if (rv == 0) {
            rv = srv_tls_read(&ls->tls, (char *)l->rbuf + l->rlen,
                              l->rcap - l->rlen, &got, errmsg);
        }
        if (rv != 0 || got == 0) {
            break;
        }
        l->rlen += got;
    }
    return rv;
}

static void tls_write_cb(uv_write_t *req, int status)
{
    struct srv_cluster_link *l = req->data;

    l->writing = false;
    if (status < 0) {
        srv_cluster_link_fail(l, uv_strerror(status));
        return;
    }
    srv_cluster_tls_flush(l);
}

/* Encrypt up to SRV_CLUSTER_TLS_BATCH_BYTES of queued frames. */
static int encrypt_some(struct srv_cluster_link *l)
{
    struct srv_cluster_link_sec *ls = l->sec;
    uv_buf_t iov[SRV_OUT_IOV_MAX];
    size_t total = 0;
    size_t done = 0;

    unsigned cnt = srv_outq_iov(&l->out, iov, SRV_OUT_IOV_MAX, &total);
    for (unsigned i = 0; i < cnt && done < SRV_CLUSTER_TLS_BATCH_BYTES; i++) {
        if (srv_tls_write(&ls->tls, iov[i].base, iov[i].len) != 0) {
            return KEEL_EPROTO;
        }
        done += iov[i].len;
    }
    srv_outq_consume(&l->out, &l->cl->pool, done);
    return 0;
}

/* Write what the session produced; true when it all went out now. */
static bool write_out(struct srv_cluster_link *l)
{
    struct srv_cluster_link_sec *ls = l->sec;
    size_t pend = srv_tls_pending_out(&ls->tls);

    if (pend > ls->wcap) {
        char *b = realloc(ls->wbuf, pend);
        if (b == NULL) {
            srv_cluster_link_fail(l, "out of memory");
            return false;
        }
        ls->wbuf = b;
        ls->wcap = pend;
    }
    pend = srv_tls_take_out(&ls->tls, ls->wbuf, pend);
    uv_buf_t buf = uv_buf_init(ls->wbuf, (unsigned)pend);
    int n = uv_try_write((uv_stream_t *)&l->tcp, &buf, 1);
    if (n == UV_EAGAIN) {
        n = 0;
    } else if (n < 0) {
        srv_cluster_link_fail(l, uv_strerror(n));
        return false;
    }
    if ((size_t)n == pend) {
        return true;
    }
    buf = uv_buf_init(ls->wbuf + n, (unsigned)(pend - (size_t)n));
    ls->wreq.data = l;
    int rv = uv_write(&ls->wreq, (uv_stream_t *)&l->tcp, &buf, 1, tls_write_cb);
    if (rv != 0) {
        srv_cluster_link_fail(l, uv_strerror(rv));
        return false;
    }
    l->writing = true;
    return false;
}

void srv_cluster_tls_flush(struct srv_cluster_link *l)
{
    struct srv_cluster_link_sec *ls = l->sec;

    ASSERT(ls != NULL && ls->tls_on);
    /* Each round empties the session's output or leaves a write in
     * flight; a full queue needs this many rounds. */
    for (size_t i = 0;
         i <= SRV_CLUSTER_LINK_PENDING_BYTES_MAX / SRV_CLUSTER_TLS_BATCH_BYTES;
         i++) {
        if (l->closing || l->writing || !l->connected) {
            return;
        }
        if (ls->tls.established && srv_tls_pending_out(&ls->tls) == 0 &&
            l->out.bytes > 0 && encrypt_some(l) != 0) {
            srv_cluster_link_fail(l, "TLS write failed");
            return;
        }
        if (srv_tls_pending_out(&ls->tls) == 0 || !write_out(l)) {
            return;
        }
    }
}
