/* srv_js_json: the one reader of JetStream config objects (stream and
 * consumer create/update requests). Each reader carries the object and
 * the API error a bad field answers with, so a parse step is one call
 * per field. A field absent or null leaves its destination as it was
 * (the caller set the default); a field of the wrong type returns
 * KEEL_EINVAL with *rd->jerr = rd->bad and a message naming the key.
 * Pure: no I/O. */
#ifndef KEEL_SRV_JS_JSON_H
#define KEEL_SRV_JS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "keel/error.h"
#include "srv_js_err.h"

/* Set *jerr to e and return KEEL_EINVAL with the message in errmsg. */
#define SRV_JS_CFG_ERR(jerr, e, errmsg, ...)                                   \
    (*(jerr) = (e), keel_err(KEEL_EINVAL, (errmsg), __VA_ARGS__))

struct srv_js_json_rd {
    const json_t *j;       /* the config object */
    enum srv_js_err bad;   /* the API error of a bad field */
    enum srv_js_err *jerr; /* set on a bad field */
    char *errmsg;          /* KEEL_ERRMSG_MAX bytes */
};

/* Start reading rd's object: *jerr = SRV_JS_OK; KEEL_EINVAL with
 * SRV_JS_EBAD_REQUEST when it is not an object (what names it). */
KEEL_MUST_USE int srv_js_json_begin(const struct srv_js_json_rd *rd,
                                    const char *what);

/* After a failed read: an error that set no API code (out of memory)
 * answers SRV_JS_EUNAVAILABLE (retry later). */
void srv_js_json_end(const struct srv_js_json_rd *rd);

/* An integer >= min. */
KEEL_MUST_USE int srv_js_json_int(const struct srv_js_json_rd *rd,
                                  const char *key, int64_t min, int64_t *v);

/* true or false. */
KEEL_MUST_USE int srv_js_json_bool(const struct srv_js_json_rd *rd,
                                   const char *key, bool *v);

/* A row of a field table read by srv_js_json_fields: an integer >= min
 * into *i, or a bool into *b. One line a field, so adding one is a
 * one-line change. */
struct srv_js_json_field {
    const char *key;
    int64_t *i;
    bool *b;
    int64_t min;
};
#define SRV_JS_JSON_INT(key, min, v)                                           \
    {                                                                          \
        (key), (v), NULL, (min)                                                \
    }
#define SRV_JS_JSON_BOOL(key, v)                                               \
    {                                                                          \
        (key), NULL, (v), 0                                                    \
    }
#define SRV_JS_JSON_NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* The n fields of f in order (srv_js_json_int, srv_js_json_bool); the
 * first bad one's error. */
KEEL_MUST_USE int srv_js_json_fields(const struct srv_js_json_rd *rd,
                                     const struct srv_js_json_field *f,
                                     size_t n);

/* One of the n strings names[]: *v is its index. *present (may be NULL)
 * tells whether the key was there. The error lists the names. */
KEEL_MUST_USE int srv_js_json_enum(const struct srv_js_json_rd *rd,
                                   const char *key, const char *const *names,
                                   int n, int *v, bool *present);

/* A string, copied to *dst (malloc'd; the caller frees it). An empty
 * string leaves *dst as absent does. KEEL_ENOMEM (*jerr untouched) when
 * the copy fails. */
KEEL_MUST_USE int srv_js_json_str(const struct srv_js_json_rd *rd,
                                  const char *key, char **dst);

/* A stream or consumer name (srv_js_name_valid) copied into dst
 * (SRV_JS_NAME_BYTES_MAX + 1 bytes); absent or empty leaves dst. */
KEEL_MUST_USE int srv_js_json_name(const struct srv_js_json_rd *rd,
                                   const char *key, char *dst);

/* The end of a config encode: *out = o when ok; else o is freed and
 * KEEL_ENOMEM returned. */
KEEL_MUST_USE int srv_js_json_out(json_t *o, bool ok, json_t **out,
                                  char *errmsg);

/* Two encoded configs j[0] and j[1] compare equal: both encodes
 * succeeded (rv, their results or'ed, is 0) and the objects are equal.
 * Frees both (either may be NULL after a failed encode). */
bool srv_js_json_same(int rv, json_t *j[2]);

/* Checks s (NULL: not a string) of a subject list against the n
 * subjects before it (srv_js_json_subjects): 0, or srv_js_json_fail's
 * error naming what is wrong. */
typedef int (*srv_js_json_subject_check)(const struct srv_js_json_rd *rd,
                                         char *const *before, size_t n,
                                         const char *s);

/* The n strings of array f (n <= SRV_JS_SUBJECTS_MAX), or the one string
 * only when n is 0, each passed by check, copied into a new array *v
 * (*nv counts the copies made: free them with srv_js_strv_free, also
 * after an error). The one reader of stream subjects and consumer
 * filter_subjects. */
KEEL_MUST_USE int srv_js_json_subjects(const struct srv_js_json_rd *rd,
                                       const json_t *f, size_t n,
                                       const char *only,
                                       srv_js_json_subject_check check,
                                       char ***v, uint32_t *nv);

/* The n strings of v as a new JSON array; NULL when out of memory. */
json_t *srv_js_json_strv(char *const *v, uint32_t n);

/* Free the n strings of v and v (NULL: nothing). */
void srv_js_strv_free(char **v, uint32_t n);

/* A bad field of rd's object: KEEL_EINVAL, *rd->jerr = rd->bad. */
__attribute__((format(printf, 2, 3))) int
srv_js_json_fail(const struct srv_js_json_rd *rd, const char *fmt, ...);

#endif
