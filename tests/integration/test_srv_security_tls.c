/* TLS for client conns against a real keeld: the NATS flow (INFO with
 * tls_required, then the handshake) with libnats, handshake-first with
 * `openssl s_client`, client certificates (verify), plain-text clients
 * refused, and certificate reload on SIGHUP. Certificates are made at run
 * time with the openssl tool; no key is committed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nats/nats.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define RECV_MS 5000

struct fixture {
    struct h_keeld k;
    char certs[256]; /* k.dir/certs */
    char conf[300];
    natsConnection *nc[3];
    natsSubscription *sub;
    natsOptions *opts;
    int fd;
};

/* Run a shell command in dir; assert it succeeded. */
static void sh(const char *dir, const char *cmd)
{
    char full[2048];
    snprintf(full, sizeof full, "cd '%s' && (%s) >/dev/null 2>&1", dir, cmd);
    int st = system(full);
    if (st != 0) {
        fail_msg("command failed (%d): %s", st, cmd);
    }
}

/* A CA named ca, and a cert signed by it for name (server: 127.0.0.1). */
static void make_ca(const char *dir, const char *ca)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt "
             "ec_paramgen_curve:prime256v1 -nodes -keyout %s.key -out %s.pem "
             "-days 1 -subj /CN=%s",
             ca, ca, ca);
    sh(dir, cmd);
}

static void make_cert(const char *dir, const char *ca, const char *name)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n"
             "extendedKeyUsage=serverAuth,clientAuth\\n' > %s.ext && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
             "-nodes -keyout %s.key -out %s.csr -subj /CN=%s && "
             "openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key "
             "-CAcreateserial -out %s.pem -days 1 -extfile %s.ext",
             name, name, name, name, name, ca, ca, name, name);
    sh(dir, cmd);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || h_keeld_init(&f->k) != 0) {
        return -1;
    }
    f->fd = -1;
    snprintf(f->certs, sizeof f->certs, "%s/certs", f->k.dir);
    snprintf(f->conf, sizeof f->conf, "%s/keeld.conf", f->k.dir);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", f->certs);
    if (system(cmd) != 0) {
        return -1;
    }
    *state = f;
    make_ca(f->certs, "ca");
    make_cert(f->certs, "ca", "server");
    make_cert(f->certs, "ca", "client");
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    natsSubscription_Destroy(f->sub);
    for (int i = 0; i < 3; i++) {
        natsConnection_Destroy(f->nc[i]);
    }
    natsOptions_Destroy(f->opts);
    if (f->fd >= 0) {
        close(f->fd);
    }
    int rv = h_keeld_stop(&f->k, NULL);
    h_keeld_cleanup(&f->k);
    free(f);
    return rv;
}

/* keeld with tls { } from the config file; extra lines inside the block. */
static void start_tls(struct fixture *f, const char *extra)
{
    const char *args[] = {"-c", f->conf, NULL};
    FILE *fp = fopen(f->conf, "w");
    assert_non_null(fp);
    fprintf(
        fp,
        "tls {\n  cert_file: \"%s/server.pem\"\n  key_file: "
        "\"%s/server.key\"\n  ca_file: \"%s/ca.pem\"\n  timeout: 2\n%s\n}\n",
        f->certs, f->certs, f->certs, extra != NULL ? extra : "");
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
}

/* libnats options trusting ca (a file name in certs), with an optional
 * client certificate. */
static natsOptions *tls_opts(struct fixture *f, const char *ca,
                             const char *client)
{
    char path[512];
    char key[512];

    natsOptions_Destroy(f->opts);
    f->opts = NULL;
    assert_int_equal(natsOptions_Create(&f->opts), NATS_OK);
    assert_int_equal(natsOptions_SetURL(f->opts, f->k.url), NATS_OK);
    assert_int_equal(natsOptions_SetAllowReconnect(f->opts, false), NATS_OK);
    assert_int_equal(natsOptions_SetTimeout(f->opts, RECV_MS), NATS_OK);
    assert_int_equal(natsOptions_SetSecure(f->opts, true), NATS_OK);
    snprintf(path, sizeof path, "%s/%s.pem", f->certs, ca);
    assert_int_equal(natsOptions_LoadCATrustedCertificates(f->opts, path),
                     NATS_OK);
    if (client != NULL) {
        snprintf(path, sizeof path, "%s/%s.pem", f->certs, client);
        snprintf(key, sizeof key, "%s/%s.key", f->certs, client);
        assert_int_equal(natsOptions_LoadCertificatesChain(f->opts, path, key),
                         NATS_OK);
    }
    return f->opts;
}

