/* srv_js_index: which stream captures a subject, and a stream by name,
 * without walking every stream. Every PUB asks the first question
 * (srv_js_intercept), so its cost must not grow with the number of
 * streams: the streams' subjects sit in a subject trie of their own
 * (server/nats/srv_sublist.c), and a match walks one path of it. Streams
 * never overlap (10065), so a match names at most one stream. */
#ifndef KEEL_SRV_JS_INDEX_H
#define KEEL_SRV_JS_INDEX_H

#include <stdbool.h>
#include <stddef.h>

#include "keel/assert.h"

struct srv_js;
struct srv_stream;

/* Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_js_index_init(struct srv_js *js);
void srv_js_index_close(struct srv_js *js);

/* st joins (its name and its config's subjects) or leaves the index. Call
 * leave before st's config is freed or replaced and join after: an update
 * of st's subjects is a leave and a join. An insert that fails (memory)
 * turns the index off: matches then walk every stream, as correct as
 * before, only slower. */
void srv_js_index_join(struct srv_js *js, struct srv_stream *st);
void srv_js_index_leave(struct srv_js *js, struct srv_stream *st);

/* The stream whose subjects match literal subject subj, or NULL. */
struct srv_stream *srv_js_index_match(struct srv_js *js, const char *subj,
                                      size_t len);

/* The stream named name, or NULL. */
struct srv_stream *srv_js_index_find(struct srv_js *js, const char *name);

#endif
