/* Security of keeld against real clients: connection and subscription
 * limits, the CONNECT deadline, the header limit, token and user/password
 * authentication (hashes checked off the loop thread) and permissions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define RECV_MS 5000
#define QUIET_MS 300 /* how long "nothing arrives" is watched */

struct fixture {
    struct h_keeld k;
    char conf[512];
    char hash_bin[PATH_MAX];
    natsConnection *nc[4];
    natsSubscription *sub[4];
    natsOptions *opts;
    int fds[4];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || h_keeld_init(&f->k) != 0) {
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        f->fds[i] = -1;
    }
    snprintf(f->conf, sizeof f->conf, "%s/keeld.conf", f->k.dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 4; i++) {
        natsSubscription_Destroy(f->sub[i]);
        natsConnection_Destroy(f->nc[i]);
        if (f->fds[i] >= 0) {
            close(f->fds[i]);
        }
    }
    natsOptions_Destroy(f->opts);
    int rv = h_keeld_stop(&f->k, NULL);
    h_keeld_cleanup(&f->k);
    free(f);
    return rv;
}

static void write_conf(struct fixture *f, const char *text)
{
    FILE *fp = fopen(f->conf, "w");
    assert_non_null(fp);
    assert_int_equal(fputs(text, fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
}

static void start_with_conf(struct fixture *f, const char *text)
{
    const char *args[] = {"-c", f->conf, NULL};
    write_conf(f, text);
    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
}

/* A raw socket past INFO; sends hello if not NULL. */
static int raw_conn(struct fixture *f, const char *hello)
{
    char buf[4096];
    int fd = h_tcp_connect(f->k.port);

    assert_true(fd >= 0);
    assert_int_equal(h_read_until(fd, "}\r\n", buf, sizeof buf, RECV_MS), 0);
    if (hello != NULL) {
        assert_int_equal(write(fd, hello, strlen(hello)),
                         (ssize_t)strlen(hello));
    }
    return fd;
}

/* Options for user/password (user NULL: none) or token. */
static natsOptions *opts_for(struct fixture *f, const char *user,
                             const char *pass, const char *token)
{
    natsOptions_Destroy(f->opts);
    f->opts = NULL;
    assert_int_equal(natsOptions_Create(&f->opts), NATS_OK);
    assert_int_equal(natsOptions_SetURL(f->opts, f->k.url), NATS_OK);
    assert_int_equal(natsOptions_SetAllowReconnect(f->opts, false), NATS_OK);
    assert_int_equal(natsOptions_SetTimeout(f->opts, RECV_MS), NATS_OK);
    if (user != NULL) {
        assert_int_equal(natsOptions_SetUserInfo(f->opts, user, pass), NATS_OK);
    }
    if (token != NULL) {
        assert_int_equal(natsOptions_SetToken(f->opts, token), NATS_OK);
    }
    return f->opts;
}

static void assert_last_error_has(const char *want)
{
    const char *text = nats_GetLastError(NULL);
    assert_non_null(text);
    if (strstr(text, want) == NULL) {
        fail_msg("last error '%s' lacks '%s'", text, want);
    }
}

static void connections_past_max_connections_get_an_error(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--max_connections", "2", NULL};
    char buf[4096];

    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(
            natsConnection_Connect(&f->nc[i], opts_for(f, NULL, NULL, NULL)),
            NATS_OK);
    }
    assert_int_not_equal(
        natsConnection_Connect(&f->nc[2], opts_for(f, NULL, NULL, NULL)),
        NATS_OK);
    /* The refused conn got INFO, then the error, then EOF. */
    int fd = h_tcp_connect(f->k.port);
    assert_true(fd >= 0);
    f->fds[0] = fd;
    assert_int_equal(h_read_until(fd, "-ERR 'maximum connections exceeded'",
                                  buf, sizeof buf, RECV_MS),
                     0);
    /* A slot frees when a conn leaves. */
    natsConnection_Destroy(f->nc[1]);
    f->nc[1] = NULL;
    long long end = h_now_ms() + RECV_MS;
    natsStatus s = NATS_ERR;
    while (s != NATS_OK && h_now_ms() < end) {
        s = natsConnection_Connect(&f->nc[1], opts_for(f, NULL, NULL, NULL));
    }
    assert_int_equal(s, NATS_OK);
}

static void subscriptions_past_max_subscriptions_are_refused(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--max_subscriptions", "2", NULL};
    char buf[4096];

    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
    f->fds[0] = raw_conn(f, "CONNECT {\"verbose\":true}\r\nSUB a 1\r\nSUB b "
                            "2\r\nSUB c 3\r\nPUB c 1\r\nx\r\nPUB a 1\r\ny\r\n"
                            "PING\r\n");
    assert_int_equal(
        h_read_until(f->fds[0], "PONG\r\n", buf, sizeof buf, RECV_MS), 0);
    assert_non_null(strstr(buf, "-ERR 'maximum subscriptions exceeded'"));
    assert_null(strstr(buf, "MSG c 3"));
    assert_non_null(strstr(buf, "MSG a 1 1\r\ny\r\n"));
}

static void a_conn_that_never_sends_connect_times_out(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--auth_timeout", "300ms", NULL};
    char buf[4096];

    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
    long long t0 = h_now_ms();
    f->fds[0] = raw_conn(f, NULL);
    f->fds[1] = raw_conn(f, "CONNECT {}\r\n");
    assert_int_equal(h_read_until(f->fds[0], "-ERR 'Authentication Timeout'",
                                  buf, sizeof buf, RECV_MS),
                     0);
    assert_true(h_now_ms() - t0 >= 250);
    /* The conn that sent CONNECT is still served. */
    assert_int_equal(write(f->fds[1], "PING\r\n", 6), 6);
    assert_int_equal(
        h_read_until(f->fds[1], "PONG\r\n", buf, sizeof buf, RECV_MS), 0);
    assert_null(strstr(buf, "Timeout"));
}

static void headers_past_max_header_size_are_refused(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--max_header_size", "16", NULL};
    char buf[4096];
    /* 12-byte header block fits; a 30-byte one does not. */
    const char *small = "NATS/1.0\r\n\r\n";
    const char *big = "NATS/1.0\r\nX-Big: 0123456\r\n\r\n";
    char cmd[512];

    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
    snprintf(cmd, sizeof cmd,
             "CONNECT {\"headers\":true}\r\nSUB h 1\r\nHPUB h %zu %zu\r\n%s"
             "\r\nHPUB h %zu %zu\r\n%s\r\nPING\r\n",
             strlen(big), strlen(big), big, strlen(small), strlen(small),
             small);
    f->fds[0] = raw_conn(f, cmd);
    assert_int_equal(
        h_read_until(f->fds[0], "PONG\r\n", buf, sizeof buf, RECV_MS), 0);
    assert_non_null(strstr(buf, "-ERR 'Maximum Header Size Exceeded'"));
    assert_null(strstr(buf, "X-Big"));
    assert_non_null(strstr(buf, "HMSG h 1 12 12\r\n"));
}

static void a_token_lets_in_only_who_knows_it(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--auth", "s3cret-token", NULL};
    char buf[4096];

    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
    f->fds[0] = raw_conn(f, NULL);
    assert_int_equal(natsConnection_Connect(
                         &f->nc[0], opts_for(f, NULL, NULL, "s3cret-token")),
                     NATS_OK);
    assert_int_not_equal(
        natsConnection_Connect(&f->nc[1], opts_for(f, NULL, NULL, "wrong")),
        NATS_OK);
    assert_last_error_has("Authorization Violation");
    assert_int_not_equal(
        natsConnection_Connect(&f->nc[1], opts_for(f, NULL, NULL, NULL)),
        NATS_OK);
    /* Anything before CONNECT is a violation too. */
    assert_int_equal(write(f->fds[0], "PING\r\n", 6), 6);
    assert_int_equal(h_read_until(f->fds[0], "-ERR 'Authorization Violation'",
                                  buf, sizeof buf, RECV_MS),
                     0);
}

/* keel-passwd next to keeld (build dir layout: server/, client/). */
static void make_hash(const char *pw, const char *iter, char *out, size_t len)
{
    char cmd[PATH_MAX + 128];
    char dir[PATH_MAX];

    snprintf(dir, sizeof dir, "%s", h_keeld_path());
    char *slash = strrchr(dir, '/');
    assert_non_null(slash);
    *slash = '\0';
    snprintf(cmd, sizeof cmd,
             "printf '%%s\\n' '%s' | %s/../client/keel-passwd --iterations "
             "%s",
             pw, dir, iter);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(out, (int)len, p));
    assert_int_equal(pclose(p), 0);
    out[strcspn(out, "\n")] = '\0';
    assert_memory_equal(out, "$pbkdf2-sha256$", 15);
}

