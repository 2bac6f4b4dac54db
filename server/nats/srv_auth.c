#include "srv_auth.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel_passwd.h"
#include "srv_sublist.h"

/* ---- subject patterns ---- */

/* The token of s starting at *pos (up to '.' or end); advances *pos past
 * the dot. */
static size_t next_token(const char *s, size_t len, size_t *pos,
                         const char **tok)
{
    size_t start = *pos;
    const char *dot = memchr(s + start, '.', len - start);
    size_t end = dot != NULL ? (size_t)(dot - s) : len;

    *tok = s + start;
    *pos = dot != NULL ? end + 1 : len + 1;
    return end - start;
}

static bool tok_is(const char *t, size_t n, char c)
{
    return n == 1 && t[0] == c;
}

bool srv_auth_subject_match(const char *p, const char *s, size_t s_len)
{
    return srv_subject_matches(p, strlen(p), s, s_len);
}

bool srv_auth_subject_subset(const char *s, size_t s_len, const char *p)
{
    size_t p_len = strlen(p);
    size_t ppos = 0;
    size_t spos = 0;

    /* Each round consumes one token of each, so both lengths bound it. */
    while (ppos <= p_len) {
        const char *pt;
        const char *st;
        size_t pn = next_token(p, p_len, &ppos, &pt);
        if (spos > s_len) {
            return false; /* p has more tokens than s */
        }
        size_t sn = next_token(s, s_len, &spos, &st);
        if (tok_is(pt, pn, '>')) {
            return true;
        }
        if (tok_is(pt, pn, '*')) {
            if (tok_is(st, sn, '>')) {
                return false;
            }
            continue;
        }
        if (pn != sn || memcmp(pt, st, pn) != 0) {
            return false; /* also when s has '*' or '>' here */
        }
    }
    return spos > s_len;
}

static bool any_match(const struct srv_perm_list *l, const char *s,
                      size_t s_len)
{
    ASSERT(l->count <= SRV_AUTH_PERMS_MAX);
    for (size_t i = 0; i < l->count; i++) {
        if (srv_auth_subject_match(l->subjects[i], s, s_len)) {
            return true;
        }
    }
    return false;
}

static bool any_superset(const struct srv_perm_list *l, const char *s,
                         size_t s_len)
{
    ASSERT(l->count <= SRV_AUTH_PERMS_MAX);
    for (size_t i = 0; i < l->count; i++) {
        if (srv_auth_subject_subset(s, s_len, l->subjects[i])) {
            return true;
        }
    }
    return false;
}

bool srv_auth_can_publish(const struct srv_perms *perms, const char *s,
                          size_t s_len)
{
    if (perms == NULL) {
        return true;
    }
    if (perms->pub_allow.count > 0 && !any_match(&perms->pub_allow, s, s_len)) {
        return false;
    }
    return !any_match(&perms->pub_deny, s, s_len);
}

bool srv_auth_can_subscribe(const struct srv_perms *perms, const char *s,
                            size_t s_len)
{
    if (perms == NULL) {
        return true;
    }
    if (perms->sub_allow.count > 0 &&
        !any_superset(&perms->sub_allow, s, s_len)) {
        return false;
    }
    return !any_superset(&perms->sub_deny, s, s_len);
}

bool srv_auth_can_deliver(const struct srv_perms *perms, const char *s,
                          size_t s_len)
{
    return perms == NULL || !any_match(&perms->sub_deny, s, s_len);
}

/* ---- checks ---- */

static const struct srv_user *find_user(const struct srv_auth *a,
                                        const char *name)
{
    ASSERT(a->nusers <= SRV_AUTH_USERS_MAX);
    for (size_t i = 0; i < a->nusers; i++) {
        if (strcmp(a->users[i].name, name) == 0) {
            return &a->users[i];
        }
    }
    return NULL;
}

bool srv_auth_check_is_slow(const struct srv_auth *a,
                            const struct srv_auth_creds *creds)
{
    const char *secret = NULL;

    if (!a->required) {
        return false;
    }
    if (a->token != NULL) {
        secret = a->token;
    } else if (creds->user != NULL) {
        const struct srv_user *u = find_user(a, creds->user);
        secret = u != NULL ? u->password : a->dummy_hash;
    }
    return keel_passwd_looks_hashed(secret);
}

