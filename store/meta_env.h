/* meta.lmdb's value envelope and the checks a key must pass against its
 * value (store/FORMAT.md "meta.lmdb", docs/decisions/0015). Pure
 * functions, used by meta.c.
 */
#ifndef KEEL_STORE_META_ENV_H
#define KEEL_STORE_META_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_META_ENV_V1 1u /* checksum over header and body */
#define STORE_META_ENV_V2 2u /* ... seeded with the key's XXH3-64 */
#define STORE_META_ENV_HDR 8u
#define STORE_META_BODY_MAX 128u
#define STORE_META_VAL_MAX (STORE_META_ENV_HDR + STORE_META_BODY_MAX + 8u)

/* Wrap body as the value of key (version 2: the checksum covers the
 * key). out holds STORE_META_VAL_MAX bytes. Returns the value's size. */
size_t store_meta_env_wrap(uint8_t *out, const uint8_t *key, size_t kn,
                           uint16_t kind, const uint8_t *body, uint32_t len);

/* Check the value val (vn bytes) stored under key: version 1 or 2, its
 * checksum (version 2's over the key too). 0 with body and len pointing
 * into val and *version set; KEEL_ECORRUPT; KEEL_EVERSION (an unknown
 * version whose version-1 checksum holds). */
int store_meta_env_check(const uint8_t *key, size_t kn, const uint8_t *val,
                         size_t vn, const uint8_t **body, uint32_t *len,
                         unsigned *version);

/* The walk over every entry in key order at open (meta.c validate_all).
 * Hard-state keys come in pairs ('H' gid 'T' then 'H' gid 'V', adjacent);
 * pairs holds a 'T' waiting for its 'V' (zeroed before the walk). */
struct store_meta_pairs {
    uint8_t gid[16];
    bool open;
};
#define STORE_META_ENTRY_BAD_GROUP 1
/* One entry: 0 when sound (*version set); STORE_META_ENTRY_BAD_GROUP
 * when only its group is hurt (a version-1 snapshot, amnesia or
 * recover-wait value failing its checksum: key[1..16] names the group);
 * KEEL_ECORRUPT with why set when the whole file must be reset (a value
 * failing its checksum, a key that disagrees with its value, a broken
 * hard-state pair). key NULL: the walk ended (a 'T' left open). */
int store_meta_entry_check(const uint8_t *key, size_t kn, const uint8_t *val,
                           size_t vn, struct store_meta_pairs *pairs,
                           unsigned *version, char *why, size_t cap);

/* Tests: true makes store_meta_env_wrap write version 1 (a file written
 * before envelope v2). */
void store_meta_debug_env_v1(bool on);

#endif
