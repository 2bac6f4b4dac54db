/* keel_passwd: salted PBKDF2-HMAC-SHA256 password hashes in a
 * self-describing string, "$pbkdf2-sha256$i=<rounds>$<salt b64>$<hash b64>".
 * keel passwd makes them and keeld verifies them; both link this one file,
 * so a hash the tool prints is one the server accepts. Stateless and
 * thread-safe: keeld verifies on its worker pool.
 */
#ifndef KEEL_PASSWD_H
#define KEEL_PASSWD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"

#define KEEL_PASSWD_HASH_PREFIX "$pbkdf2-sha256$"

/* Hash password with a fresh random salt and iterations rounds into out
 * (KEEL_PASSWD_STRING_BYTES is enough). Returns 0, KEEL_EINVAL (iterations
 * outside KEEL_PASSWD_ITER_MIN..MAX, out too small) or KEEL_EIO (the RNG or
 * OpenSSL failed); errmsg says which. */
KEEL_MUST_USE int keel_passwd_hash(const char *password, uint32_t iterations,
                                   char *out, size_t out_len, char *errmsg);

/* Constant-time check of password against stored, a hash or plain text
 * (compared as SHA-256 digests, so neither its contents nor its length
 * shows in the timing). False on a malformed hash. */
bool keel_passwd_ok(const char *stored, const char *password);

/* Whether stored starts like a hash (it may still be malformed: an
 * operator who meant a hash must hear about a typo, not get a plain-text
 * password). */
bool keel_passwd_looks_hashed(const char *stored);

/* The rounds of a well-formed hash, or 0 when stored is NULL, plain text or
 * a malformed hash. */
uint32_t keel_passwd_iterations(const char *stored);

#endif
