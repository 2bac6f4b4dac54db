/* libFuzzer target for srv_auth: password-hash strings, users and
 * permission lists from a config text, and the subject relations that
 * permission checks rest on.
 *
 * Input: a config text, or (when it starts with '#') three lines "s", "p",
 * "x": the fuzzer checks that a literal x matched by pattern s is matched
 * by every pattern p that srv_auth_subject_subset says contains s.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/error.h"
#include "keel_passwd.h"
#include "srv_auth.h"
#include "srv_confparse.h"
#include "srv_sublist.h"

#define LINE_MAX_BYTES 256

/* Line i of data (NUL-terminated copy in out); false if absent. */
static bool line(const uint8_t *data, size_t size, int i, char *out)
{
    size_t pos = 0;
    for (int k = 0; k < i; k++) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        if (nl == NULL) {
            return false;
        }
        pos = (size_t)(nl - data) + 1;
    }
    const uint8_t *nl = memchr(data + pos, '\n', size - pos);
    size_t n = nl != NULL ? (size_t)(nl - data) - pos : size - pos;
    if (n >= LINE_MAX_BYTES) {
        return false;
    }
    memcpy(out, data + pos, n);
    out[n] = '\0';
    return true;
}

static void check_subjects(const uint8_t *data, size_t size)
{
    char s[LINE_MAX_BYTES];
    char p[LINE_MAX_BYTES];
    char x[LINE_MAX_BYTES];

    if (!line(data, size, 1, s) || !line(data, size, 2, p) ||
        !line(data, size, 3, x) || !srv_subject_valid(s, strlen(s), true) ||
        !srv_subject_valid(p, strlen(p), true)) {
        return;
    }
    ASSERT(srv_auth_subject_subset(s, strlen(s), s));
    ASSERT(srv_auth_subject_subset(s, strlen(s), ">"));
    if (!srv_subject_valid(x, strlen(x), false)) {
        return;
    }
    /* A literal is a subset exactly where it matches. */
    ASSERT(srv_auth_subject_subset(x, strlen(x), p) ==
           srv_auth_subject_match(p, x, strlen(x)));
    if (srv_auth_subject_subset(s, strlen(s), p) &&
        srv_auth_subject_match(s, x, strlen(x))) {
        ASSERT(srv_auth_subject_match(p, x, strlen(x)));
    }
}

static void check_config(const uint8_t *data, size_t size)
{
    char errmsg[KEEL_ERRMSG_MAX];
    json_t *root = NULL;
    struct srv_auth a;

    /* Any string may be offered as a stored hash: parsing must hold. */
    char first[LINE_MAX_BYTES];
    const char *it = NULL;
    if (line(data, size, 0, first) && keel_passwd_iterations(first) != 0 &&
        (it = strstr(first, "$i=")) != NULL && atol(it + 3) <= 2000) {
        /* Only cheap hashes: the round count is the input's to choose. */
        (void)keel_passwd_ok(first, "pw");
    }
    if (srv_confparse((const char *)data, size, &root, errmsg) != 0) {
        return;
    }
    const json_t *au = json_object_get(root, "authorization");
    const json_t *users = json_object_get(au, "users");
    if (srv_auth_init(&a, NULL, NULL, NULL, json_is_array(users) ? users : NULL,
                      errmsg) == 0) {
        for (size_t i = 0; i < a.nusers; i++) {
            const struct srv_perms *pm = &a.users[i].perms;
            (void)srv_auth_can_publish(pm, "a.b", 3);
            (void)srv_auth_can_subscribe(pm, "a.*", 3);
            (void)srv_auth_can_deliver(pm, "a.b", 3);
        }
    }
    srv_auth_close(&a);
    json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 0 && data[0] == '#') {
        check_subjects(data, size);
    } else {
        check_config(data, size);
    }
    return 0;
}