static void users_with_hashed_passwords_authenticate(void **state)
{
    struct fixture *f = *state;
    char hash[256];
    char conf[1024];

    make_hash("alice-pw", "1000", hash, sizeof hash);
    snprintf(conf, sizeof conf,
             "authorization {\n  users = [\n    {user: alice, password: "
             "\"%s\"}\n    {user: bob, password: bob-pw}\n  ]\n}\n",
             hash);
    start_with_conf(f, conf);
    assert_int_equal(natsConnection_Connect(
                         &f->nc[0], opts_for(f, "alice", "alice-pw", NULL)),
                     NATS_OK);
    assert_int_equal(
        natsConnection_Connect(&f->nc[1], opts_for(f, "bob", "bob-pw", NULL)),
        NATS_OK);
    assert_int_not_equal(
        natsConnection_Connect(&f->nc[2], opts_for(f, "alice", "bob-pw", NULL)),
        NATS_OK);
    assert_last_error_has("Authorization Violation");
    assert_int_not_equal(
        natsConnection_Connect(&f->nc[2], opts_for(f, "carol", "x", NULL)),
        NATS_OK);
    /* Authenticated conns work normally. */
    assert_int_equal(natsConnection_SubscribeSync(&f->sub[0], f->nc[0], "hi"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[0]), NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->nc[1], "hi", "there"),
                     NATS_OK);
    natsMsg *m = NULL;
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub[0], RECV_MS), NATS_OK);
    assert_string_equal(natsMsg_GetData(m), "there");
    natsMsg_Destroy(m);
    char log[8192];
    FILE *lf = fopen(f->k.log_path, "r");
    assert_non_null(lf);
    size_t n = fread(log, 1, sizeof log - 1, lf);
    fclose(lf);
    log[n] = '\0';
    assert_non_null(strstr(log, "plain text")); /* bob's password */
}

