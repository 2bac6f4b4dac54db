/* msgpack codec of Raft messages (format in codec.h). */
#include <msgpack.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "keel/assert.h"
#include "keel/bytes.h"
#include "keel/error.h"

#define HEADER_FIELDS 7

/* A scalar body field: where it lives in struct raft_msg, and whether the
 * wire carries it as a flag (0 or 1, a uint8_t) or a uint64. */
struct field {
    size_t off;
    bool flag;
};

#define U64(x)                                                                 \
    {                                                                          \
        offsetof(struct raft_msg, x), false                                    \
    }
#define FLAG(x)                                                                \
    {                                                                          \
        offsetof(struct raft_msg, x), true                                     \
    }

/* A wire type's body (codec.h): how many fields follow the header, and its
 * scalars, which come first. What follows them (entries; a chunk and a
 * configuration; an answer's status and copy) pack_body and decode_body
 * handle by type. */
struct layout {
    bool wire; /* false: not a wire type (yet) */
    uint32_t fields;
    uint32_t n;
    struct field f[6];
};

static const struct layout layouts[RAFT_MSG_TYPE_MAX + 1] = {
    [RAFT_MSG_APPEND] = {true,
                         6,
                         5,
                         {U64(append.prev_index), U64(append.prev_term),
                          U64(append.commit), U64(append.leader_last),
                          U64(append.ctx)}},
    [RAFT_MSG_APPEND_RESP] = {true,
                              6,
                              6,
                              {FLAG(append_resp.success),
                               U64(append_resp.match), U64(append_resp.last),
                               U64(append_resp.hint),
                               U64(append_resp.hint_term),
                               U64(append_resp.ctx)}},
    [RAFT_MSG_VOTE] = {true,
                       4,
                       4,
                       {FLAG(vote.pre), FLAG(vote.transfer),
                        U64(vote.last_index), U64(vote.last_term)}},
    [RAFT_MSG_VOTE_RESP] = {true,
                            2,
                            2,
                            {FLAG(vote_resp.pre), FLAG(vote_resp.granted)}},
    [RAFT_MSG_SNAPSHOT] = {true,
                           8,
                           6,
                           {U64(snapshot.index), U64(snapshot.term),
                            U64(snapshot.leader_last), U64(snapshot.log_first),
                            U64(snapshot.offset), FLAG(snapshot.done)}},
    [RAFT_MSG_SNAPSHOT_RESP] = {true,
                                3,
                                3,
                                {FLAG(snapshot_resp.success),
                                 U64(snapshot_resp.match),
                                 U64(snapshot_resp.offset)}},
    [RAFT_MSG_TIMEOUT_NOW] = {true, 0, 0, {{0, false}}},
    [RAFT_MSG_FETCH] = {true, 1, 1, {U64(discard.index)}},
    [RAFT_MSG_DISCARD] = {true, 1, 1, {U64(discard.index)}},
    /* decode_answer checks the status range and the copy. */
    [RAFT_MSG_FETCH_RESP] = {true, 4, 0, {{0, false}}},
    [RAFT_MSG_DISCARD_RESP] = {true, 4, 0, {{0, false}}},
};

/* Fields after the header, per message type; UINT32_MAX: not a wire type
 * (yet). */
static uint32_t body_fields(uint8_t type)
{
    if (type > RAFT_MSG_TYPE_MAX || !layouts[type].wire) {
        return UINT32_MAX;
    }
    return layouts[type].fields;
}

/* m's scalars in wire order (m->type is a wire type). */
static void pack_scalars(msgpack_packer *pk, const struct raft_msg *m)
{
    const struct layout *l = &layouts[m->type];

    ASSERT(l->wire && l->n <= sizeof l->f / sizeof l->f[0]);
    for (uint32_t i = 0; i < l->n; i++) {
        const uint8_t *p = (const uint8_t *)m + l->f[i].off;
        uint64_t v;
        if (l->f[i].flag) {
            msgpack_pack_uint8(pk, *p);
        } else {
            memcpy(&v, p, sizeof v);
            msgpack_pack_uint64(pk, v);
        }
    }
}

