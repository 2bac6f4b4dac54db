/* srv_js_index: streams by subject and by name (srv_js_index.h). */
#include "srv_js_index.h"

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_int.h"
#include "srv_log.h"

int srv_js_index_init(struct srv_js *js)
{
    srv_hmap_init(&js->names);
    return srv_sublist_init(&js->subjects);
}

void srv_js_index_close(struct srv_js *js)
{
    srv_sublist_close(&js->subjects);
    srv_hmap_close(&js->names);
}

static void index_off(struct srv_js *js, const char *name)
{
    if (!js->index_off) {
        SRV_WARN("js",
                 "stream %s: out of memory indexing its subjects; every "
                 "publish now checks each stream in turn",
                 name);
    }
    js->index_off = true;
}

void srv_js_index_join(struct srv_js *js, struct srv_stream *st)
{
    const struct srv_stream_config *c = &st->cfg;
    ASSERT(st->isubs == NULL && st->nisubs == 0);
    const char *name = c->name;
    if (srv_hmap_put(&js->names, name, strlen(name), st) != 0) {
        index_off(js, name);
    }
    js->nmirrors += srv_stream_pumps_cfg(c) ? 1 : 0;
    st->indexed = true;
    if (c->nsubjects == 0) {
        return;
    }
    st->isubs = calloc(c->nsubjects, sizeof *st->isubs);
    if (st->isubs == NULL) {
        index_off(js, name);
        return;
    }
    for (uint32_t k = 0; k < c->nsubjects; k++) {
        struct srv_js_isub *is = &st->isubs[st->nisubs];
        is->st = st;
        is->sub.subject = c->subjects[k];
        is->sub.subject_len = strlen(c->subjects[k]);
        if (srv_sublist_insert(&js->subjects, &is->sub) != 0) {
            index_off(js, name);
            return;
        }
        st->nisubs++;
    }
}

void srv_js_index_leave(struct srv_js *js, struct srv_stream *st)
{
    if (st->indexed && srv_stream_pumps_cfg(&st->cfg)) {
        ASSERT(js->nmirrors > 0);
        js->nmirrors--;
    }
    st->indexed = false;
    for (uint32_t k = 0; k < st->nisubs; k++) {
        (void)srv_sublist_remove(&js->subjects, &st->isubs[k].sub);
    }
    /* The sublist dropped every cached result naming these entries, and
     * no result outlives a match here: they can go. */
    free(st->isubs);
    st->isubs = NULL;
    st->nisubs = 0;
    const char *name = st->cfg.name;
    if (srv_hmap_get(&js->names, name, strlen(name)) == st) {
        (void)srv_hmap_del(&js->names, name, strlen(name));
    }
}

/* Before the index, and while it is off: every stream in turn. Bounded by
 * SRV_JS_STREAMS_MAX x SRV_JS_SUBJECTS_MAX. */
static struct srv_stream *walk(struct srv_js *js, const char *subj, size_t len)
{
    char s[SRV_JS_SUBJECT_BYTES_MAX + 1];
    if (len > SRV_JS_SUBJECT_BYTES_MAX) {
        return NULL;
    }
    memcpy(s, subj, len);
    s[len] = '\0';
    for (uint32_t i = 0; i < js->nstreams; i++) {
        const struct srv_stream_config *c = &js->streams[i]->cfg;
        for (uint32_t k = 0; k < c->nsubjects; k++) {
            if (srv_js_subject_matches(c->subjects[k], s)) {
                return js->streams[i];
            }
        }
    }
    return NULL;
}

struct srv_stream *srv_js_index_match(struct srv_js *js, const char *subj,
                                      size_t len)
{
    struct srv_sublist_result *r = NULL;
    if (js->nstreams == 0 || len > SRV_JS_SUBJECT_BYTES_MAX) {
        return NULL;
    }
    if (js->index_off || srv_sublist_match(&js->subjects, subj, len, &r) != 0) {
        return walk(js, subj, len);
    }
    struct srv_stream *found = NULL;
    for (size_t i = 0; i < r->npsubs && found == NULL; i++) {
        if (!r->psubs[i]->removed) {
            /* Every entry of js->subjects is the sub of an isub. */
            found = ((const struct srv_js_isub *)(const void *)r->psubs[i])->st;
        }
    }
    srv_sublist_result_release(r);
    return found;
}

struct srv_stream *srv_js_index_find(struct srv_js *js, const char *name)
{
    if (!js->index_off) {
        struct srv_stream *st = srv_hmap_get(&js->names, name, strlen(name));
        return st != NULL && strcmp(st->cfg.name, name) == 0 ? st : NULL;
    }
    for (uint32_t i = 0; i < js->nstreams; i++) {
        if (strcmp(js->streams[i]->cfg.name, name) == 0) {
            return js->streams[i];
        }
    }
    return NULL;
}
