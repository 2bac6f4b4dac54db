#include "srv_auth_route.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"

/* Names the protocol version inside the MAC, so a later scheme's proofs
 * can never be confused with these. */
static const char proof_label[] = "keel-route-proof-v1";

int srv_route_secret_init(struct srv_route_secret *s, const char *user,
                          const char *pass)
{
    size_t ul = user != NULL ? strlen(user) : 0;
    size_t pl = pass != NULL ? strlen(pass) : 0;

    memset(s, 0, sizeof *s);
    if ((ul == 0 && pl == 0) || ul > SRV_AUTH_SECRET_BYTES_MAX ||
        pl > SRV_AUTH_SECRET_BYTES_MAX) {
        return KEEL_EINVAL;
    }
    s->bytes = malloc(ul + 1 + pl);
    if (s->bytes == NULL) {
        return KEEL_ENOMEM;
    }
    if (ul > 0) {
        memcpy(s->bytes, user, ul);
    }
    s->bytes[ul] = '\0';
    if (pl > 0) {
        memcpy(s->bytes + ul + 1, pass, pl);
    }
    s->len = ul + 1 + pl;
    return 0;
}

void srv_route_secret_close(struct srv_route_secret *s)
{
    if (s->bytes != NULL) {
        OPENSSL_cleanse(s->bytes, s->len);
        free(s->bytes);
    }
    memset(s, 0, sizeof *s);
}

bool srv_route_url_creds(const char *url, char *user, char *pass, size_t cap)
{
    const char *p = strstr(url, "://");
    p = p != NULL ? p + 3 : url;
    const char *at = strchr(p, '@');
    const char *colon = memchr(p, ':', at != NULL ? (size_t)(at - p) : 0);

    user[0] = pass[0] = '\0';
    if (at == NULL) {
        return false;
    }
    const char *uend = colon != NULL ? colon : at;
    size_t ul = (size_t)(uend - p);
    size_t pl = colon != NULL ? (size_t)(at - colon - 1) : 0;
    if (ul >= cap || pl >= cap) {
        return false;
    }
    memcpy(user, p, ul);
    user[ul] = '\0';
    if (pl > 0) {
        memcpy(pass, colon + 1, pl);
    }
    pass[pl] = '\0';
    return ul > 0 || pl > 0;
}

int srv_route_nonce(uint8_t nonce[SRV_ROUTE_NONCE_BYTES])
{
    return RAND_bytes(nonce, SRV_ROUTE_NONCE_BYTES) == 1 ? 0 : KEEL_EIO;
}

/* Append len bytes at *off in msg (cap bytes); false when they do not
 * fit. */
static bool put(uint8_t *msg, size_t cap, size_t *off, const void *b,
                size_t len)
{
    if (len > cap - *off) {
        return false;
    }
    memcpy(msg + *off, b, len);
    *off += len;
    return true;
}

void srv_route_proof(const struct srv_route_secret *s,
                     const uint8_t sender_nonce[SRV_ROUTE_NONCE_BYTES],
                     const uint8_t receiver_nonce[SRV_ROUTE_NONCE_BYTES],
                     const char *sender, const char *receiver,
                     const char *cluster, uint8_t proof[SRV_ROUTE_PROOF_BYTES])
{
    uint8_t msg[SRV_ROUTE_PROOF_MSG_BYTES];
    unsigned int n = 0;
    size_t off = 0;

    ASSERT(s->bytes != NULL && s->len <= (size_t)INT32_MAX);
    /* Strings go in with their NULs so "ab"+"c" never equals "a"+"bc". */
    bool ok =
        put(msg, sizeof msg, &off, proof_label, sizeof proof_label) &&
        put(msg, sizeof msg, &off, sender_nonce, SRV_ROUTE_NONCE_BYTES) &&
        put(msg, sizeof msg, &off, receiver_nonce, SRV_ROUTE_NONCE_BYTES) &&
        put(msg, sizeof msg, &off, sender, strlen(sender) + 1) &&
        put(msg, sizeof msg, &off, receiver, strlen(receiver) + 1) &&
        put(msg, sizeof msg, &off, cluster, strlen(cluster) + 1) &&
        HMAC(EVP_sha256(), s->bytes, (int)s->len, msg, off, proof, &n) !=
            NULL &&
        n == SRV_ROUTE_PROOF_BYTES;
    if (!ok) {
        /* Names too long, or out of memory inside OpenSSL: a random proof
         * fails the check on the other side, so the link is refused,
         * never let in. */
        (void)RAND_bytes(proof, SRV_ROUTE_PROOF_BYTES);
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

void srv_route_hex(const uint8_t *b, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";

    ASSERT(n <= SRV_ROUTE_NONCE_BYTES);
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[b[i] >> 4];
        hex[2 * i + 1] = digits[b[i] & 15];
    }
    hex[2 * n] = '\0';
}

bool srv_route_unhex(const char *hex, uint8_t *b, size_t n)
{
    if (hex == NULL || strlen(hex) != 2 * n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(hex[2 * i]);
        int lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

bool srv_route_proof_ok(const uint8_t want[SRV_ROUTE_PROOF_BYTES],
                        const char *got)
{
    uint8_t g[SRV_ROUTE_PROOF_BYTES];

    if (!srv_route_unhex(got, g, sizeof g)) {
        return false;
    }
    return CRYPTO_memcmp(want, g, sizeof g) == 0;
}