static void pack_entries(msgpack_packer *pk, const struct raft_msg_append *a)
{
    ASSERT(a->n_entries <= RAFT_APPEND_ENTRIES_MAX);
    ASSERT(a->n_entries == 0 || a->entries != NULL);
    msgpack_pack_array(pk, a->n_entries);
    for (uint32_t i = 0; i < a->n_entries; i++) {
        const struct raft_entry *e = &a->entries[i];
        msgpack_pack_array(pk, 3);
        msgpack_pack_uint64(pk, e->term);
        msgpack_pack_uint8(pk, e->type);
        msgpack_pack_bin(pk, e->len);
        msgpack_pack_bin_body(pk, e->buf, e->len);
    }
}

static void pack_body(msgpack_packer *pk, const struct raft_msg *m)
{
    uint8_t cfg[RAFT_CONFIG_BYTES_MAX];

    pack_scalars(pk, m);
    switch (m->type) {
    case RAFT_MSG_APPEND:
        pack_entries(pk, &m->append);
        break;
    case RAFT_MSG_SNAPSHOT: {
        uint32_t n = raft_config_encode(&m->snapshot.config, cfg, sizeof cfg);
        msgpack_pack_bin(pk, m->snapshot.len);
        msgpack_pack_bin_body(pk, m->snapshot.chunk, m->snapshot.len);
        msgpack_pack_bin(pk, n);
        msgpack_pack_bin_body(pk, cfg, n);
        break;
    }
    case RAFT_MSG_FETCH_RESP:
    case RAFT_MSG_DISCARD_RESP: {
        /* The copy travels as an entry list of 0 or 1 (HAS only). */
        struct raft_msg_append one = {.n_entries =
                                          m->discard_resp.entry != NULL ? 1 : 0,
                                      .entries = m->discard_resp.entry};
        msgpack_pack_uint64(pk, m->discard_resp.index);
        msgpack_pack_uint8(pk, m->discard_resp.status);
        msgpack_pack_uint64(pk, m->discard_resp.term);
        pack_entries(pk, &one);
        break;
    }
    default:
        break;
    }
}

static int check_encodable(const struct raft_msg *m, uint32_t fields,
                           char *errmsg)
{
    if (fields == UINT32_MAX || m->from == 0 || m->to == 0) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "raft message type %u from %llu to %llu cannot be "
                        "sent: fix the caller",
                        m->type, (unsigned long long)m->from,
                        (unsigned long long)m->to);
    }
    if ((m->type == RAFT_MSG_FETCH_RESP || m->type == RAFT_MSG_DISCARD_RESP) &&
        (m->discard_resp.status < RAFT_DISCARD_NONE ||
         m->discard_resp.status > RAFT_DISCARD_HAS ||
         (m->discard_resp.entry != NULL &&
          (m->discard_resp.status != RAFT_DISCARD_HAS ||
           m->discard_resp.entry->term == 0)))) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "fetch/discard answer with status %u: a copy goes "
                        "only with HAS, and needs a term",
                        m->discard_resp.status);
    }
    if (m->type == RAFT_MSG_APPEND &&
        (m->append.n_entries > RAFT_APPEND_ENTRIES_MAX ||
         (m->append.n_entries > 0 && m->append.entries == NULL))) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "AppendEntries without its %u payloads: fill them "
                        "from the store before encoding",
                        m->append.n_entries);
    }
    return 0;
}

