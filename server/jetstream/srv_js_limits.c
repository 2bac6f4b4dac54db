/* srv_js_limits: the server's jetstream { max_memory_store, max_file_store }
 * limits, checked as nats-server 2.9 checks them. A stream create or update
 * reserves its max_bytes (1 byte when unlimited) against the limit of its
 * storage type: past it, 10047 (file) or 10028 (memory). A publish is
 * refused with 10023 once the streams of its storage type already hold more
 * than the limit. Both checks run where the request is answered (the meta
 * or stream leader) before anything is proposed, never in an apply:
 * replicas must agree on the log whatever their own config says. */
#include <stdio.h>
#include <string.h>

#include "keel/error.h"
#include "srv_config.h"
#include "srv_js_int.h"
#include "srv_server.h"

static int64_t limit_of(const struct srv_js *js, enum srv_js_storage type)
{
    const struct srv_config *c = js->srv != NULL ? js->srv->cfg : NULL;

    if (c == NULL) {
        return -1;
    }
    return type == SRV_JS_STORAGE_MEMORY ? c->js_max_memory : c->js_max_file;
}

void srv_js_limits_get(const struct srv_js *js, int64_t *max_memory,
                       int64_t *max_file)
{
    ASSERT(js != NULL);
    *max_memory = limit_of(js, SRV_JS_STORAGE_MEMORY);
    *max_file = limit_of(js, SRV_JS_STORAGE_FILE);
}

void srv_js_limits_usage(const struct srv_js *js, enum srv_js_storage type,
                         uint64_t *used, uint64_t *reserved)
{
    ASSERT(js->nstreams <= SRV_JS_STREAMS_MAX);
    *used = 0;
    *reserved = 0;
    for (uint32_t i = 0; i < js->nstreams; i++) {
        const struct srv_stream *st = js->streams[i];
        if (st->cfg.storage != type) {
            continue;
        }
        *used += st->sm.bytes;
        if (st->cfg.max_bytes > 0) {
            *reserved += (uint64_t)st->cfg.max_bytes;
        }
    }
}

int srv_js_limits_check_config(const struct srv_js *js,
                               const struct srv_stream_config *cfg,
                               enum srv_js_err *jerr)
{
    int64_t max = limit_of(js, cfg->storage);
    uint64_t reserved = 0;

    ASSERT(js->nstreams <= SRV_JS_STREAMS_MAX);
    *jerr = SRV_JS_OK;
    if (max < 0) {
        return 0;
    }
    for (uint32_t i = 0; i < js->nstreams; i++) {
        const struct srv_stream_config *o = &js->streams[i]->cfg;
        /* An update replaces the stream's own reservation. */
        if (o->storage == cfg->storage && o->max_bytes > 0 &&
            strcmp(o->name, cfg->name) != 0) {
            reserved += (uint64_t)o->max_bytes;
        }
    }
    uint64_t add = cfg->max_bytes > 0 ? (uint64_t)cfg->max_bytes : 1;
    if (reserved + add <= (uint64_t)max) {
        return 0;
    }
    *jerr = cfg->storage == SRV_JS_STORAGE_MEMORY ? SRV_JS_EMEMORY_RESOURCES
                                                  : SRV_JS_ESTORAGE_RESOURCES;
    return KEEL_ELIMIT;
}

int srv_js_limits_check_publish(const struct srv_js *js,
                                const struct srv_stream *st,
                                enum srv_js_err *jerr)
{
    int64_t max = limit_of(js, st->cfg.storage);
    uint64_t used = 0, reserved = 0;

    *jerr = SRV_JS_OK;
    if (max < 0) {
        return 0;
    }
    srv_js_limits_usage(js, st->cfg.storage, &used, &reserved);
    if (used <= (uint64_t)max) {
        return 0;
    }
    *jerr = SRV_JS_EINSUFFICIENT_RESOURCES;
    return KEEL_ELIMIT;
}