/* While a slow hash is checked for one CONNECT, another conn is served:
 * the check runs on the worker pool, not the loop thread. Input pipelined
 * after the slow CONNECT is held and answered after the check. */
static void a_slow_hash_does_not_stall_other_conns(void **state)
{
    struct fixture *f = *state;
    char hash[256];
    char conf[1024];
    char buf[4096];

    make_hash("slow-pw", "1000000", hash, sizeof hash);
    snprintf(conf, sizeof conf,
             "authorization { timeout: 30, users = [ {user: slow, password: "
             "\"%s\"}, {user: fast, password: fast-pw} ] }\n",
             hash);
    start_with_conf(f, conf);
    long long t0 = h_now_ms();
    f->fds[0] = raw_conn(f, "CONNECT {\"user\":\"slow\",\"pass\":\"slow-pw\","
                            "\"verbose\":true}\r\nPING\r\n");
    f->fds[1] = raw_conn(f, "CONNECT {\"user\":\"fast\",\"pass\":\"fast-pw\"}"
                            "\r\nPING\r\n");
    assert_int_equal(
        h_read_until(f->fds[1], "PONG\r\n", buf, sizeof buf, RECV_MS), 0);
    long long fast_ms = h_now_ms() - t0;
    assert_int_equal(h_read_until(f->fds[0], "+OK\r\nPONG\r\n", buf, sizeof buf,
                                  4 * RECV_MS),
                     0);
    long long slow_ms = h_now_ms() - t0;
    print_message("fast conn served after %lld ms, slow hash after %lld ms\n",
                  fast_ms, slow_ms);
    assert_true(fast_ms < slow_ms);
}

