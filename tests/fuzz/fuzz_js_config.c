/* libFuzzer target for the JetStream stream config: parse, and when it
 * parses, its encoding must parse back to an equal config (what a replica
 * echoes is what it would accept). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "keel/assert.h"
#include "keel/error.h"
#include "srv_js_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char errmsg[KEEL_ERRMSG_MAX];
    enum srv_js_err jerr = SRV_JS_OK;
    json_t *root = json_loadb((const char *)data, size, 0, NULL);
    if (root == NULL) {
        return 0;
    }
    struct srv_stream_config cfg, again;
    json_t *enc = NULL;
    if (srv_stream_config_parse(root, &cfg, &jerr, errmsg) == 0) {
        ASSERT(srv_stream_config_encode(&cfg, &enc, errmsg) == 0);
        ASSERT(srv_stream_config_parse(enc, &again, &jerr, errmsg) == 0);
        ASSERT(srv_stream_config_equal(&cfg, &again));
        srv_stream_config_free(&again);
        json_decref(enc);
    } else {
        ASSERT(jerr != SRV_JS_OK);
    }
    srv_stream_config_free(&cfg);
    json_decref(root);
    return 0;
}
