#include "keel_passwd.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"

static size_t b64_encode(const unsigned char *in, size_t n, char *out)
{
    ASSERT(n <= KEEL_PASSWD_HASH_BYTES + KEEL_PASSWD_SALT_BYTES);
    return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* Decode exactly want bytes from a padded base64 string of len chars. */
static bool b64_decode(const char *in, size_t len, unsigned char *out,
                       size_t want)
{
    unsigned char tmp[KEEL_PASSWD_HASH_BYTES + KEEL_PASSWD_SALT_BYTES + 4];
    size_t pad = 0;

    if (len == 0 || len % 4 != 0 || len / 4 * 3 > sizeof tmp) {
        return false;
    }
    int n = EVP_DecodeBlock(tmp, (const unsigned char *)in, (int)len);
    while (pad < 2 && in[len - 1 - pad] == '=') {
        pad++;
    }
    if (n < 0 || (size_t)n - pad != want) {
        return false;
    }
    memcpy(out, tmp, want);
    return true;
}

struct parsed_hash {
    uint32_t iterations;
    unsigned char salt[KEEL_PASSWD_SALT_BYTES];
    unsigned char hash[KEEL_PASSWD_HASH_BYTES];
};

static bool parse_hash(const char *stored, struct parsed_hash *h)
{
    size_t plen = strlen(KEEL_PASSWD_HASH_PREFIX);
    const char *p = stored + plen;
    char *end;

    if (strncmp(stored, KEEL_PASSWD_HASH_PREFIX, plen) != 0 ||
        strncmp(p, "i=", 2) != 0) {
        return false;
    }
    unsigned long long it = strtoull(p + 2, &end, 10);
    if (end == p + 2 || *end != '$' || it < KEEL_PASSWD_ITER_MIN ||
        it > KEEL_PASSWD_ITER_MAX) {
        return false;
    }
    h->iterations = (uint32_t)it;
    const char *salt = end + 1;
    const char *dollar = strchr(salt, '$');
    if (dollar == NULL) {
        return false;
    }
    const char *hash = dollar + 1;
    return b64_decode(salt, (size_t)(dollar - salt), h->salt, sizeof h->salt) &&
           b64_decode(hash, strlen(hash), h->hash, sizeof h->hash);
}

bool keel_passwd_looks_hashed(const char *stored)
{
    return stored != NULL && strncmp(stored, KEEL_PASSWD_HASH_PREFIX,
                                     strlen(KEEL_PASSWD_HASH_PREFIX)) == 0;
}

uint32_t keel_passwd_iterations(const char *stored)
{
    struct parsed_hash h;
    if (stored == NULL || !parse_hash(stored, &h)) {
        return 0;
    }
    ASSERT(h.iterations >= KEEL_PASSWD_ITER_MIN);
    return h.iterations;
}

static bool pbkdf2(const char *password, const unsigned char *salt,
                   uint32_t iterations, unsigned char *out)
{
    ASSERT(iterations >= KEEL_PASSWD_ITER_MIN);
    ASSERT(iterations <= KEEL_PASSWD_ITER_MAX);
    return PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt,
                             KEEL_PASSWD_SALT_BYTES, (int)iterations,
                             EVP_sha256(), KEEL_PASSWD_HASH_BYTES, out) == 1;
}

int keel_passwd_hash(const char *password, uint32_t iterations, char *out,
                     size_t out_len, char *errmsg)
{
    unsigned char salt[KEEL_PASSWD_SALT_BYTES];
    unsigned char hash[KEEL_PASSWD_HASH_BYTES];
    char salt64[64];
    char hash64[64];

    if (iterations < KEEL_PASSWD_ITER_MIN ||
        iterations > KEEL_PASSWD_ITER_MAX) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "iterations must be %u to %u, not %u",
                        KEEL_PASSWD_ITER_MIN, KEEL_PASSWD_ITER_MAX, iterations);
    }
    if (RAND_bytes(salt, sizeof salt) != 1 ||
        !pbkdf2(password, salt, iterations, hash)) {
        return keel_err(KEEL_EIO, errmsg, "OpenSSL could not make a hash");
    }
    b64_encode(salt, sizeof salt, salt64);
    b64_encode(hash, sizeof hash, hash64);
    int n = snprintf(out, out_len, "%si=%u$%s$%s", KEEL_PASSWD_HASH_PREFIX,
                     iterations, salt64, hash64);
    OPENSSL_cleanse(hash, sizeof hash);
    if (n < 0 || (size_t)n >= out_len) {
        return keel_err(KEEL_EINVAL, errmsg, "hash buffer too small");
    }
    return 0;
}

bool keel_passwd_ok(const char *stored, const char *password)
{
    unsigned char a[KEEL_PASSWD_HASH_BYTES];
    unsigned char b[KEEL_PASSWD_HASH_BYTES];
    struct parsed_hash h;
    bool ok;

    if (keel_passwd_looks_hashed(stored)) {
        if (!parse_hash(stored, &h) ||
            !pbkdf2(password, h.salt, h.iterations, a)) {
            return false;
        }
        ok = CRYPTO_memcmp(a, h.hash, sizeof a) == 0;
        OPENSSL_cleanse(a, sizeof a);
        return ok;
    }
    /* Plain text: compare digests so neither the contents nor the length
     * of the secret shows in the timing. */
    unsigned int n = 0;
    if (EVP_Digest(stored, strlen(stored), a, &n, EVP_sha256(), NULL) != 1 ||
        EVP_Digest(password, strlen(password), b, &n, EVP_sha256(), NULL) !=
            1) {
        return false;
    }
    return CRYPTO_memcmp(a, b, sizeof a) == 0;
}
