/* keel: command-line client for Keel (and any NATS server).
 *
 * The dispatcher finds the command in a table and maps its return code to
 * the exit status: 0 ok, 1 the operation failed, 2 usage error. Commands
 * parse their own flags (cli_parse) so `keel <cmd> --help` lists them.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli.h"
#include "cli_js.h"
#include "cli_kv.h"
#include "cli_obj.h"
#include "cli_passwd.h"
#include "cli_store.h"

#define EXIT_USAGE 2

/* keel passwd reads no connection flags and talks to no server. */
static int cli_passwd(const struct cli_cmd *cmd, int argc, char **argv,
                      char *errmsg)
{
    (void)cmd;
    (void)errmsg;
    int status = cli_passwd_run(argc, argv, "keel passwd");
    if (status != 0) {
        /* cli_passwd_run already said why. */
        exit(status);
    }
    return 0;
}

static const struct cli_cmd commands[] = {
    {"pub", cli_pub, "SUBJECT [BODY]",
     "Publish BODY (default empty) to SUBJECT, --count times.", 1, 2},
    {"sub", cli_sub, "SUBJECT",
     "Print messages on SUBJECT (wildcards allowed) until --count or ^C.", 1,
     1},
    {"req", cli_req, "SUBJECT BODY",
     "Send a request and print the reply; fails after --timeout.", 2, 2},
    {"reply", cli_reply, "SUBJECT BODY",
     "Answer requests on SUBJECT with BODY until --count or ^C.", 2, 2},
    {"bench", cli_bench, "pub|sub|pubsub|req SUBJECT",
     "Measure throughput (msgs/s, MB/s) or request latency; also "
     "'keel bench js pub|fetch|push' and 'keel bench kv put|get BUCKET'.",
     2, 2},
    {"stream", cli_stream, "add|ls|info|edit|rm|purge|get|backup|restore",
     "Manage streams (JetStream); 'keel stream' lists the commands.", 0, 8},
    {"consumer", cli_consumer, "add|ls|info|rm|next",
     "Manage consumers and fetch messages; 'keel consumer' lists them.", 0, 8},
    {"kv", cli_kv,
     "add|put|get|create|update|del|purge|history|keys|watch|ls|info|rm",
     "Key/Value buckets; 'keel kv' lists the commands.", 0, 8},
    {"object", cli_obj, "add|put|get|ls|info|del|rm|seal|watch",
     "Object Store buckets; 'keel object' lists the commands.", 0, 8},
    {"passwd", cli_passwd, "[--iterations N]",
     "Print a password hash for keeld's authorization block.", 0, 0},
    {"cluster", cli_cluster,
     "status|orphans|add-peer|remove-peer|replace-peer|transfer-leader|"
     "recover|lameduck",
     "Cluster status, orphans and membership; 'keel cluster' lists them.", 0,
     8},
    {"store", cli_store, "dump --data DIR",
     "Dump a stopped node's store as JSON lines (read-only).", 1, 1},
};

#define COMMANDS_COUNT (sizeof commands / sizeof commands[0])

static void print_help(FILE *out)
{
    fprintf(out, "usage: keel <command> [args] [flags]\n\n"
                 "Client for Keel, the NATS-compatible stream server.\n\n"
                 "commands:\n");
    for (size_t i = 0; i < COMMANDS_COUNT; i++) {
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(out, "\nRun 'keel <command> --help' for its flags. Connection "
                 "flags: -s/--server, --user,\n--password, --creds, "
                 "--tlscert, --tlskey, --tlsca, --timeout; they go before or\n"
                 "after the command. NATS_URL sets the default server. Read "
                 "commands take --json.\n"
                 "Exit status: 0 ok, 1 operation failed, 2 usage error.\n");
}

/* The nats CLI's short names, so its users' scripts run unchanged. */
static const char *const aliases[][2] = {
    {"obj", "object"}, {"str", "stream"}, {"con", "consumer"}};

static const struct cli_cmd *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcmp(aliases[i][0], name) == 0) {
            name = aliases[i][1];
        }
    }
    for (size_t i = 0; i < COMMANDS_COUNT; i++) {
        if (strcmp(commands[i].name, name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    char errmsg[KEEL_ERRMSG_MAX] = "";

    /* A closed stdout (keel sub | head) must end the process quietly. */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        print_help(stderr);
        return EXIT_USAGE;
    }
    /* `keel -s URL stream ls`, as NATS users type it. */
    int hoisted = 0;
    if (cli_hoist_conn_flags(argc, argv, &hoisted, errmsg) != 0) {
        fprintf(stderr, "keel: %s\n", errmsg);
        return EXIT_USAGE;
    }
    if (hoisted == argc - 1) {
        fprintf(stderr, "keel: which command? connection flags go before or "
                        "after one (run 'keel --help')\n");
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
        strcmp(name, "help") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("keel %s\n", KEEL_VERSION);
        return 0;
    }
    const struct cli_cmd *cmd = find_command(name);
    if (cmd == NULL) {
        if (name[0] == '-') {
            fprintf(stderr,
                    "keel: unknown flag '%s' before the command: only "
                    "connection flags may come first; put the others after "
                    "the command (run 'keel --help')\n",
                    name);
        } else {
            fprintf(stderr, "keel: unknown command '%s' (run 'keel --help')\n",
                    name);
        }
        return EXIT_USAGE;
    }
    ASSERT(cmd->fn != NULL);
    int rv = cmd->fn(cmd, argc - 1, argv + 1, errmsg);
    /* Let libnats stop its threads so nothing runs past main. */
    nats_Close();
    if (rv == 0) {
        return 0;
    }
    fprintf(stderr, "keel %s: %s\n", cmd->name,
            errmsg[0] != '\0' ? errmsg : keel_strerror(rv));
    return rv == KEEL_EUSAGE ? EXIT_USAGE : 1;
}
