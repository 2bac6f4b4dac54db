/* The bodies of meta.lmdb's fixed-layout values as tables: one row per
 * value kind names its key kind and its fields in on-disk order. meta.c
 * reads and writes every such value through store_meta_encode and
 * store_meta_decode, so a layout is declared once and its get and its put
 * cannot drift apart. Pure: no LMDB, no I/O.
 */
#ifndef KEEL_STORE_META_CODEC_H
#define KEEL_STORE_META_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define STORE_META_FIELDS_MAX 4u

enum store_meta_field_type {
    STORE_META_U32 = 1,  /* uint32_t, little-endian, 4 bytes */
    STORE_META_U64 = 2,  /* uint64_t, little-endian, 8 bytes */
    STORE_META_BOOL = 3, /* bool, one byte 0 or 1 (nonzero reads true) */
    STORE_META_BYTES = 4 /* uint8_t[bytes], as they are */
};

struct store_meta_field {
    uint8_t type;  /* enum store_meta_field_type */
    uint8_t bytes; /* STORE_META_BYTES only: the array's length */
    uint16_t off;  /* offsetof the field in the value's struct */
};

struct store_meta_codec {
    char kind; /* the key's and the envelope's kind byte */
    char sub;  /* the key's sub-kind byte after the group id, or 0 */
    uint8_t n_fields;
    struct store_meta_field fields[STORE_META_FIELDS_MAX];
};

/* The value kinds (key layout in meta.c's header comment). */
extern const struct store_meta_codec STORE_META_CODEC_INCARNATION;
extern const struct store_meta_codec STORE_META_CODEC_NODE;
extern const struct store_meta_codec STORE_META_CODEC_HS_TERM;
extern const struct store_meta_codec STORE_META_CODEC_SEG;
extern const struct store_meta_codec STORE_META_CODEC_SNAP;
extern const struct store_meta_codec STORE_META_CODEC_AMNESIA;
extern const struct store_meta_codec STORE_META_CODEC_RECOVER_WAIT;

/* The body's length in bytes: the sum of the fields'. */
uint32_t store_meta_codec_len(const struct store_meta_codec *c);

/* Write obj's fields into body (at least store_meta_codec_len bytes);
 * returns the length written. */
uint32_t store_meta_encode(const struct store_meta_codec *c, const void *obj,
                           uint8_t *body);

/* Fill obj from a body of len bytes read from disk. KEEL_ECORRUPT (obj
 * untouched) when len is not the codec's length. */
int store_meta_decode(const struct store_meta_codec *c, const uint8_t *body,
                      uint32_t len, void *obj);

#endif