static void pack_header(msgpack_packer *pk, const struct raft_msg *m,
                        uint32_t fields)
{
    msgpack_pack_array(pk, HEADER_FIELDS + fields);
    msgpack_pack_uint8(pk, RAFT_CODEC_VERSION);
    msgpack_pack_uint8(pk, m->type);
    msgpack_pack_uint64(pk, m->from);
    msgpack_pack_uint64(pk, m->from_incarnation);
    msgpack_pack_uint64(pk, m->to);
    msgpack_pack_uint64(pk, m->to_incarnation);
    msgpack_pack_uint64(pk, m->term);
}

/* Bytes the entries of a take at most once packed: per entry a fixarray,
 * a uint64 (9), a uint8 (2) and a bin32 header (5); the array header 5. */
static size_t entries_bound(const struct raft_msg_append *a)
{
    size_t n = 5;
    for (uint32_t i = 0; i < a->n_entries; i++) {
        n += 1 + 9 + 2 + 5 + a->entries[i].len;
    }
    return n;
}

static int finish(msgpack_sbuffer *sb, void **buf, size_t *len, char *errmsg)
{
    if (sb->data == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "encoding a raft message");
    }
    if (sb->size > RAFT_MSG_BYTES_MAX) {
        msgpack_sbuffer_destroy(sb);
        return keel_err(KEEL_ETOOBIG, errmsg,
                        "raft message of %zu bytes exceeds the frame maximum; "
                        "send fewer entries per AppendEntries",
                        sb->size);
    }
    *buf = sb->data;
    *len = sb->size;
    return 0;
}

int raft_msg_encode(const struct raft_msg *m, void **buf, size_t *len,
                    char *errmsg)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    uint32_t fields = body_fields(m->type);

    ASSERT(buf != NULL);
    ASSERT(len != NULL);
    int rv = check_encodable(m, fields, errmsg);
    if (rv != 0) {
        return rv;
    }
    msgpack_sbuffer_init(&sb);
    if (m->type == RAFT_MSG_APPEND) {
        /* Sized once: growing by doubling copied a large AppendEntries
         * two or three times. */
        size_t cap = RAFT_APPEND_HEAD_BYTES_MAX + entries_bound(&m->append);
        sb.data = malloc(cap);
        sb.alloc = sb.data != NULL ? cap : 0;
    }
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_header(&pk, m, fields);
    pack_body(&pk, m);
    return finish(&sb, buf, len, errmsg);
}

/* A msgpack writer into a fixed buffer; overflow is a bug (the head's size
 * is bounded by RAFT_APPEND_HEAD_BYTES_MAX). */
struct fixed_buf {
    uint8_t *p;
    size_t cap;
    size_t len;
};

static int fixed_write(void *data, const char *buf, size_t len)
{
    struct fixed_buf *f = data;
    ASSERT(f->len + len <= f->cap);
    memcpy(f->p + f->len, buf, len);
    f->len += len;
    return 0;
}

int raft_msg_encode_append_head(const struct raft_msg *m, uint8_t *out,
                                size_t *len, char *errmsg)
{
    struct fixed_buf f = {out, RAFT_APPEND_HEAD_BYTES_MAX, 0};
    msgpack_packer pk;
    uint32_t fields = body_fields(m->type);

    ASSERT(m->type == RAFT_MSG_APPEND);
    ASSERT(out != NULL && len != NULL);
    int rv = check_encodable(m, fields, errmsg);
    if (rv != 0) {
        return rv;
    }
    msgpack_packer_init(&pk, &f, fixed_write);
    pack_header(&pk, m, fields);
    pack_scalars(&pk, m);
    *len = f.len;
    return 0;
}

int raft_msg_encode_append_entries(const struct raft_msg *m, void **buf,
                                   size_t *len, char *errmsg)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;

    ASSERT(m->type == RAFT_MSG_APPEND);
    int rv = check_encodable(m, body_fields(m->type), errmsg);
    if (rv != 0) {
        return rv;
    }
    size_t cap = entries_bound(&m->append);
    msgpack_sbuffer_init(&sb);
    sb.data = malloc(cap);
    sb.alloc = sb.data != NULL ? cap : 0;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_entries(&pk, &m->append);
    return finish(&sb, buf, len, errmsg);
}

