/* meta.lmdb's value envelope and the checks a key must pass against its
 * value (store/FORMAT.md "meta.lmdb", README design note 35). Pure
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

/* A sound value's key: its kind and length agree with the envelope's
 * kind, a catalogue key's base with the body's. */
bool store_meta_key_agrees(const uint8_t *key, size_t kn, const uint8_t *val,
                           const uint8_t *body, uint32_t len);

/* Hard-state keys come in pairs ('H' gid 'T' then 'H' gid 'V', adjacent
 * in key order). Called on every key in order; *open holds a 'T' waiting
 * for its 'V' (gid its group). False when a pair is broken. */
bool store_meta_hs_pairs(const uint8_t *key, size_t kn, uint8_t gid[16],
                         bool *open);

/* Tests: true makes store_meta_env_wrap write version 1 (a file written
 * before envelope v2). */
void store_meta_debug_env_v1(bool on);

#endif