static void denied_publish_and_subscribe_get_permission_errors(void **state)
{
    struct fixture *f = *state;

    start_with_conf(
        f, "authorization { users = [\n"
           "  {user: limited, password: p, permissions: {\n"
           "     publish: { allow: [\"ok.>\"], deny: [\"ok.secret\"] }\n"
           "     subscribe: { allow: [\"ok.>\"], deny: [\"ok.secret\"] } } }\n"
           "  {user: admin, password: p}\n] }\n");
    assert_int_equal(
        natsConnection_Connect(&f->nc[0], opts_for(f, "admin", "p", NULL)),
        NATS_OK);
    assert_int_equal(
        natsConnection_Connect(&f->nc[1], opts_for(f, "limited", "p", NULL)),
        NATS_OK);
    assert_int_equal(
        natsConnection_SubscribeSync(&f->sub[0], f->nc[0], "ok.secret"),
        NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[0]), NATS_OK);
    /* Denied publish: an error, and the admin's sub gets nothing. */
    assert_int_equal(natsConnection_PublishString(f->nc[1], "ok.secret", "x"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[1]), NATS_OK);
    const char *text = NULL;
    assert_int_equal(natsConnection_GetLastError(f->nc[1], &text),
                     NATS_NOT_PERMITTED);
    assert_string_equal(text,
                        "Permissions Violation for Publish to \"ok.secret\"");
    natsMsg *m = NULL;
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub[0], QUIET_MS),
                     NATS_TIMEOUT);
    /* Denied subscribe. */
    assert_int_equal(
        natsConnection_SubscribeSync(&f->sub[1], f->nc[1], "other"), NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[1]), NATS_OK);
    assert_int_equal(natsConnection_GetLastError(f->nc[1], &text),
                     NATS_NOT_PERMITTED);
    assert_string_equal(text,
                        "Permissions Violation for Subscription to \"other\"");
    /* A wildcard sub overlapping the deny list is accepted, and only the
     * allowed subjects reach it. */
    assert_int_equal(natsConnection_SubscribeSync(&f->sub[2], f->nc[1], "ok.*"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[1]), NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->nc[0], "ok.secret", "s"),
                     NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->nc[0], "ok.fine", "f"),
                     NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub[2], RECV_MS), NATS_OK);
    assert_string_equal(natsMsg_GetSubject(m), "ok.fine");
    natsMsg_Destroy(m);
    m = NULL;
    /* Allowed publish still flows, and the conn stayed open throughout. */
    assert_int_equal(natsConnection_PublishString(f->nc[1], "ok.a", "y"),
                     NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub[2], RECV_MS), NATS_OK);
    assert_string_equal(natsMsg_GetData(m), "y");
    natsMsg_Destroy(m);
    assert_false(natsConnection_IsClosed(f->nc[1]));
}