int srv_auth_check(const struct srv_auth *a, const struct srv_auth_creds *creds,
                   const struct srv_user **user_out)
{
    *user_out = NULL;
    if (!a->required) {
        return 0;
    }
    if (a->token != NULL) {
        return creds->token != NULL && keel_passwd_ok(a->token, creds->token)
                   ? 0
                   : KEEL_EAUTH;
    }
    if (creds->user == NULL || creds->pass == NULL) {
        return KEEL_EAUTH;
    }
    const struct srv_user *u = find_user(a, creds->user);
    if (u == NULL) {
        if (a->dummy_hash != NULL) {
            (void)keel_passwd_ok(a->dummy_hash, creds->pass);
        }
        return KEEL_EAUTH;
    }
    if (!keel_passwd_ok(u->password, creds->pass)) {
        return KEEL_EAUTH;
    }
    *user_out = u;
    return 0;
}

/* ---- building from the config ---- */

static char *dup_str(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

static void list_close(struct srv_perm_list *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->subjects[i]);
    }
    free(l->subjects);
    l->subjects = NULL;
    l->count = 0;
}

static int list_add(struct srv_perm_list *l, const json_t *v, char *errmsg)
{
    const char *s = json_string_value(v);

    if (s == NULL || !srv_subject_valid(s, strlen(s), true)) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "permission subjects must be valid subject strings");
    }
    if (l->count >= SRV_AUTH_PERMS_MAX) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "more than %d subjects in one permission list",
                        SRV_AUTH_PERMS_MAX);
    }
    char **n = realloc(l->subjects, (l->count + 1) * sizeof *n);
    if (n == NULL) {
        return KEEL_ENOMEM;
    }
    l->subjects = n;
    l->subjects[l->count] = strdup(s);
    if (l->subjects[l->count] == NULL) {
        return KEEL_ENOMEM;
    }
    l->count++;
    return 0;
}

/* A string or an array of strings. */
static int list_from_json(struct srv_perm_list *l, const json_t *v,
                          char *errmsg)
{
    size_t i;
    const json_t *x;

    if (v == NULL) {
        return 0;
    }
    if (json_is_string(v)) {
        return list_add(l, v, errmsg);
    }
    if (!json_is_array(v)) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "a permission list is a subject or [subjects]");
    }
    json_array_foreach(v, i, x)
    {
        int rv = list_add(l, x, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

/* publish/subscribe: a list (the allow list) or {allow, deny}. */
static int direction_from_json(struct srv_perm_list *allow,
                               struct srv_perm_list *deny, const json_t *v,
                               char *errmsg)
{
    int rv;

    if (v == NULL || !json_is_object(v)) {
        return list_from_json(allow, v, errmsg);
    }
    rv = list_from_json(allow, json_object_get(v, "allow"), errmsg);
    if (rv == 0) {
        rv = list_from_json(deny, json_object_get(v, "deny"), errmsg);
    }
    return rv;
}

static const json_t *get2(const json_t *o, const char *k1, const char *k2)
{
    const json_t *v = json_object_get(o, k1);
    return v != NULL ? v : json_object_get(o, k2);
}

/* allow_responses: true (one reply per request) or { max: N }. */
static int responses_from_json(struct srv_perms *p, const json_t *v,
                               char *errmsg)
{
    if (v == NULL || json_is_false(v)) {
        return 0;
    }
    if (json_is_true(v)) {
        p->responses_max = 1;
        return 0;
    }
    const json_t *max = json_object_get(v, "max");
    if (!json_is_object(v) || (max != NULL && !json_is_integer(max))) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "allow_responses is true or { max: N }");
    }
    json_int_t n = max != NULL ? json_integer_value(max) : 1;
    if (n < 1 || n > SRV_AUTH_RESPONSES_PER_REQUEST_MAX) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "allow_responses max must be 1 to %d",
                        SRV_AUTH_RESPONSES_PER_REQUEST_MAX);
    }
    p->responses_max = (uint32_t)n;
    return 0;
}

static int perms_from_json(struct srv_perms *p, const json_t *v, char *errmsg)
{
    int rv;

    if (!json_is_object(v)) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "permissions is a block {publish, subscribe}");
    }
    rv = responses_from_json(p, json_object_get(v, "allow_responses"), errmsg);
    if (rv == 0) {
        rv = direction_from_json(&p->pub_allow, &p->pub_deny,
                                 get2(v, "publish", "pub"), errmsg);
    }
    if (rv == 0) {
        rv = direction_from_json(&p->sub_allow, &p->sub_deny,
                                 get2(v, "subscribe", "sub"), errmsg);
    }
    return rv;
}

