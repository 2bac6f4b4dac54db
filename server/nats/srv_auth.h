/* Client authentication and authorization for keeld: a token, or users
 * with passwords (plain text, or salted PBKDF2-HMAC-SHA256 hashes made
 * and verified by common/keel_passwd.c), each user with optional publish and
 * subscribe allow/deny lists of subject patterns.
 *
 * A built struct srv_auth is immutable: the loop thread reads it and the
 * worker pool verifies password hashes against it without locks.
 */
#ifndef SRV_AUTH_H
#define SRV_AUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"

/* One allow or deny list: subject patterns split into tokens once, so a
 * check walks at most SRV_AUTH_PERMS_MAX patterns of at most
 * SRV_SUBJECT_TOKENS_MAX tokens. */
struct srv_perm_list {
    char **subjects; /* NUL-terminated patterns */
    size_t count;
};

struct srv_perms {
    /* allow_responses: replies a user may publish to each request subject
     * it received, despite its publish lists (0: off). */
    uint32_t responses_max;
    struct srv_perm_list pub_allow; /* empty: everything allowed */
    struct srv_perm_list pub_deny;
    struct srv_perm_list sub_allow;
    struct srv_perm_list sub_deny;
};

struct srv_user {
    char *name;
    char *password; /* a keel_passwd hash, or plain text */
    bool has_perms;
    struct srv_perms perms;
};

struct srv_auth {
    bool required;
    char *token; /* hash or plain text; NULL without token auth */
    struct srv_user *users;
    size_t nusers;
    size_t nplain; /* secrets kept in plain text (warned about at start) */
    /* Checked for unknown user names so they take as long as a wrong
     * password for a hashed user (a user's hash; NULL when none). */
    const char *dummy_hash;
};

/* Credentials from a CONNECT; NULL members were absent. */
struct srv_auth_creds {
    const char *user;
    const char *pass;
    const char *token;
};

/* Build auth from the config: token (string), user + password (strings,
 * a single user), and users (a JSON array of objects with user, password
 * and optional permissions {publish, subscribe}, each a list, a string or
 * {allow, deny}). All may be NULL. Returns 0, KEEL_ECONFIG (errmsg names
 * the user and the problem) or KEEL_ENOMEM. srv_auth_close frees it either
 * way.
 */
KEEL_MUST_USE int srv_auth_init(struct srv_auth *a, const char *token,
                                const char *user, const char *password,
                                const json_t *users, char *errmsg);

void srv_auth_close(struct srv_auth *a);

/* Whether checking creds runs a slow hash (so belongs off the loop
 * thread). */
bool srv_auth_check_is_slow(const struct srv_auth *a,
                            const struct srv_auth_creds *creds);

/* Check creds against a (any thread). Returns 0 with *user_out set to the
 * matched user (NULL for token auth or when auth is not required), or
 * KEEL_EAUTH. Secrets are compared in constant time.
 */
KEEL_MUST_USE int srv_auth_check(const struct srv_auth *a,
                                 const struct srv_auth_creds *creds,
                                 const struct srv_user **user_out);

/* NATS subject matching. Pattern tokens '*' match one token and '>' one or
 * more trailing tokens.
 * match: literal subject s matches pattern p.
 * subset: every subject matched by pattern s is matched by pattern p. */
bool srv_auth_subject_match(const char *p, const char *s, size_t s_len);
bool srv_auth_subject_subset(const char *s, size_t s_len, const char *p);

/* Permission checks; perms NULL means everything is allowed.
 * publish: s (literal) is in pub_allow (or it is empty) and not in
 *   pub_deny (deny wins).
 * subscribe: the pattern s lies inside an allow pattern (or allow is
 *   empty) and not wholly inside a deny pattern. A wildcard sub that only
 *   overlaps a deny pattern is accepted: deliver filters its messages.
 * deliver: literal s is not in sub_deny. */
bool srv_auth_can_publish(const struct srv_perms *perms, const char *s,
                          size_t s_len);
bool srv_auth_can_subscribe(const struct srv_perms *perms, const char *s,
                            size_t s_len);
bool srv_auth_can_deliver(const struct srv_perms *perms, const char *s,
                          size_t s_len);

#endif
