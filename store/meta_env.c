/* meta.lmdb's value envelope (store/FORMAT.md "meta.lmdb"):
 *   u8 version, u8 0, u16 kind, u32 body length, body, u64 checksum.
 * Version 1: XXH3-64 (seed 0) of header and body. Version 2
 * (docs/decisions/0015): the same seeded with XXH3-64 (seed 0) of the key, so a
 * changed key byte fails the value's checksum. LMDB checksums nothing
 * and a changed key that still sorts in place moves its value to another
 * key (finding F2; a catalogue entry to a group that does not exist).
 */
#include <string.h>
#include <xxhash.h>

#include <keel/assert.h>
#include <keel/bytes.h>
#include <keel/error.h>

#include "format.h"
#include "meta_env.h"

static bool write_v1;

void store_meta_debug_env_v1(bool on)
{
    write_v1 = on;
}

static uint64_t env_sum(unsigned version, const uint8_t *key, size_t kn,
                        const uint8_t *hdr_body, size_t n)
{
    if (version == STORE_META_ENV_V1) {
        return XXH3_64bits(hdr_body, n);
    }
    return XXH3_64bits_withSeed(hdr_body, n, XXH3_64bits(key, kn));
}

size_t store_meta_env_wrap(uint8_t *out, const uint8_t *key, size_t kn,
                           uint16_t kind, const uint8_t *body, uint32_t len)
{
    unsigned version = write_v1 ? STORE_META_ENV_V1 : STORE_META_ENV_V2;

    ASSERT(len <= STORE_META_BODY_MAX);
    ASSERT(out != NULL && key != NULL && kn > 0);
    out[0] = (uint8_t)version;
    out[1] = 0;
    keel_put_le(out + 2, kind, 2);
    keel_put_le32(out + 4, len);
    if (len > 0) {
        memcpy(out + STORE_META_ENV_HDR, body, len);
    }
    keel_put_le64(out + STORE_META_ENV_HDR + len,
                  env_sum(version, key, kn, out, STORE_META_ENV_HDR + len));
    return STORE_META_ENV_HDR + len + 8;
}

int store_meta_env_check(const uint8_t *key, size_t kn, const uint8_t *val,
                         size_t vn, const uint8_t **body, uint32_t *len,
                         unsigned *version)
{
    uint32_t l;
    unsigned ver;

    ASSERT(val != NULL || vn == 0);
    ASSERT(body != NULL && len != NULL);
    if (vn < STORE_META_ENV_HDR + 8) {
        return KEEL_ECORRUPT;
    }
    l = keel_get_le32(val + 4);
    if ((size_t)l + STORE_META_ENV_HDR + 8 != vn) {
        return KEEL_ECORRUPT;
    }
    ver = val[0];
    if (val[1] != 0 || (ver != STORE_META_ENV_V1 && ver != STORE_META_ENV_V2)) {
        /* A newer format whose checksum still holds as version 1's, or a
         * damaged byte. */
        return XXH3_64bits(val, STORE_META_ENV_HDR + l) ==
                       keel_get_le64(val + STORE_META_ENV_HDR + l)
                   ? KEEL_EVERSION
                   : KEEL_ECORRUPT;
    }
    if (env_sum(ver, key, kn, val, STORE_META_ENV_HDR + l) !=
        keel_get_le64(val + STORE_META_ENV_HDR + l)) {
        return KEEL_ECORRUPT;
    }
    *body = val + STORE_META_ENV_HDR;
    *len = l;
    if (version != NULL) {
        *version = ver;
    }
    return 0;
}

/* A sound value's key (which a version-1 checksum leaves out): its kind
 * and length agree with the envelope's kind, a catalogue key's base with
 * the body's. */
static bool key_agrees(const uint8_t *key, size_t kn, const uint8_t *val,
                       const uint8_t *body, uint32_t len)
{
    unsigned kind = (unsigned)keel_get_le(val + 2, 2);
    size_t want = 0;
    uint64_t base = 0;

    ASSERT(val != NULL && body != NULL);
    if (kn == 0 || key[0] != kind) {
        return false;
    }
    switch (kind) {
    case 'I':
    case 'N':
        want = 1;
        break;
    case 'H':
        want = 2 + STORE_GROUP_ID_BYTES;
        break;
    case 'C':
        want = 9 + STORE_GROUP_ID_BYTES;
        break;
    case 'S':
    case 'A':
    case 'W':
        want = 1 + STORE_GROUP_ID_BYTES;
        break;
    default:
        return false;
    }
    if (kn != want) {
        return false;
    }
    if (kind == 'H') {
        return key[want - 1] == 'T' || key[want - 1] == 'V';
    }
    if (kind != 'C') {
        return true;
    }
    base = keel_get_be(key + 1 + STORE_GROUP_ID_BYTES, 8);
    return len == 32 && base == keel_get_le64(body);
}

/* False when a hard-state pair is broken: a changed group-id byte in
 * one key that still sorts in place leaves the other alone. */
static bool hs_pairs(const uint8_t *key, size_t kn, uint8_t gid[16], bool *open)
{
    bool hs = kn == 2 + STORE_GROUP_ID_BYTES && key[0] == 'H';

    ASSERT(gid != NULL && open != NULL);
    if (hs && key[1 + STORE_GROUP_ID_BYTES] == 'V') {
        bool ok = *open && memcmp(gid, key + 1, STORE_GROUP_ID_BYTES) == 0;
        *open = false;
        return ok;
    }
    if (*open) {
        return false; /* a 'T' not followed by its 'V' */
    }
    if (hs && key[1 + STORE_GROUP_ID_BYTES] == 'T') {
        memcpy(gid, key + 1, STORE_GROUP_ID_BYTES);
        *open = true;
    }
    return true;
}

int store_meta_entry_check(const uint8_t *key, size_t kn, const uint8_t *val,
                           size_t vn, struct store_meta_pairs *pairs,
                           unsigned *version, char *why, size_t cap)
{
    const uint8_t *b;
    uint32_t l;
    char kind = kn > 0 ? (char)key[0] : '?';

    ASSERT(pairs != NULL && why != NULL);
    if (key == NULL ? pairs->open
                    : !hs_pairs(key, kn, pairs->gid, &pairs->open)) {
        store_fmt_str(why, cap,
                      "meta.lmdb hard-state key without its pair (term and "
                      "vote): a damaged key");
        return KEEL_ECORRUPT;
    }
    if (key == NULL) {
        return 0;
    }
    if (store_meta_env_check(key, kn, val, vn, &b, &l, version) == 0) {
        if (key_agrees(key, kn, val, b, l)) {
            return 0;
        }
        store_fmt_str(why, cap,
                      "meta.lmdb key of kind '%c' (%zu bytes) does not match "
                      "its value: a damaged key",
                      kind, kn);
        return KEEL_ECORRUPT;
    }
    /* A version-2 checksum covers the key: its failure may be a changed
     * key byte, the entry moved away from its real group (which now
     * silently lacks it). Only a version-1 value's failure is surely its
     * own group's. */
    if (vn > 0 && val[0] == STORE_META_ENV_V1 && kn > STORE_GROUP_ID_BYTES &&
        (kind == 'S' || kind == 'A' || kind == 'W')) {
        return STORE_META_ENTRY_BAD_GROUP;
    }
    store_fmt_str(why, cap,
                  "meta.lmdb value of kind '%c' failed its checksum (over key "
                  "and value): a damaged key or value",
                  kind);
    return KEEL_ECORRUPT;
}
