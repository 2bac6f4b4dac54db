/* srv_js_direct_req: DIRECT.GET requests read as nats-server 2.11 reads
 * them, and the seqs a batch or multi_last names (see the header). */
#include "srv_js_direct_req.h"

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_consumer_cfg.h"
#include "srv_js_config.h"

/* ---- parsing: a field of the wrong type is "Malformed Request", as
 * nats-server's JSON decoder fails on it ---- */

/* An integer field (absent or null: 0); unsigned refuses a negative one,
 * as nats-server's uint64 fields do. */
static int get_int(const json_t *body, const char *key, bool is_unsigned,
                   int64_t *out)
{
    const json_t *v = json_object_get(body, key);
    *out = 0;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_integer(v) || (is_unsigned && json_integer_value(v) < 0)) {
        return KEEL_EINVAL;
    }
    *out = (int64_t)json_integer_value(v);
    return 0;
}

static int get_u64(const json_t *body, const char *key, uint64_t *out)
{
    int64_t v = 0;
    int rv = get_int(body, key, true, &v);
    *out = (uint64_t)v;
    return rv;
}

static int get_str(const json_t *body, const char *key, const char **out)
{
    const json_t *v = json_object_get(body, key);
    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_string(v)) {
        return KEEL_EINVAL;
    }
    *out = json_string_length(v) > 0 ? json_string_value(v) : NULL;
    return 0;
}

static int get_time(const json_t *body, const char *key, bool *has, int64_t *ns)
{
    const char *s = NULL;
    *has = false;
    *ns = 0;
    if (get_str(body, key, &s) != 0 ||
        (s != NULL && srv_js_time_parse(s, ns) != 0)) {
        return KEEL_EINVAL;
    }
    *has = s != NULL;
    return 0;
}

/* multi_last: an array of strings, at most SRV_JS_DIRECT_FILTERS_MAX. */
static int get_multi(const json_t *body, const json_t **out)
{
    const json_t *v = json_object_get(body, "multi_last");
    size_t i;
    const json_t *s;
    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) > SRV_JS_DIRECT_FILTERS_MAX) {
        return KEEL_EINVAL;
    }
    json_array_foreach(v, i, s)
    {
        if (!json_is_string(s)) {
            return KEEL_EINVAL;
        }
    }
    *out = json_array_size(v) > 0 ? v : NULL;
    return 0;
}

static int parse(const json_t *body, struct srv_js_direct_req *r)
{
    const json_t *nh = json_object_get(body, "no_hdr");
    *r = (struct srv_js_direct_req){0};
    if (!json_is_object(body) || get_u64(body, "seq", &r->seq) != 0 ||
        get_str(body, "last_by_subj", &r->last_for) != 0 ||
        get_str(body, "next_by_subj", &r->next_for) != 0 ||
        get_int(body, "batch", false, &r->batch) != 0 ||
        get_int(body, "max_bytes", false, &r->max_bytes) != 0 ||
        get_time(body, "start_time", &r->has_start, &r->start_ns) != 0 ||
        get_multi(body, &r->multi) != 0 ||
        get_u64(body, "up_to_seq", &r->up_to_seq) != 0 ||
        get_time(body, "up_to_time", &r->has_up_to_time, &r->up_to_ns) != 0 ||
        (nh != NULL && !json_is_boolean(nh) && !json_is_null(nh))) {
        return KEEL_EINVAL;
    }
    r->no_hdr = json_is_true(nh);
    return 0;
}

/* Options that make no sense together: nats-server's 408 Bad Request. */
static bool conflicting(const struct srv_js_direct_req *r)
{
    bool seq = r->seq > 0, last = r->last_for != NULL;
    bool next = r->next_for != NULL, multi = r->multi != NULL;
    return (seq && last) || (seq && r->has_start) || (r->has_start && last) ||
           (last && next) || (last && r->batch > 0) || (last && multi) ||
           (next && multi) || (r->up_to_seq > 0 && r->has_up_to_time);
}

/* The first seq stored at or after t_ns, last_seq + 1 when none
 * (nats-server's GetSeqFromTime). Binary search: stored times ascend with
 * seq (the leader stamps max(clock, previous)); each probe skips deleted
 * seqs, so the work is bounded by the stream's seqs. */
uint64_t srv_js_direct_seq_at_time(const struct srv_stream_sm *sm, int64_t t_ns)
{
    uint64_t lo = srv_stream_sm_first_seq(sm), hi = sm->last_seq + 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2, s = mid;
        const struct srv_stream_slot *sl = NULL;
        while (s < hi && (sl = srv_stream_sm_get(sm, s)) == NULL) {
            s++;
        }
        if (s == hi || sl->ts_ns >= t_ns) {
            hi = mid;
        } else {
            lo = s + 1;
        }
    }
    /* Every live seq below lo is older than t_ns: the answer is the first
     * live one from lo on. */
    while (lo <= sm->last_seq && srv_stream_sm_get(sm, lo) == NULL) {
        lo++;
    }
    return lo;
}