static void round_trip(natsConnection *nc, natsSubscription **sub,
                       const char *subj)
{
    natsMsg *m = NULL;
    assert_int_equal(natsConnection_SubscribeSync(sub, nc, subj), NATS_OK);
    assert_int_equal(natsConnection_Flush(nc), NATS_OK);
    assert_int_equal(natsConnection_PublishString(nc, subj, "over tls"),
                     NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, *sub, RECV_MS), NATS_OK);
    assert_string_equal(natsMsg_GetData(m), "over tls");
    natsMsg_Destroy(m);
}

static void libnats_connects_over_tls_and_messages_flow(void **state)
{
    struct fixture *f = *state;

    start_tls(f, NULL);
    assert_int_equal(natsConnection_Connect(&f->nc[0], tls_opts(f, "ca", NULL)),
                     NATS_OK);
    round_trip(f->nc[0], &f->sub, "secure.hello");
    /* A large message crosses many TLS records both ways. */
    static char big[512 * 1024];
    memset(big, 'x', sizeof big);
    natsMsg *m = NULL;
    assert_int_equal(
        natsConnection_Publish(f->nc[0], "secure.hello", big, sizeof big),
        NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub, RECV_MS), NATS_OK);
    assert_int_equal(natsMsg_GetDataLength(m), (int)sizeof big);
    natsMsg_Destroy(m);
}

static void a_plain_text_client_is_told_tls_is_required(void **state)
{
    struct fixture *f = *state;
    char buf[4096];

    start_tls(f, NULL);
    f->fd = h_tcp_connect(f->k.port);
    assert_true(f->fd >= 0);
    assert_int_equal(h_read_until(f->fd, "}\r\n", buf, sizeof buf, RECV_MS), 0);
    assert_non_null(strstr(buf, "\"tls_required\":true"));
    assert_int_equal(write(f->fd, "CONNECT {}\r\n", 12), 12);
    assert_int_equal(h_read_until(f->fd,
                                  "-ERR 'Secure Connection - TLS Required'",
                                  buf, sizeof buf, RECV_MS),
                     0);
    /* libnats without TLS refuses on its own side too. */
    natsOptions *o = NULL;
    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    assert_int_equal(natsOptions_SetURL(o, f->k.url), NATS_OK);
    assert_int_not_equal(natsConnection_Connect(&f->nc[0], o), NATS_OK);
    natsOptions_Destroy(o);
}

static void verify_requires_a_client_certificate_from_the_ca(void **state)
{
    struct fixture *f = *state;

    start_tls(f, "  verify: true");
    assert_int_not_equal(
        natsConnection_Connect(&f->nc[0], tls_opts(f, "ca", NULL)), NATS_OK);
    assert_int_equal(
        natsConnection_Connect(&f->nc[1], tls_opts(f, "ca", "client")),
        NATS_OK);
    round_trip(f->nc[1], &f->sub, "mutual");
}

/* openssl s_client with pipes: stdin to write, stdout to read. */
struct child {
    pid_t pid;
    int in;
    int out;
};

