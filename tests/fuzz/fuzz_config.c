/* libFuzzer target for the config file parser and the config layer that
 * maps its tree onto keeld settings. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "keel/error.h"
#include "srv_config.h"
#include "srv_confparse.h"
#include "srv_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool quiet;
    char errmsg[KEEL_ERRMSG_MAX];
    struct srv_config cfg;
    json_t *root = NULL;

    if (!quiet) {
        /* Unknown keys are logged; keep the fuzzer's output readable. */
        (void)srv_log_open("/dev/null", false, false, errmsg);
        quiet = true;
    }
    if (srv_confparse((const char *)data, size, &root, errmsg) != 0) {
        return 0;
    }
    srv_config_defaults(&cfg);
    (void)srv_config_apply_json(&cfg, root, errmsg);
    json_decref(root);
    return 0;
}
