/* srv_js_xform: nats-server's subject transforms, for a stream's
 * `republish` and `subject_transform` (docs/jetstream-config.md). A
 * transform has a source pattern and a destination whose tokens are
 * literals, `$N` or `{{wildcard(N)}}` (the token the Nth `*` of the source
 * matched), `{{partition(n)}}` or `{{partition(n,i,...)}}` (FNV-1a of the
 * whole subject, or of the named wildcard tokens, mod n), and a last `>`
 * that carries over what the source's `>` matched. nats-server's other
 * functions (split, slice, left, right, random) are refused by name.
 * Applying one depends on the subject alone, so every replica that
 * applies it gets the same subject. Pure: no I/O, no clock. */
#ifndef KEEL_SRV_JS_XFORM_H
#define KEEL_SRV_JS_XFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"

#define SRV_JS_XFORM_ARGS_MAX 16 /* wildcard tokens one partition hashes */

enum srv_js_xform_op {
    SRV_JS_XF_LITERAL = 0,
    SRV_JS_XF_WILDCARD,
    SRV_JS_XF_PARTITION,
    SRV_JS_XF_FWC,
};

struct srv_js_xform_tok {
    uint8_t op;
    uint8_t nargs; /* source tokens: 1 for a wildcard; 0..ARGS_MAX hashed */
    uint8_t args[SRV_JS_XFORM_ARGS_MAX]; /* source token indexes */
    uint32_t buckets;                    /* partition's n */
    uint16_t off, len;                   /* a literal, in dest */
};

struct srv_js_xform {
    char src[SRV_JS_SUBJECT_BYTES_MAX + 1];  /* "" given means ">" */
    char dest[SRV_JS_SUBJECT_BYTES_MAX + 1]; /* as given */
    bool identity;                           /* `>` to `>` */
    uint32_t nsrc;                           /* source tokens */
    uint32_t ndest;
    struct srv_js_xform_tok tok[SRV_SUBJECT_TOKENS_MAX];
};

/* Compile src (NULL or "" = ">") to dest into *out. Returns 0, or
 * KEEL_EINVAL with nats-server's reason in errmsg ("invalid mapping
 * destination: wildcard index out of range in $3", "invalid subject"). */
KEEL_MUST_USE int srv_js_xform_compile(const char *src, const char *dest,
                                       struct srv_js_xform *out, char *errmsg);

/* Transform literal subject subj (len bytes) into out (cap bytes, NUL
 * terminated), *outlen its length. Returns 0, KEEL_ENOENT when subj does
 * not match the source (or is not a literal subject), KEEL_ELIMIT when
 * the result does not fit in cap or SRV_JS_SUBJECT_BYTES_MAX. */
KEEL_MUST_USE int srv_js_xform_apply(const struct srv_js_xform *x,
                                     const char *subj, size_t len, char *out,
                                     size_t cap, size_t *outlen);

/* The subjects dest can produce, as a pattern: every function token is
 * `*`. out needs SRV_JS_SUBJECT_BYTES_MAX + 1 bytes. */
void srv_js_xform_dest_pattern(const struct srv_js_xform *x,
                               char out[SRV_JS_SUBJECT_BYTES_MAX + 1]);

#endif