static void allow_responses_lets_a_responder_answer_once(void **state)
{
    struct fixture *f = *state;
    natsMsg *m = NULL;
    const char *text = NULL;

    start_with_conf(f, "authorization { users = [\n"
                       "  {user: svc, password: p, permissions: {\n"
                       "     publish: [\"nothing\"], subscribe: [\"svc.>\"]\n"
                       "     allow_responses: true } }\n"
                       "  {user: app, password: p}\n] }\n");
    assert_int_equal(
        natsConnection_Connect(&f->nc[0], opts_for(f, "app", "p", NULL)),
        NATS_OK);
    assert_int_equal(
        natsConnection_Connect(&f->nc[1], opts_for(f, "svc", "p", NULL)),
        NATS_OK);
    assert_int_equal(
        natsConnection_SubscribeSync(&f->sub[0], f->nc[0], "inbox.>"), NATS_OK);
    assert_int_equal(
        natsConnection_SubscribeSync(&f->sub[1], f->nc[1], "svc.time"),
        NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[0]), NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[1]), NATS_OK);
    assert_int_equal(natsConnection_PublishRequestString(f->nc[0], "svc.time",
                                                         "inbox.1", "now?"),
                     NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub[1], RECV_MS), NATS_OK);
    assert_string_equal(natsMsg_GetReply(m), "inbox.1");
    natsMsg_Destroy(m);
    m = NULL;
    /* The one allowed reply arrives. */
    assert_int_equal(natsConnection_PublishString(f->nc[1], "inbox.1", "noon"),
                     NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub[0], RECV_MS), NATS_OK);
    assert_string_equal(natsMsg_GetData(m), "noon");
    natsMsg_Destroy(m);
    m = NULL;
    /* A second reply, or one to an inbox never seen, is denied. */
    assert_int_equal(natsConnection_PublishString(f->nc[1], "inbox.1", "again"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[1]), NATS_OK);
    assert_int_equal(natsConnection_GetLastError(f->nc[1], &text),
                     NATS_NOT_PERMITTED);
    assert_string_equal(text,
                        "Permissions Violation for Publish to \"inbox.1\"");
    assert_int_equal(natsConnection_PublishString(f->nc[1], "inbox.2", "x"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[1]), NATS_OK);
    assert_int_equal(natsConnection_GetLastError(f->nc[1], &text),
                     NATS_NOT_PERMITTED);
    assert_string_equal(text,
                        "Permissions Violation for Publish to \"inbox.2\"");
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub[0], QUIET_MS),
                     NATS_TIMEOUT);
}

/* The last async error of nc is a publish permission error for subj. */
static void assert_publish_denied(natsConnection *nc, const char *subj)
{
    char want[256];
    const char *text = NULL;

    assert_int_equal(natsConnection_Flush(nc), NATS_OK);
    assert_int_equal(natsConnection_GetLastError(nc, &text),
                     NATS_NOT_PERMITTED);
    snprintf(want, sizeof want, "Permissions Violation for Publish to \"%s\"",
             subj);
    assert_string_equal(text, want);
}

static int64_t ack_pending(jsCtx *js)
{
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetConsumerInfo(&ci, js, "S", "C", NULL, &jerr),
                     NATS_OK);
    int64_t n = ci->NumAckPending;
    jsConsumerInfo_Destroy(ci);
    return n;
}