static int add_user(struct srv_auth *a, const char *name, const char *pass,
                    const json_t *perms, char *errmsg)
{
    char sub[KEEL_ERRMSG_MAX] = "";
    struct srv_user *u;
    int rv;

    if (name == NULL || name[0] == '\0' || pass == NULL ||
        strlen(name) > SRV_AUTH_SECRET_BYTES_MAX ||
        strlen(pass) > SRV_AUTH_SECRET_BYTES_MAX) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "every user needs a user name and a password "
                        "(each at most %d bytes)",
                        SRV_AUTH_SECRET_BYTES_MAX);
    }
    if (a->nusers >= SRV_AUTH_USERS_MAX) {
        return keel_err(KEEL_ECONFIG, errmsg, "more than %d users",
                        SRV_AUTH_USERS_MAX);
    }
    if (find_user(a, name) != NULL) {
        return keel_err(KEEL_ECONFIG, errmsg, "user '%s' is listed twice",
                        name);
    }
    bool hashed = keel_passwd_looks_hashed(pass);
    if (hashed && keel_passwd_iterations(pass) == 0) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "user '%s': malformed password hash (make one with "
                        "keel-passwd)",
                        name);
    }
    u = &a->users[a->nusers++];
    u->name = strdup(name);
    u->password = strdup(pass);
    if (u->name == NULL || u->password == NULL) {
        return KEEL_ENOMEM;
    }
    a->nplain += hashed ? 0 : 1;
    if (perms != NULL) {
        u->has_perms = true;
        rv = perms_from_json(&u->perms, perms, sub);
        if (rv != 0) {
            return keel_err(rv, errmsg, "user '%s': %s", name, sub);
        }
    }
    return 0;
}

static int users_from_json(struct srv_auth *a, const json_t *users,
                           char *errmsg)
{
    size_t i;
    const json_t *u;

    if (!json_is_array(users)) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "users is a list [{user, password, permissions}]");
    }
    json_array_foreach(users, i, u)
    {
        if (!json_is_object(u)) {
            return keel_err(KEEL_ECONFIG, errmsg,
                            "each user is a block {user, password}");
        }
        int rv = add_user(a, json_string_value(get2(u, "user", "username")),
                          json_string_value(get2(u, "password", "pass")),
                          json_object_get(u, "permissions"), errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

/* For unknown user names: the hash with the most rounds any user has
 * (its result is ignored; only its cost matters). */
static void pick_dummy_hash(struct srv_auth *a)
{
    uint32_t iter = 0;

    for (size_t i = 0; i < a->nusers; i++) {
        uint32_t n = keel_passwd_iterations(a->users[i].password);
        if (n > iter) {
            iter = n;
            a->dummy_hash = a->users[i].password;
        }
    }
}

int srv_auth_init(struct srv_auth *a, const char *token, const char *user,
                  const char *password, const json_t *users, char *errmsg)
{
    size_t n = (user != NULL ? 1 : 0) + json_array_size(users);

    memset(a, 0, sizeof *a);
    if (token != NULL && n > 0) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "use either a token or users, not both");
    }
    if (n > SRV_AUTH_USERS_MAX) {
        return keel_err(KEEL_ECONFIG, errmsg, "more than %d users",
                        SRV_AUTH_USERS_MAX);
    }
    if (token != NULL) {
        if (token[0] == '\0' || strlen(token) > SRV_AUTH_SECRET_BYTES_MAX) {
            return keel_err(KEEL_ECONFIG, errmsg,
                            "the token must be 1 to %d bytes",
                            SRV_AUTH_SECRET_BYTES_MAX);
        }
        a->token = dup_str(token);
        a->required = true;
        a->nplain = keel_passwd_iterations(token) != 0 ? 0 : 1;
        return a->token != NULL ? 0 : KEEL_ENOMEM;
    }
    if (n == 0) {
        return 0;
    }
    a->required = true;
    a->users = calloc(n, sizeof *a->users);
    if (a->users == NULL) {
        return KEEL_ENOMEM;
    }
    if (user != NULL) {
        int rv = add_user(a, user, password, NULL, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    if (users != NULL) {
        int rv = users_from_json(a, users, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    pick_dummy_hash(a);
    return 0;
}

void srv_auth_close(struct srv_auth *a)
{
    for (size_t i = 0; i < a->nusers; i++) {
        struct srv_user *u = &a->users[i];
        if (u->password != NULL) {
            OPENSSL_cleanse(u->password, strlen(u->password));
        }
        free(u->name);
        free(u->password);
        list_close(&u->perms.pub_allow);
        list_close(&u->perms.pub_deny);
        list_close(&u->perms.sub_allow);
        list_close(&u->perms.sub_deny);
    }
    free(a->users);
    if (a->token != NULL) {
        OPENSSL_cleanse(a->token, strlen(a->token));
    }
    free(a->token);
    memset(a, 0, sizeof *a);
}