/* ---- decoding ---- */

/* Walk the msgpack bytes before unpacking: every declared array, map, str,
 * bin and ext size must fit in what is left, so a hostile count never makes
 * msgpack-c allocate for elements that are not there. Exactly one object,
 * no trailing bytes. Each iteration consumes at least one byte. */
static int prescan(const uint8_t *p, size_t len)
{
    static const uint8_t fixed[] = {
        [0xc0] = 1, [0xc2] = 1,  [0xc3] = 1, [0xca] = 5, [0xcb] = 9,
        [0xcc] = 2, [0xcd] = 3,  [0xce] = 5, [0xcf] = 9, [0xd0] = 2,
        [0xd1] = 3, [0xd2] = 5,  [0xd3] = 9, [0xd4] = 3, [0xd5] = 4,
        [0xd6] = 6, [0xd7] = 10, [0xd8] = 18};
    size_t pos = 0;
    uint64_t need = 1;
    while (need > 0) {
        if (pos >= len) {
            return KEEL_ETRUNCATED;
        }
        uint8_t b = p[pos];
        uint64_t count = 0; /* elements this object announces */
        uint64_t size = 1;  /* bytes of this object itself */
        uint32_t lenbytes = 0;
        bool payload = false;
        if (b <= 0x7f || b >= 0xe0) {
            /* fixint: one byte */
        } else if (b <= 0x8f) {
            count = 2u * (b & 0x0f);
        } else if (b <= 0x9f) {
            count = b & 0x0f;
        } else if (b <= 0xbf) {
            size = 1u + (b & 0x1f);
        } else if (b == 0xc4 || b == 0xd9) {
            lenbytes = 1;
            payload = true;
        } else if (b == 0xc5 || b == 0xda) {
            lenbytes = 2;
            payload = true;
        } else if (b == 0xc6 || b == 0xdb) {
            lenbytes = 4;
            payload = true;
        } else if (b >= 0xc7 && b <= 0xc9) {
            lenbytes = b == 0xc7 ? 1 : b == 0xc8 ? 2 : 4;
            payload = true;
            size = 2; /* the marker and the ext type byte */
        } else if (b == 0xdc || b == 0xde) {
            lenbytes = 2;
        } else if (b == 0xdd || b == 0xdf) {
            lenbytes = 4;
        } else if (fixed[b] != 0) {
            size = fixed[b];
        } else {
            return KEEL_EPROTO; /* 0xc1: never used */
        }
        if (lenbytes > 0) {
            if (len - pos < 1u + lenbytes) {
                return KEEL_ETRUNCATED;
            }
            uint64_t n = keel_get_be(p + pos + 1, lenbytes);
            if (payload) {
                size += lenbytes + n;
            } else {
                size = 1u + lenbytes;
                count = (b == 0xde || b == 0xdf) ? 2 * n : n;
            }
        }
        if (size > len - pos) {
            return KEEL_ETRUNCATED;
        }
        pos += size;
        need = need - 1 + count;
        if (need > len - pos) {
            return KEEL_ETRUNCATED; /* more elements than bytes left */
        }
    }
    return pos == len ? 0 : KEEL_EPROTO;
}

static bool get_u64(const msgpack_object *o, uint64_t *v)
{
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        return false;
    }
    *v = o->via.u64;
    return true;
}

static bool get_bin(const msgpack_object *o, const void **p, uint32_t *n)
{
    if (o->type != MSGPACK_OBJECT_BIN ||
        o->via.bin.size > RAFT_ENTRY_BYTES_MAX) {
        return false;
    }
    *p = o->via.bin.size > 0 ? o->via.bin.ptr : NULL;
    *n = o->via.bin.size;
    return true;
}

