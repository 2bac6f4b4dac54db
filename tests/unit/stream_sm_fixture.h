/* The fixture of the stream state machine's unit tests
 * (test_srv_stream_sm.c, test_srv_stream_sources.c, test_srv_js_direct.c,
 * test_srv_stream_ttl.c's apply):
 * one machine, the next Raft index, the last result, and apply by the
 * path a committed entry takes (encode, decode, apply). Functions that
 * assert use cmocka. */
#ifndef KEEL_TEST_STREAM_SM_FIXTURE_H
#define KEEL_TEST_STREAM_SM_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "keel/error.h"
#include "keel_stream_entry.h"
#include "srv_js_config.h"
#include "srv_stream_sm.h"

struct sm_fixture {
    struct srv_stream_sm sm;
    uint64_t index; /* next Raft index */
    struct srv_stream_result res;
};

/* A cmocka setup: *state becomes a machine for stream name. */
static inline int sm_fixture_setup(void **state, const char *name)
{
    struct sm_fixture *f = calloc(1, sizeof *f);
    if (f == NULL || srv_stream_sm_init(&f->sm, name) != 0) {
        free(f);
        return -1;
    }
    f->index = 1;
    *state = f;
    return 0;
}

static inline int sm_fixture_teardown(void **state)
{
    struct sm_fixture *f = *state;
    srv_stream_sm_close(&f->sm);
    free(f);
    return 0;
}

/* Encode, decode and apply one entry to sm at index, its result in *res;
 * the encoded entry is handed back in *buf (the caller frees it). */
static inline void sm_fixture_apply_to(struct srv_stream_sm *sm, uint64_t index,
                                       struct srv_stream_result *res,
                                       const struct keel_stream_entry *e,
                                       uint8_t **buf, size_t *len)
{
    struct keel_stream_entry d;
    char err[256];
    *buf = NULL;
    *len = 0;
    assert_int_equal(keel_stream_entry_encode(e, buf, len), 0);
    assert_int_equal(keel_stream_entry_decode(*buf, *len, &d, err), 0);
    assert_int_equal(srv_stream_sm_apply(sm, index, &d, res), 0);
}

/* Encode, decode and apply one entry; its result is in f->res. */
static inline void sm_fixture_apply(struct sm_fixture *f,
                                    const struct keel_stream_entry *e)
{
    uint8_t *buf;
    size_t len;
    sm_fixture_apply_to(&f->sm, f->index++, &f->res, e, &buf, &len);
    free(buf);
}

/* An entry that encodes but whose decode refuses it as corrupt. */
static inline void sm_fixture_refused(const struct keel_stream_entry *e)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    struct keel_stream_entry d;
    char err[256];
    assert_int_equal(keel_stream_entry_encode(e, &buf, &len), 0);
    assert_int_equal(keel_stream_entry_decode(buf, len, &d, err),
                     KEEL_ECORRUPT);
    free(buf);
}

/* Parse a stream config from JSON text (asserted to be JSON). */
static inline int sm_fixture_parse_cfg(const char *body,
                                       struct srv_stream_config *c,
                                       enum srv_js_err *jerr, char *err)
{
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    assert_non_null(j);
    int rv = srv_stream_config_parse(j, c, jerr, err);
    json_decref(j);
    return rv;
}

#endif
