/* meta.lmdb value bodies, table-driven (meta_codec.h). The layouts are
 * on disk: a row's field order and widths never change; a new layout is
 * a new kind. */
#include <stdbool.h>
#include <string.h>

#include <keel/assert.h>
#include <keel/bytes.h>
#include <keel/error.h>

#include "meta.h"
#include "meta_codec.h"
#include "meta_env.h"

#define U64(s, f)                                                              \
    {                                                                          \
        STORE_META_U64, 0, (uint16_t)offsetof(s, f)                            \
    }
#define U32(s, f)                                                              \
    {                                                                          \
        STORE_META_U32, 0, (uint16_t)offsetof(s, f)                            \
    }

/* Incarnation and recover wait are a bare uint8_t[16] and uint64_t. */
const struct store_meta_codec STORE_META_CODEC_INCARNATION = {
    'I', 0, 1, {{STORE_META_BYTES, 16, 0}}};

const struct store_meta_codec STORE_META_CODEC_NODE = {
    'N',
    0,
    2,
    {{STORE_META_BYTES, STORE_BOOT_ID_BYTES,
      (uint16_t)offsetof(struct store_meta_node, boot_id)},
     {STORE_META_BOOL, 0, (uint16_t)offsetof(struct store_meta_node, clean)}}};

const struct store_meta_codec STORE_META_CODEC_HS_TERM = {
    'H', 'T', 1, {{STORE_META_U64, 0, 0}}};

const struct store_meta_codec STORE_META_CODEC_SEG = {
    'C',
    0,
    4,
    {U64(struct store_meta_seg, base_index), U64(struct store_meta_seg, salt),
     U64(struct store_meta_seg, size_bytes),
     U64(struct store_meta_seg, first_index)}};

const struct store_meta_codec STORE_META_CODEC_SNAP = {
    'S',
    0,
    4,
    {U64(struct store_meta_snap, index), U64(struct store_meta_snap, term),
     U64(struct store_meta_snap, older_index),
     U64(struct store_meta_snap, older_term)}};

const struct store_meta_codec STORE_META_CODEC_AMNESIA = {
    'A',
    0,
    3,
    {U32(struct store_meta_amnesia, reason), U64(struct store_meta_amnesia, t0),
     U64(struct store_meta_amnesia, target)}};

const struct store_meta_codec STORE_META_CODEC_RECOVER_WAIT = {
    'W', 0, 1, {{STORE_META_U64, 0, 0}}};

static uint32_t field_len(const struct store_meta_field *f)
{
    ASSERT(f != NULL);
    switch (f->type) {
    case STORE_META_U32:
        return 4;
    case STORE_META_U64:
        return 8;
    case STORE_META_BOOL:
        return 1;
    default:
        ASSERT(f->type == STORE_META_BYTES);
        ASSERT(f->bytes > 0);
        return f->bytes;
    }
}

uint32_t store_meta_codec_len(const struct store_meta_codec *c)
{
    uint32_t n = 0;

    ASSERT(c != NULL);
    ASSERT(c->n_fields >= 1 && c->n_fields <= STORE_META_FIELDS_MAX);
    for (unsigned i = 0; i < c->n_fields; i++) {
        n += field_len(&c->fields[i]);
    }
    ASSERT(n <= STORE_META_BODY_MAX);
    return n;
}

/* An integer or bool field of the struct at o, widened. */
static uint64_t field_load(const struct store_meta_field *f, const uint8_t *o)
{
    uint64_t v64 = 0;
    uint32_t v32 = 0;
    bool v = false;

    ASSERT(f->type != STORE_META_BYTES);
    if (f->type == STORE_META_U64) {
        memcpy(&v64, o, sizeof v64);
        return v64;
    }
    if (f->type == STORE_META_U32) {
        memcpy(&v32, o, sizeof v32);
        return v32;
    }
    memcpy(&v, o, sizeof v);
    return v ? 1 : 0;
}

/* Store v into an integer or bool field of the struct at o (a u32 field's
 * v came from 4 bytes: it fits). */
static void field_store(const struct store_meta_field *f, uint8_t *o,
                        uint64_t v)
{
    uint32_t v32 = (uint32_t)v;
    bool b = v != 0;

    ASSERT(f->type != STORE_META_BYTES);
    if (f->type == STORE_META_U64) {
        memcpy(o, &v, sizeof v);
    } else if (f->type == STORE_META_U32) {
        memcpy(o, &v32, sizeof v32);
    } else {
        memcpy(o, &b, sizeof b);
    }
}

uint32_t store_meta_encode(const struct store_meta_codec *c, const void *obj,
                           uint8_t *body)
{
    const uint8_t *o = obj;
    uint32_t n = 0;

    ASSERT(c != NULL && obj != NULL);
    ASSERT(body != NULL);
    for (unsigned i = 0; i < c->n_fields; i++) {
        const struct store_meta_field *f = &c->fields[i];
        uint32_t w = field_len(f);
        if (f->type == STORE_META_BYTES) {
            memcpy(body + n, o + f->off, w);
        } else {
            keel_put_le(body + n, field_load(f, o + f->off), w);
        }
        n += w;
    }
    ASSERT(n == store_meta_codec_len(c));
    return n;
}

int store_meta_decode(const struct store_meta_codec *c, const uint8_t *body,
                      uint32_t len, void *obj)
{
    uint8_t *o = obj;
    uint32_t n = 0;

    ASSERT(c != NULL && obj != NULL);
    ASSERT(body != NULL || len == 0);
    if (len != store_meta_codec_len(c)) {
        return KEEL_ECORRUPT;
    }
    for (unsigned i = 0; i < c->n_fields; i++) {
        const struct store_meta_field *f = &c->fields[i];
        uint32_t w = field_len(f);
        if (f->type == STORE_META_BYTES) {
            memcpy(o + f->off, body + n, w);
        } else {
            field_store(f, o + f->off, keel_get_le(body + n, w));
        }
        n += w;
    }
    ASSERT(n == len);
    return 0;
}