static int decode_entries(const msgpack_object *o, struct raft_msg *m,
                          struct raft_entry *entries, char *errmsg)
{
    if (o->type != MSGPACK_OBJECT_ARRAY ||
        o->via.array.size > RAFT_APPEND_ENTRIES_MAX) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "AppendEntries: entries must be an array of at most "
                        "%d",
                        RAFT_APPEND_ENTRIES_MAX);
    }
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        struct raft_entry *out = &entries[i];
        uint64_t type;
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 3 ||
            !get_u64(&e->via.array.ptr[0], &out->term) || out->term == 0 ||
            !get_u64(&e->via.array.ptr[1], &type) || type < RAFT_ENTRY_NORMAL ||
            type > RAFT_ENTRY_CONFIG ||
            !get_bin(&e->via.array.ptr[2], &out->buf, &out->len)) {
            return keel_err(KEEL_EPROTO, errmsg,
                            "AppendEntries: entry %u is not [term > 0, type, "
                            "payload]",
                            i);
        }
        out->type = (uint8_t)type;
        if (type == RAFT_ENTRY_CONFIG) {
            struct raft_config c;
            if (raft_config_decode(out->buf, out->len, &c) != 0) {
                return keel_err(KEEL_EPROTO, errmsg,
                                "AppendEntries: entry %u is a malformed "
                                "configuration",
                                i);
            }
        }
    }
    m->append.n_entries = o->via.array.size;
    m->append.entries = o->via.array.size > 0 ? entries : NULL;
    return 0;
}

/* FETCH_RESP / DISCARD_RESP: [index, status, term, [entry]?]; a copy only
 * with HAS. */
static int decode_answer(const msgpack_object *f, struct raft_msg *m,
                         struct raft_entry *entries, char *errmsg)
{
    struct raft_msg one = {.type = RAFT_MSG_APPEND};
    uint64_t st = 0;
    ASSERT(m->type == RAFT_MSG_FETCH_RESP || m->type == RAFT_MSG_DISCARD_RESP);
    ASSERT(entries != NULL);
    if (!get_u64(&f[0], &m->discard_resp.index) || !get_u64(&f[1], &st) ||
        st < RAFT_DISCARD_NONE || st > RAFT_DISCARD_HAS ||
        !get_u64(&f[2], &m->discard_resp.term)) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "fetch/discard answer: index, status 1..3 and term "
                        "expected");
    }
    m->discard_resp.status = (uint8_t)st;
    int rv = decode_entries(&f[3], &one, entries, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (one.append.n_entries > 1 ||
        (one.append.n_entries == 1 && st != RAFT_DISCARD_HAS)) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "fetch/discard answer: at most one copy, only with "
                        "HAS");
    }
    m->discard_resp.entry = one.append.entries;
    return 0;
}

/* m's scalars from f[0..] (m->type is a wire type); false when one has the
 * wrong type or range. */
static bool get_scalars(const msgpack_object *f, struct raft_msg *m)
{
    const struct layout *l = &layouts[m->type];

    ASSERT(l->wire && l->n <= sizeof l->f / sizeof l->f[0]);
    for (uint32_t i = 0; i < l->n; i++) {
        uint8_t *p = (uint8_t *)m + l->f[i].off;
        uint64_t v;
        if (!get_u64(&f[i], &v) || (l->f[i].flag && v > 1)) {
            return false;
        }
        if (l->f[i].flag) {
            *p = (uint8_t)v;
        } else {
            memcpy(p, &v, sizeof v);
        }
    }
    return true;
}

/* The type's fields, f[0..] after the header: the scalars, then what
 * follows them. */
static int decode_body(const msgpack_object *f, struct raft_msg *m,
                       struct raft_entry *entries, char *errmsg)
{
    const void *cfg;
    uint32_t n;

