#include "srv_tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"

struct srv_tls {
    SSL_CTX *ctx;
    const struct srv_config *cfg;
};

/* OpenSSL's reason for the last failure, for errmsg. */
static const char *ssl_reason(void)
{
    static char buf[160];
    unsigned long e = ERR_get_error();

    if (e == 0) {
        return "unknown OpenSSL error";
    }
    ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return buf;
}

static int new_ctx(const struct srv_config *cfg, SSL_CTX **out, char *errmsg)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    int rv = 0;

    if (ctx == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "cannot create a TLS context");
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* The write buffer of a conn is a memory BIO: a partial write never
     * happens, but allow it so a large batch needs no retry. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
    if (cfg->tls_cert[0] == '\0' || cfg->tls_key[0] == '\0') {
        rv = keel_err(KEEL_ECONFIG, errmsg,
                      "TLS needs a certificate and a key: set tls { "
                      "cert_file, key_file } or --tlscert and --tlskey");
    } else if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
        rv = keel_err(KEEL_ECONFIG, errmsg, "TLS certificate %s: %s",
                      cfg->tls_cert, ssl_reason());
    } else if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key,
                                           SSL_FILETYPE_PEM) != 1 ||
               SSL_CTX_check_private_key(ctx) != 1) {
        rv = keel_err(KEEL_ECONFIG, errmsg, "TLS key %s: %s", cfg->tls_key,
                      ssl_reason());
    } else if (cfg->tls_ca[0] != '\0' &&
               SSL_CTX_load_verify_locations(ctx, cfg->tls_ca, NULL) != 1) {
        rv = keel_err(KEEL_ECONFIG, errmsg, "TLS CA file %s: %s", cfg->tls_ca,
                      ssl_reason());
    } else if (cfg->tls_verify && cfg->tls_ca[0] == '\0') {
        rv = keel_err(KEEL_ECONFIG, errmsg,
                      "TLS verify needs a CA file (ca_file or --tlscacert) "
                      "to check client certificates against");
    }
    if (rv != 0) {
        SSL_CTX_free(ctx);
        return rv;
    }
    if (cfg->tls_verify) {
        SSL_CTX_set_verify(
            ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    *out = ctx;
    return 0;
}

int srv_tls_init(struct srv_tls **out, const struct srv_config *cfg,
                 char *errmsg)
{
    struct srv_tls *t = calloc(1, sizeof *t);
    int rv;

    *out = NULL;
    if (t == NULL) {
        return KEEL_ENOMEM;
    }
    t->cfg = cfg;
    rv = new_ctx(cfg, &t->ctx, errmsg);
    if (rv != 0) {
        free(t);
        return rv;
    }
    *out = t;
    return 0;
}

int srv_tls_reload(struct srv_tls *t, char *errmsg)
{
    SSL_CTX *ctx = NULL;
    int rv = new_ctx(t->cfg, &ctx, errmsg);

    if (rv != 0) {
        return rv;
    }
    /* Sessions hold their own reference (SSL_new takes one). */
    SSL_CTX_free(t->ctx);
    t->ctx = ctx;
    return 0;
}

void srv_tls_close(struct srv_tls *t)
{
    if (t == NULL) {
        return;
    }
    SSL_CTX_free(t->ctx);
    free(t);
}

int srv_tls_session_init(struct srv_tls_session *s, struct srv_tls *t)
{
    return srv_tls_session_start(s, t->ctx, false);
}

int srv_tls_session_start(struct srv_tls_session *s, struct ssl_ctx_st *ctx,
                          bool client)
{
    memset(s, 0, sizeof *s);
    s->ssl = SSL_new(ctx);
    s->rbio = BIO_new(BIO_s_mem());
    s->wbio = BIO_new(BIO_s_mem());
    if (s->ssl == NULL || s->rbio == NULL || s->wbio == NULL) {
        BIO_free(s->rbio);
        BIO_free(s->wbio);
        SSL_free(s->ssl);
        memset(s, 0, sizeof *s);
        return KEEL_ENOMEM;
    }
    SSL_set_bio(s->ssl, s->rbio, s->wbio); /* ssl owns both now */
    if (client) {
        SSL_set_connect_state(s->ssl);
    } else {
        SSL_set_accept_state(s->ssl);
    }
    return 0;
}

void srv_tls_session_close(struct srv_tls_session *s)
{
    if (s->ssl != NULL) {
        SSL_free(s->ssl);
    }
    memset(s, 0, sizeof *s);
}

bool srv_tls_looks_like_tls(const char *data, size_t len)
{
    /* A TLS record starts with content type 22 (handshake). */
    return len > 0 && (unsigned char)data[0] == 0x16;
}

int srv_tls_feed(struct srv_tls_session *s, const char *data, size_t len,
                 char *errmsg)
{
    ASSERT(s->ssl != NULL);
    ASSERT(len <= (size_t)INT32_MAX);
    /* A memory BIO grows to take everything. */
    if (BIO_write(s->rbio, data, (int)len) != (int)len) {
        return keel_err(KEEL_EPROTO, errmsg, "TLS input buffer failed");
    }
    return 0;
}

int srv_tls_handshake(struct srv_tls_session *s, char *errmsg)
{
    int r;

    ASSERT(s->ssl != NULL);
    if (s->established) {
        return 0;
    }
    r = SSL_do_handshake(s->ssl);
    if (r == 1) {
        s->established = true;
        return 0;
    }
    int e = SSL_get_error(s->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        return 0;
    }
    return keel_err(KEEL_EPROTO, errmsg, "TLS handshake failed: %s",
                    ssl_reason());
}

int srv_tls_read(struct srv_tls_session *s, char *buf, size_t cap,
                 size_t *n_out, char *errmsg)
{
    int r;

    ASSERT(s->established);
    ASSERT(cap <= (size_t)INT32_MAX);
    *n_out = 0;
    r = SSL_read(s->ssl, buf, (int)cap);
    if (r > 0) {
        *n_out = (size_t)r;
        return 0;
    }
    int e = SSL_get_error(s->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        return 0;
    }
    if (e == SSL_ERROR_ZERO_RETURN) {
        return KEEL_ESHUTDOWN;
    }
    return keel_err(KEEL_EPROTO, errmsg, "TLS record failed: %s", ssl_reason());
}

int srv_tls_write(struct srv_tls_session *s, const char *data, size_t len)
{
    size_t done = 0;

    ASSERT(s->established);
    /* Each SSL_write takes at least one record into the memory BIO, so
     * this ends within len / 16 KiB + 1 rounds. */
    while (done < len) {
        size_t n = len - done;
        int r = SSL_write(s->ssl, data + done,
                          (int)(n > INT32_MAX ? INT32_MAX : n));
        if (r <= 0) {
            return KEEL_EPROTO;
        }
        done += (size_t)r;
    }
    return 0;
}

size_t srv_tls_pending_out(const struct srv_tls_session *s)
{
    return s->wbio != NULL ? BIO_ctrl_pending(s->wbio) : 0;
}

size_t srv_tls_take_out(struct srv_tls_session *s, char *buf, size_t cap)
{
    ASSERT(cap <= (size_t)INT32_MAX);
    int r = BIO_read(s->wbio, buf, (int)cap);
    return r > 0 ? (size_t)r : 0;
}