/* Messages at or after from whose subject matches filter (NULL: all):
 * nats-server's NumPending. Bounded by the stream's seqs. */
uint64_t srv_js_direct_num_pending(const struct srv_stream_sm *sm,
                                   uint64_t from, const char *filter)
{
    uint64_t n = 0;
    if (filter == NULL && from <= srv_stream_sm_first_seq(sm)) {
        return sm->msgs;
    }
    for (uint64_t s = from < sm->base_seq ? sm->base_seq : from;
         s <= sm->last_seq; s++) {
        const struct srv_stream_slot *sl = srv_stream_sm_get(sm, s);
        if (sl != NULL &&
            (filter == NULL || srv_js_subject_matches(filter, sl->subj->s))) {
            n++;
        }
    }
    return n;
}

static int add_seq(uint64_t *seqs, size_t *n, uint64_t seq)
{
    for (size_t i = 0; i < *n; i++) {
        if (seqs[i] == seq) {
            return 0;
        }
    }
    if (*n == SRV_JS_DIRECT_BATCH_MAX) {
        return KEEL_ELIMIT;
    }
    seqs[(*n)++] = seq;
    return 0;
}

/* The newest seq <= up_to of subject sj, 0 when none. Walks back from
 * up_to only when the subject's last is past it: bounded by the seqs. */
static uint64_t last_up_to(const struct srv_stream_sm *sm,
                           const struct srv_stream_subj *sj, uint64_t up_to)
{
    if (sj->last_seq <= up_to) {
        return sj->last_seq;
    }
    ASSERT(up_to < sm->last_seq);
    for (uint64_t s = up_to; s >= sm->base_seq && s >= sj->first_seq && s > 0;
         s--) {
        const struct srv_stream_slot *sl = srv_stream_sm_get(sm, s);
        if (sl != NULL && sl->subj == sj) {
            return s;
        }
    }
    return 0;
}

/* The last seq <= up_to of every subject matching one of the filters, in
 * seqs[0..*n) (unsorted, distinct). Returns 0 or KEEL_ELIMIT (more than
 * SRV_JS_DIRECT_BATCH_MAX: nats-server's 413). */
static int multi_seqs(const struct srv_stream_sm *sm, const json_t *filters,
                      uint64_t up_to, uint64_t *seqs, size_t *n)
{
    size_t i, pos;
    const json_t *f;
    struct srv_hmap_slot *hs;
    *n = 0;
    json_array_foreach(filters, i, f)
    {
        const char *flt = json_string_value(f);
        int rv = 0;
        if (srv_js_subject_valid(flt, false)) {
            /* A literal filter (a KV key) is one lookup. */
            const struct srv_stream_subj *sj =
                srv_hmap_get(&sm->subjects, flt, strlen(flt));
            uint64_t s = sj != NULL ? last_up_to(sm, sj, up_to) : 0;
            rv = s > 0 ? add_seq(seqs, n, s) : 0;
        } else if (srv_js_subject_valid(flt, true)) {
            pos = 0;
            /* Bounded by the number of subjects. */
            while (rv == 0 && (hs = srv_hmap_next(&sm->subjects, &pos))) {
                const struct srv_stream_subj *sj = hs->value;
                uint64_t s = srv_js_subject_matches(flt, sj->s)
                                 ? last_up_to(sm, sj, up_to)
                                 : 0;
                rv = s > 0 ? add_seq(seqs, n, s) : 0;
            }
        }
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int srv_js_direct_multi_last(const struct srv_stream_sm *sm,
                             const json_t *filters, uint64_t up_to,
                             uint64_t *seqs, size_t *n)
{
    /* A subject's last is at most last_seq: walks start there. */
    uint64_t walk_to = up_to < sm->last_seq ? up_to : sm->last_seq;
    int rv = multi_seqs(sm, filters, walk_to, seqs, n);
    ASSERT(*n <= SRV_JS_DIRECT_BATCH_MAX);
    if (rv == 0) {
        qsort(seqs, *n, sizeof *seqs, cmp_u64);
    }
    return rv;
}

int srv_js_direct_parse(const json_t *body, bool keyed,
                        struct srv_js_direct_req *r, const char **status)
{
    *r = (struct srv_js_direct_req){0};
    *status = NULL;
    if (body != NULL && parse(body, r) != 0) {
        *status = "408 Malformed Request";
    } else if (keyed &&
               (r->last_for != NULL || r->next_for != NULL ||
                r->multi != NULL || r->seq != 0 || r->batch != 0 ||
                r->has_start || r->up_to_seq != 0 || r->has_up_to_time)) {
        *status = "408 Bad Request";
    } else if (!keyed && r->seq == 0 && r->last_for == NULL &&
               r->next_for == NULL && r->multi == NULL && !r->has_start) {
        *status = "408 Empty Request";
    } else if (conflicting(r)) {
        *status = "408 Bad Request";
    }
    return *status == NULL ? 0 : KEEL_EINVAL;
}