static void spawn_s_client(struct fixture *f, struct child *ch,
                           const char *version)
{
    int in[2];
    int out[2];
    char port[16];
    char ca[400];

    snprintf(port, sizeof port, "127.0.0.1:%d", f->k.port);
    snprintf(ca, sizeof ca, "%s/ca.pem", f->certs);
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    ch->pid = fork();
    assert_true(ch->pid >= 0);
    if (ch->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        if (version != NULL) {
            /* SECLEVEL=0 lets the client offer old versions at all, so
             * the refusal is the server's. */
            execlp("openssl", "openssl", "s_client", "-connect", port,
                   "-CAfile", ca, "-verify_return_error", "-quiet", version,
                   "-cipher", "DEFAULT:@SECLEVEL=0", (char *)NULL);
        }
        execlp("openssl", "openssl", "s_client", "-connect", port, "-CAfile",
               ca, "-verify_return_error", "-quiet", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    ch->in = in[1];
    ch->out = out[0];
}

static void handshake_first_serves_openssl_s_client(void **state)
{
    struct fixture *f = *state;
    struct child ch;
    char buf[4096];
    int st = 0;

    start_tls(f, "  handshake_first: true");
    spawn_s_client(f, &ch, NULL);
    /* INFO arrives only inside TLS, which s_client decrypts for us. */
    assert_int_equal(h_read_until(ch.out, "}\r\n", buf, sizeof buf, RECV_MS),
                     0);
    assert_non_null(strstr(buf, "INFO {"));
    const char *hello = "CONNECT {\"verbose\":true}\r\nPING\r\n";
    assert_int_equal(write(ch.in, hello, strlen(hello)),
                     (ssize_t)strlen(hello));
    assert_int_equal(h_read_until(ch.out, "PONG\r\n", buf, sizeof buf, RECV_MS),
                     0);
    assert_non_null(strstr(buf, "+OK\r\n"));
    close(ch.in);
    close(ch.out);
    kill(ch.pid, SIGTERM);
    assert_int_equal(h_wait_pid(ch.pid, RECV_MS, &st), 0);
}

/* Run s_client with version until INFO arrives or it exits; true if INFO
 * came. */
static bool s_client_gets_info(struct fixture *f, const char *version)
{
    struct child ch;
    char buf[4096];
    int st = 0;

    spawn_s_client(f, &ch, version);
    bool got = h_read_until(ch.out, "}\r\n", buf, sizeof buf, RECV_MS) == 0;
    close(ch.in);
    close(ch.out);
    kill(ch.pid, SIGTERM);
    assert_int_equal(h_wait_pid(ch.pid, RECV_MS, &st), 0);
    return got;
}

static void only_tls_1_2_and_newer_are_accepted(void **state)
{
    struct fixture *f = *state;

    start_tls(f, "  handshake_first: true");
    assert_true(s_client_gets_info(f, "-tls1_2"));
    assert_true(s_client_gets_info(f, "-tls1_3"));
    assert_false(s_client_gets_info(f, "-tls1_1"));
    assert_false(s_client_gets_info(f, "-tls1"));
}

static bool new_ca_accepted(void *arg)
{
    struct fixture *f = arg;
    natsConnection_Destroy(f->nc[1]);
    f->nc[1] = NULL;
    return natsConnection_Connect(&f->nc[1], tls_opts(f, "ca2", NULL)) ==
           NATS_OK;
}

static void sighup_reloads_the_certificate_for_new_conns(void **state)
{
    struct fixture *f = *state;

    start_tls(f, NULL);
    assert_int_equal(natsConnection_Connect(&f->nc[0], tls_opts(f, "ca", NULL)),
                     NATS_OK);
    /* A new server certificate from a second CA, in place of the old. */
    make_ca(f->certs, "ca2");
    make_cert(f->certs, "ca2", "server2");
    sh(f->certs, "cp server2.pem server.pem && cp server2.key server.key");
    assert_int_not_equal(
        natsConnection_Connect(&f->nc[1], tls_opts(f, "ca2", NULL)), NATS_OK);
    assert_int_equal(kill(f->k.pid, SIGHUP), 0);
    assert_true(h_poll(new_ca_accepted, f, RECV_MS));
    /* The conn made before the reload keeps working. */
    round_trip(f->nc[0], &f->sub, "still.here");
}

/* The monitoring port over TLS (https_port) with the tls { } files: curl
 * trusting the CA gets /healthz; plain HTTP to the same port gets no
 * answer. */
static void https_port_serves_monitoring_over_tls(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"-c", f->conf, NULL};
    char cmd[1024], out[64] = "";

    FILE *fp = fopen(f->conf, "w");
    assert_non_null(fp);
    fprintf(fp,
            "https_port: 0\ntls {\n  cert_file: \"%s/server.pem\"\n  "
            "key_file: \"%s/server.key\"\n}\n",
            f->certs, f->certs);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(h_keeld_start(&f->k, 0, true, args), 0);
    snprintf(cmd, sizeof cmd,
             "curl -s -o /dev/null -w '%%{http_code}' --max-time 5 --cacert "
             "'%s/ca.pem' https://127.0.0.1:%d/healthz",
             f->certs, f->k.http_port);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(out, sizeof out, p));
    assert_int_equal(pclose(p), 0);
    assert_string_equal(out, "200");
    char body[1024];
    assert_int_not_equal(
        h_http_get(f->k.http_port, "/healthz", body, sizeof body), 200);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(libnats_connects_over_tls_and_messages_flow),
        T(a_plain_text_client_is_told_tls_is_required),
        T(verify_requires_a_client_certificate_from_the_ca),
        T(handshake_first_serves_openssl_s_client),
        T(sighup_reloads_the_certificate_for_new_conns),
        T(https_port_serves_monitoring_over_tls),
        T(only_tls_1_2_and_newer_are_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