static void js_and_admin_api_requests_honour_publish_permissions(void **state)
{
    struct fixture *f = *state;
    jsCtx *js = NULL;
    jsStreamConfig sc;
    jsConsumerConfig cc;
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"s.>"};
    natsMsg *m = NULL;

    start_with_conf(f, "authorization { users = [\n"
                       "  {user: limited, password: p, permissions: {\n"
                       "     publish: { deny: [\"$JS.API.STREAM.DELETE.>\", "
                       "\"$JS.ACK.>\", \"$KEEL.API.>\"] } } }\n"
                       "  {user: admin, password: p}\n] }\n");
    assert_int_equal(
        natsConnection_Connect(&f->nc[0], opts_for(f, "admin", "p", NULL)),
        NATS_OK);
    assert_int_equal(
        natsConnection_Connect(&f->nc[1], opts_for(f, "limited", "p", NULL)),
        NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, f->nc[0], NULL), NATS_OK);
    jsStreamConfig_Init(&sc);
    sc.Name = "S";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, js, &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    si = NULL;
    jsConsumerConfig_Init(&cc);
    cc.Durable = "C";
    cc.AckPolicy = js_AckExplicit;
    assert_int_equal(js_AddConsumer(&ci, js, "S", &cc, NULL, &jerr), NATS_OK);
    jsConsumerInfo_Destroy(ci);
    jsPubAck *pa = NULL;
    assert_int_equal(js_Publish(&pa, js, "s.1", "a", 1, NULL, &jerr), NATS_OK);
    jsPubAck_Destroy(pa);

    /* STREAM.DELETE denied: a permissions error and the stream stays. */
    assert_int_equal(natsConnection_PublishRequestString(
                         f->nc[1], "$JS.API.STREAM.DELETE.S", "_INBOX.d", ""),
                     NATS_OK);
    assert_publish_denied(f->nc[1], "$JS.API.STREAM.DELETE.S");
    assert_int_equal(js_GetStreamInfo(&si, js, "S", NULL, &jerr), NATS_OK);
    assert_int_equal(si->State.Msgs, 1);
    jsStreamInfo_Destroy(si);

    /* Other API requests are allowed: the limited user pulls the message
     * (MSG.NEXT) but its ack is a denied publish, so it stays pending. */
    assert_int_equal(
        natsConnection_SubscribeSync(&f->sub[1], f->nc[1], "_INBOX.pull"),
        NATS_OK);
    assert_int_equal(natsConnection_PublishRequestString(
                         f->nc[1], "$JS.API.CONSUMER.MSG.NEXT.S.C",
                         "_INBOX.pull", "{\"batch\":1}"),
                     NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub[1], RECV_MS), NATS_OK);
    assert_string_equal(natsMsg_GetData(m), "a");
    const char *ack = natsMsg_GetReply(m);
    assert_non_null(ack);
    assert_int_equal(strncmp(ack, "$JS.ACK.S.C.", 12), 0);
    assert_int_equal(natsConnection_PublishString(f->nc[1], ack, "+ACK"),
                     NATS_OK);
    assert_publish_denied(f->nc[1], ack);
    assert_int_equal(ack_pending(js), 1);
    /* The same ack from the admin goes through (the ack path works). */
    assert_int_equal(natsConnection_PublishString(f->nc[0], ack, "+ACK"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[0]), NATS_OK);
    for (int i = 0; i < 100 && ack_pending(js) != 0; i++) {
        assert_int_equal(natsConnection_Flush(f->nc[0]), NATS_OK);
    }
    assert_int_equal(ack_pending(js), 0);
    natsMsg_Destroy(m);

    /* The admin API is denied the same way: keel cluster status and
     * orphans rm answer the admin, never the user denied $KEEL.API.>. */
    assert_int_equal(natsConnection_PublishRequestString(
                         f->nc[1], "$KEEL.API.SERVER.STOP", "_INBOX.k", ""),
                     NATS_OK);
    assert_publish_denied(f->nc[1], "$KEEL.API.SERVER.STOP");
    assert_int_equal(natsConnection_RequestString(
                         &m, f->nc[0], "$KEEL.API.CLUSTER.STATUS", "", RECV_MS),
                     NATS_OK);
    assert_non_null(strstr(natsMsg_GetData(m), "cluster_status_response"));
    natsMsg_Destroy(m);
    assert_int_equal(
        natsConnection_PublishRequestString(f->nc[1], "$KEEL.API.ORPHANS.RM.x",
                                            "_INBOX.k", "{\"name\":\"y\"}"),
        NATS_OK);
    assert_publish_denied(f->nc[1], "$KEEL.API.ORPHANS.RM.x");
    assert_false(natsConnection_IsClosed(f->nc[1]));
    jsCtx_Destroy(js);
}

/* JetStream limits: a $JS.API body over SRV_JS_API_REQUEST_BYTES_MAX is
 * refused with a JSON error before it is parsed; a stream's
 * max_consumers refuses one more consumer. */
