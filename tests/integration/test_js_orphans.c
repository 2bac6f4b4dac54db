/* keel cluster orphans ls|restore|rm and keel cluster status on one keeld
 * (docs/design.md §5: data the metadata does not name goes to
 * quarantine/orphans/ and only an operator command removes or restores
 * it): a group directory no stream names is quarantined at start, listed
 * with its size, restored to groups/ byte for byte (and quarantined again
 * at the next start, since no stream names it), refused without --force
 * when there is no terminal to ask, then removed; /healthz and /metrics
 * follow. keel cluster status exits 1 naming a stream that cannot open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <jansson.h>

#include "harness.h"

#define HEX "0123456789abcdef0123456789abcdef"
#define ORPHAN "group-" HEX
#define CONTENT "orphan-bytes"
#define OUT_BYTES 65536

static struct h_keeld k;
static char out[OUT_BYTES];
static char body[65536];

/* Run keel args against k (stdin /dev/null: no terminal to ask on);
 * stdout then stderr into out. Returns the exit status or -1. */
static int keel(const char *args)
{
    char cmd[1024];
    const char *bin = getenv("KEEL");
    assert_non_null(bin);
    snprintf(cmd, sizeof cmd, "%s %s -s %s </dev/null 2>&1", bin, args, k.url);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void path_of(char *buf, size_t len, const char *rel)
{
    snprintf(buf, len, "%s/js/%s", k.data_dir, rel);
}

static bool exists(const char *rel)
{
    char p[512];
    struct stat sb;
    path_of(p, sizeof p, rel);
    return stat(p, &sb) == 0;
}

static void restart(void)
{
    assert_int_equal(h_keeld_stop(&k, NULL), 0);
    assert_int_equal(h_keeld_start(&k, 0, true, NULL), 0);
}

static int setup(void **state)
{
    (void)state;
    assert_int_equal(h_keeld_init(&k), 0);
    assert_int_equal(h_keeld_start(&k, 0, true, NULL), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    h_keeld_cleanup(&k);
    return 0;
}

static void orphans_are_listed_restored_and_removed(void **state)
{
    (void)state;
    char p[512];
    assert_int_equal(keel("stream add KEEP --subjects 'keep.>'"), 0);
    assert_int_equal(keel("cluster orphans ls"), 0);
    assert_non_null(strstr(out, "No orphans on 1 node(s)"));
    /* A group directory no stream names (as a lost meta entry leaves). */
    assert_int_equal(h_keeld_stop(&k, NULL), 0);
    path_of(p, sizeof p, "groups/" HEX);
    assert_int_equal(mkdir(p, 0755), 0);
    path_of(p, sizeof p, "groups/" HEX "/seg");
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fputs(CONTENT, fp);
    fclose(fp);
    assert_int_equal(h_keeld_start(&k, 0, true, NULL), 0);
    assert_true(exists("quarantine/orphans/" ORPHAN "/seg"));
    assert_false(exists("groups/" HEX));

    assert_int_equal(keel("cluster orphans ls --json"), 0);
    json_t *o = json_loads(out, 0, NULL);
    assert_non_null(o);
    json_t *n0 = json_array_get(json_object_get(o, "nodes"), 0);
    char node[128];
    snprintf(node, sizeof node, "%s",
             json_string_value(json_object_get(n0, "server")));
    json_t *e = json_array_get(json_object_get(n0, "orphans"), 0);
    assert_string_equal(json_string_value(json_object_get(e, "name")), ORPHAN);
    assert_int_equal(json_integer_value(json_object_get(e, "bytes")),
                     strlen(CONTENT));
    assert_int_equal(json_integer_value(json_object_get(e, "files")), 1);
    json_decref(o);
    assert_int_equal(keel("cluster orphans ls"), 0);
    assert_non_null(strstr(out, ORPHAN));
    assert_int_equal(h_http_get(k.http_port, "/healthz", body, sizeof body),
                     200);
    assert_non_null(strstr(body, "orphan"));

    /* restore: back to groups/<hex>, every byte. */
    assert_int_equal(keel("cluster orphans restore " ORPHAN), 0);
    assert_non_null(strstr(out, "moved back"));
    assert_false(exists("quarantine/orphans/" ORPHAN));
    path_of(p, sizeof p, "groups/" HEX "/seg");
    fp = fopen(p, "r");
    assert_non_null(fp);
    char got[64] = "";
    assert_non_null(fgets(got, sizeof got, fp));
    fclose(fp);
    assert_string_equal(got, CONTENT);
    /* No stream names it: the next start quarantines it again. */
    restart();
    assert_true(exists("quarantine/orphans/" ORPHAN "/seg"));

    /* The node's name (a server id here: new at every start). */
    assert_int_equal(keel("cluster orphans ls --json"), 0);
    o = json_loads(out, 0, NULL);
    assert_non_null(o);
    snprintf(node, sizeof node, "%s",
             json_string_value(json_object_get(
                 json_array_get(json_object_get(o, "nodes"), 0), "server")));
    json_decref(o);
    /* rm: refused without a terminal to ask, and for a bad name. */
    assert_int_equal(keel("cluster orphans rm " ORPHAN), 2);
    assert_non_null(strstr(out, "--force"));
    assert_true(exists("quarantine/orphans/" ORPHAN "/seg"));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cluster orphans rm ../groups --force --node %s",
             node);
    assert_int_equal(keel(cmd), 1);
    assert_non_null(strstr(out, "not an orphan name"));
    assert_int_equal(keel("cluster orphans rm " ORPHAN " --force --node nope"),
                     1);
    assert_non_null(strstr(out, "not linked"));
    assert_int_equal(keel("cluster orphans rm group-" HEX ".9 --force"), 1);
    assert_non_null(strstr(out, "no node holds"));
    assert_int_equal(keel("cluster orphans rm " ORPHAN " --force"), 0);
    assert_false(exists("quarantine/orphans/" ORPHAN));
    assert_true(exists("groups")); /* nothing else touched */
    assert_int_equal(h_http_get(k.http_port, "/healthz", body, sizeof body),
                     200);
    assert_null(strstr(body, "orphan"));
    assert_int_equal(h_http_get(k.http_port, "/metrics", body, sizeof body),
                     200);
    assert_non_null(strstr(body, "\nkeel_quarantined_orphans 0\n"));
}

static void status_names_a_stream_that_cannot_open(void **state)
{
    (void)state;
    assert_int_equal(keel("stream add BROKEN --subjects 'b.>'"), 0);
    assert_int_equal(keel("pub --jetstream b.x payload-marker-XYZ --count 3"),
                     0);
    assert_int_equal(keel("cluster status"), 0);
    assert_non_null(strstr(out, "1 of 1 nodes answered"));
    assert_int_equal(h_keeld_stop(&k, NULL), 0);
    assert_int_equal(h_flip_segment_byte(k.data_dir, "payload-marker"), 0);
    assert_int_equal(h_keeld_start(&k, 0, true, NULL), 0);
    assert_int_equal(h_http_get(k.http_port, "/healthz", body, sizeof body),
                     503);
    assert_int_equal(keel("cluster status"), 1);
    assert_non_null(strstr(out, "BROKEN"));
    assert_non_null(strstr(out, "not healthy"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(orphans_are_listed_restored_and_removed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(status_names_a_stream_that_cannot_open,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