    if (m->type == RAFT_MSG_FETCH_RESP || m->type == RAFT_MSG_DISCARD_RESP) {
        return decode_answer(f, m, entries, errmsg);
    }
    bool ok = get_scalars(f, m);
    if (ok && m->type == RAFT_MSG_APPEND) {
        return decode_entries(&f[5], m, entries, errmsg);
    }
    if (ok && m->type == RAFT_MSG_SNAPSHOT) {
        ok = get_bin(&f[6], &m->snapshot.chunk, &m->snapshot.len) &&
             get_bin(&f[7], &cfg, &n) &&
             raft_config_decode(cfg, n, &m->snapshot.config) == 0;
    }
    if (!ok) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "raft message type %u: a field has the wrong type or "
                        "range",
                        m->type);
    }
    return 0;
}

static int decode_header(const msgpack_object *o, struct raft_msg *m,
                         char *errmsg)
{
    uint64_t version;
    uint64_t type;
    const msgpack_object *f = o->via.array.ptr;

    ASSERT(o->type == MSGPACK_OBJECT_ARRAY);
    ASSERT(o->via.array.size >= HEADER_FIELDS);
    if (!get_u64(&f[0], &version) || !get_u64(&f[1], &type)) {
        return keel_err(KEEL_EPROTO, errmsg, "raft frame header malformed");
    }
    if (version != RAFT_CODEC_VERSION) {
        return keel_err(KEEL_EVERSION, errmsg,
                        "raft frame version %llu, this node speaks %d: "
                        "upgrade the older node",
                        (unsigned long long)version, RAFT_CODEC_VERSION);
    }
    if (type > RAFT_MSG_TYPE_MAX || body_fields((uint8_t)type) == UINT32_MAX ||
        o->via.array.size != HEADER_FIELDS + body_fields((uint8_t)type)) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "raft message type %llu unknown or with %u fields",
                        (unsigned long long)type, o->via.array.size);
    }
    m->type = (uint8_t)type;
    if (!get_u64(&f[2], &m->from) || !get_u64(&f[3], &m->from_incarnation) ||
        !get_u64(&f[4], &m->to) || !get_u64(&f[5], &m->to_incarnation) ||
        !get_u64(&f[6], &m->term) || m->from == 0 || m->to == 0) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "raft frame: sender, receiver or term malformed");
    }
    return 0;
}

int raft_msg_decode(const void *buf, size_t len, struct raft_msg *m,
                    struct raft_entry *entries, char *errmsg)
{
    msgpack_unpacked u;
    size_t off = 0;
    int rv;

    ASSERT(m != NULL);
    ASSERT(entries != NULL);
    memset(m, 0, sizeof *m);
    if (len > RAFT_MSG_BYTES_MAX) {
        return keel_err(KEEL_ETOOBIG, errmsg, "raft frame of %zu bytes", len);
    }
    rv = buf == NULL ? KEEL_ETRUNCATED : prescan(buf, len);
    if (rv != 0) {
        return keel_err(rv, errmsg, "raft frame of %zu bytes is %s", len,
                        rv == KEEL_ETRUNCATED ? "truncated" : "malformed");
    }
    msgpack_unpacked_init(&u);
    if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        off != len) {
        rv = keel_err(KEEL_EPROTO, errmsg,
                      "raft frame is not one msgpack "
                      "object");
        goto out;
    }
    if (u.data.type != MSGPACK_OBJECT_ARRAY ||
        u.data.via.array.size < HEADER_FIELDS) {
        rv = keel_err(KEEL_EPROTO, errmsg, "raft frame is not an array");
        goto out;
    }
    rv = decode_header(&u.data, m, errmsg);
    if (rv == 0) {
        rv = decode_body(u.data.via.array.ptr + HEADER_FIELDS, m, entries,
                         errmsg);
    }
out:
    /* Payload pointers reference buf (msgpack-c unpacks bin zero-copy), so
     * the unpacked objects can go now. */
    msgpack_unpacked_destroy(&u);
    return rv;
}