static void js_request_size_and_max_consumers_are_enforced(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--max_payload", "4MB", NULL};
    jsCtx *js = NULL;
    jsStreamConfig sc;
    jsConsumerConfig cc;
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsMsg *reply = NULL;
    const char *subjects[] = {"lim.>"};

    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
    assert_int_equal(
        natsConnection_Connect(&f->nc[0], opts_for(f, NULL, NULL, NULL)),
        NATS_OK);
    /* 2 MiB of JSON (valid: spaces around an empty config). */
    size_t n = 2u * 1024 * 1024;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memset(big, ' ', n);
    memcpy(big + n / 2, "{}", 2);
    big[n] = '\0';
    assert_int_equal(natsConnection_Request(&reply, f->nc[0],
                                            "$JS.API.STREAM.CREATE.BIG", big,
                                            (int)n, RECV_MS),
                     NATS_OK);
    free(big);
    json_t *r = json_loadb(natsMsg_GetData(reply),
                           (size_t)natsMsg_GetDataLength(reply), 0, NULL);
    natsMsg_Destroy(reply);
    json_t *e = json_object_get(r, "error");
    assert_int_equal(json_integer_value(json_object_get(e, "code")), 400);
    const char *d = json_string_value(json_object_get(e, "description"));
    assert_non_null(d);
    assert_non_null(strstr(d, "byte limit"));
    json_decref(r);

    assert_int_equal(natsConnection_JetStream(&js, f->nc[0], NULL), NATS_OK);
    assert_int_not_equal(js_GetStreamInfo(&si, js, "BIG", NULL, &jerr),
                         NATS_OK);
    jsStreamConfig_Init(&sc);
    sc.Name = "LIM";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.MaxConsumers = 1;
    assert_int_equal(js_AddStream(&si, js, &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    jsConsumerConfig_Init(&cc);
    cc.Durable = "C1";
    cc.AckPolicy = js_AckExplicit;
    assert_int_equal(js_AddConsumer(&ci, js, "LIM", &cc, NULL, &jerr), NATS_OK);
    jsConsumerInfo_Destroy(ci);
    ci = NULL;
    cc.Durable = "C2";
    assert_int_not_equal(js_AddConsumer(&ci, js, "LIM", &cc, NULL, &jerr),
                         NATS_OK);
    assert_int_equal(jerr, JSMaximumConsumersLimitErr);
    jsCtx_Destroy(js);
}

/* jetstream { max_streams } caps streams server-wide: one more create
 * gets 10027 and is not created. */
static void server_wide_max_streams_refuses_one_more_stream(void **state)
{
    struct fixture *f = *state;
    jsCtx *js = NULL;
    jsStreamConfig sc;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *names[] = {"M1", "M2", "M3"};

    start_with_conf(f, "jetstream { max_streams: 2 }\n");
    assert_int_equal(
        natsConnection_Connect(&f->nc[0], opts_for(f, NULL, NULL, NULL)),
        NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, f->nc[0], NULL), NATS_OK);
    for (int i = 0; i < 3; i++) {
        jsStreamConfig_Init(&sc);
        sc.Name = names[i];
        jerr = 0;
        natsStatus s = js_AddStream(&si, js, &sc, NULL, &jerr);
        jsStreamInfo_Destroy(si);
        si = NULL;
        if (i < 2) {
            assert_int_equal(s, NATS_OK);
        } else {
            assert_int_not_equal(s, NATS_OK);
            assert_int_equal(jerr, JSMaximumStreamsLimitErr);
        }
    }
    assert_int_not_equal(js_GetStreamInfo(&si, js, "M3", NULL, &jerr), NATS_OK);
    jsCtx_Destroy(js);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(connections_past_max_connections_get_an_error),
        T(subscriptions_past_max_subscriptions_are_refused),
        T(a_conn_that_never_sends_connect_times_out),
        T(headers_past_max_header_size_are_refused),
        T(a_token_lets_in_only_who_knows_it),
        T(users_with_hashed_passwords_authenticate),
        T(a_slow_hash_does_not_stall_other_conns),
        T(denied_publish_and_subscribe_get_permission_errors),
        T(allow_responses_lets_a_responder_answer_once),
        T(js_and_admin_api_requests_honour_publish_permissions),
        T(js_request_size_and_max_consumers_are_enforced),
        T(server_wide_max_streams_refuses_one_more_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
