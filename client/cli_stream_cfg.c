/* Stream config from `keel stream add|edit` flags (cli_stream_cfg.h), and
 * `keel stream get`.
 */
#include "cli_stream_cfg.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keel/assert.h"
#include "cli_fmt.h"
#include "cli_js.h"
#include "keel_units.h"

void cli_stream_flags_init(struct cli_stream_flags *sf, struct cli_flag *flags)
{
    memset(sf, 0, sizeof *sf);
    sf->max_msgs = sf->max_bytes = sf->max_msg_size = CLI_UNSET;
    sf->max_msgs_per_subject = sf->max_consumers = sf->replicas = CLI_UNSET;
    struct cli_flag rows[CLI_STREAM_FLAGS_ROWS] = {
        {"subjects", 0, CLI_FLAG_LIST, &sf->subjects, "SUBJECTS",
         "subjects to capture (comma list; default the stream name)"},
        {"config", 0, CLI_FLAG_STR, &sf->config_file, "FILE.json",
         "start from this stream config JSON"},
        {"storage", 0, CLI_FLAG_STR, &sf->storage, "file|memory",
         "accepted for nats CLI scripts; Keel keeps streams on file"},
        {"retention", 0, CLI_FLAG_STR, &sf->retention, "POLICY",
         "limits (default), interest or workqueue"},
        {"discard", 0, CLI_FLAG_STR, &sf->discard, "old|new",
         "at a limit drop the oldest (old) or refuse new messages"},
        {"max-msgs", 0, CLI_FLAG_INT, &sf->max_msgs, "N",
         "messages kept (default unlimited)"},
        {"max-bytes", 0, CLI_FLAG_SIZE, &sf->max_bytes, "BYTES",
         "bytes kept, e.g. 1GiB (default unlimited)"},
        {"max-age", 0, CLI_FLAG_STR, &sf->max_age, "DURATION",
         "message lifetime, e.g. 12h, 7d (default forever)"},
        {"max-msg-size", 0, CLI_FLAG_SIZE, &sf->max_msg_size, "BYTES",
         "largest message accepted"},
        {"max-msgs-per-subject", 0, CLI_FLAG_INT, &sf->max_msgs_per_subject,
         "N", "messages kept per subject"},
        {"max-consumers", 0, CLI_FLAG_INT, &sf->max_consumers, "N",
         "consumers allowed"},
        {"replicas", 0, CLI_FLAG_INT, &sf->replicas, "N",
         "Raft replicas (1, 3 or 5)"},
        {"dupe-window", 0, CLI_FLAG_STR, &sf->dupe_window, "DURATION",
         "Nats-Msg-Id duplicate window (default 2m)"},
        {"fsync", 0, CLI_FLAG_STR, &sf->fsync, "POLICY",
         "Keel: group (default), always or interval:<ms>"},
        {"description", 0, CLI_FLAG_STR, &sf->description, "TEXT", "free text"},
        {"json", 0, CLI_FLAG_BOOL, &sf->json, NULL, "print the API reply"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    memcpy(flags, rows, sizeof rows);
}

int cli_parse_duration_ns(const char *flag, const char *s, int64_t *out,
                          char *errmsg)
{
    uint64_t ns = 0;
    if (strcmp(s, "unlimited") == 0 || strcmp(s, "forever") == 0) {
        *out = 0;
        return 0;
    }
    if (keel_duration_parse(s, KEEL_DURATION_FRACTION | KEEL_DURATION_DAYS,
                            &ns) &&
        ns <= (uint64_t)INT64_MAX) {
        *out = (int64_t)ns;
        return 0;
    }
    return keel_err(KEEL_EUSAGE, errmsg,
                    "--%s wants a duration like 30s, 12h or 7d, got '%s'", flag,
                    s);
}

static int load_file(const char *path, json_t **out, char *errmsg)
{
    json_error_t jerr;
    json_t *o = json_load_file(path, 0, &jerr);
    if (o == NULL || !json_is_object(o)) {
        json_decref(o);
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--config %s: not a JSON object (%s, line %d)", path,
                        jerr.text, jerr.line);
    }
    *out = o;
    return 0;
}

static int set_enum(json_t *cfg, const char *key, const char *v,
                    const char *const *allowed, char *errmsg)
{
    for (size_t i = 0; allowed[i] != NULL; i++) {
        if (strcmp(v, allowed[i]) == 0) {
            json_object_set_new(cfg, key, json_string(v));
            return 0;
        }
    }
    char list[128] = "";
    for (size_t i = 0; allowed[i] != NULL; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", i > 0 ? ", " : "",
                 allowed[i]);
    }
    return keel_err(KEEL_EUSAGE, errmsg, "bad %s '%s': use %s", key, v, list);
}

static int set_subjects(const struct cli_stream_flags *sf, json_t *cfg)
{
    json_t *arr = json_array();
    if (arr == NULL) {
        return KEEL_ENOMEM;
    }
    for (int i = 0; i < sf->subjects.count; i++) {
        char buf[CLI_SUBJECT_BYTES_MAX];
        char *save = NULL;
        snprintf(buf, sizeof buf, "%s", sf->subjects.items[i]);
        for (char *t = strtok_r(buf, ", ", &save); t != NULL;
             t = strtok_r(NULL, ", ", &save)) {
            json_array_append_new(arr, json_string(t));
        }
    }
    json_object_set_new(cfg, "subjects", arr);
    return 0;
}

static void set_int(json_t *cfg, const char *key, int64_t v)
{
    if (v != CLI_UNSET) {
        json_object_set_new(cfg, key, json_integer(v));
    }
}

static int set_strings(const struct cli_stream_flags *sf, json_t *cfg,
                       char *errmsg)
{
    static const char *const retentions[] = {"limits", "interest", "workqueue",
                                             NULL};
    static const char *const discards[] = {"old", "new", NULL};
    int64_t ns = 0;
    int rv = 0;
    if (sf->retention != NULL) {
        rv = set_enum(cfg, "retention", sf->retention, retentions, errmsg);
    }
    if (rv == 0 && sf->discard != NULL) {
        rv = set_enum(cfg, "discard", sf->discard, discards, errmsg);
    }
    if (rv == 0 && sf->max_age != NULL) {
        rv = cli_parse_duration_ns("max-age", sf->max_age, &ns, errmsg);
        json_object_set_new(cfg, "max_age", json_integer(ns));
    }
    if (rv == 0 && sf->dupe_window != NULL) {
        rv = cli_parse_duration_ns("dupe-window", sf->dupe_window, &ns, errmsg);
        json_object_set_new(cfg, "duplicate_window", json_integer(ns));
    }
    if (rv == 0 && sf->fsync != NULL) {
        json_object_set_new(cfg, "keel_fsync", json_string(sf->fsync));
    }
    if (rv == 0 && sf->description != NULL) {
        json_object_set_new(cfg, "description", json_string(sf->description));
    }
    return rv;
}

int cli_stream_cfg_build(const struct cli_stream_flags *sf, const char *name,
                         json_t **cfg, char *errmsg)
{
    int rv = 0;
    if (*cfg == NULL && sf->config_file != NULL) {
        rv = load_file(sf->config_file, cfg, errmsg);
    } else if (*cfg == NULL) {
        *cfg = json_object();
    }
    if (rv != 0 || *cfg == NULL) {
        return rv != 0 ? rv : KEEL_ENOMEM;
    }
    const char *given = cli_js_str(*cfg, "name", NULL);
    if (given != NULL && strcmp(given, name) != 0) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "the config names stream '%s' but the command names "
                        "'%s'",
                        given, name);
    }
    json_object_set_new(*cfg, "name", json_string(name));
    if (sf->subjects.count > 0) {
        rv = set_subjects(sf, *cfg);
    }
    set_int(*cfg, "max_msgs", sf->max_msgs);
    set_int(*cfg, "max_bytes", sf->max_bytes);
    set_int(*cfg, "max_msg_size", sf->max_msg_size);
    set_int(*cfg, "max_msgs_per_subject", sf->max_msgs_per_subject);
    set_int(*cfg, "max_consumers", sf->max_consumers);
    set_int(*cfg, "num_replicas", sf->replicas);
    if (rv == 0) {
        rv = set_strings(sf, *cfg, errmsg);
    }
    return rv;
}

void cli_stream_cfg_subjects(const json_t *cfg, char *buf, size_t len)
{
    const json_t *subj;
    size_t k;

    ASSERT(buf != NULL && len > 0);
    buf[0] = '\0';
    json_array_foreach(json_object_get(cfg, "subjects"), k, subj)
    {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%s", k > 0 ? ", " : "",
                 json_string_value(subj));
    }
}

void cli_stream_cfg_print(const json_t *cfg)
{
    char subjects[512];
    char a[32], b[32], c[32], d[32], e[32];
    cli_stream_cfg_subjects(cfg, subjects, sizeof subjects);
    int64_t max_bytes = cli_js_int(cfg, "max_bytes", -1);
    int64_t age = cli_js_int(cfg, "max_age", 0);
    cli_fmt_limit(cli_js_int(cfg, "max_msgs", -1), a, sizeof a);
    if (max_bytes < 0) {
        snprintf(b, sizeof b, "unlimited");
    } else {
        cli_fmt_bytes((uint64_t)max_bytes, b, sizeof b);
    }
    cli_fmt_duration_ns(age == 0 ? -1 : age, c, sizeof c);
    cli_fmt_duration_ns(cli_js_int(cfg, "duplicate_window", 0), d, sizeof d);
    cli_fmt_limit(cli_js_int(cfg, "max_consumers", -1), e, sizeof e);
    printf("Configuration:\n");
    printf("  %-18s %s\n", "Subjects:", subjects);
    printf("  %-18s %s\n", "Retention:", cli_js_str(cfg, "retention", "?"));
    printf("  %-18s %s\n", "Discard:", cli_js_str(cfg, "discard", "?"));
    printf("  %-18s %lld\n",
           "Replicas:", (long long)cli_js_int(cfg, "num_replicas", 1));
    printf("  %-18s %s\n", "Max Messages:", a);
    printf("  %-18s %s\n", "Max Bytes:", b);
    printf("  %-18s %s\n", "Max Age:", c);
    printf("  %-18s %s\n", "Duplicate Window:", d);
    printf("  %-18s %s\n", "Max Consumers:", e);
    printf("  %-18s %s\n\n", "Fsync:", cli_js_str(cfg, "keel_fsync", "group"));
}

int cli_confirm(const char *what, const char *name, char *errmsg)
{
    char line[16];
    if (!isatty(STDIN_FILENO)) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "refusing to %s %s without a terminal to ask: add "
                        "--force",
                        what, name);
    }
    fprintf(stderr, "Really %s %s? [y/N] ", what, name);
    if (fgets(line, sizeof line, stdin) == NULL ||
        tolower((unsigned char)line[0]) != 'y') {
        return keel_err(KEEL_ECANCELED, errmsg, "%s %s: not confirmed", what,
                        name);
    }
    return 0;
}
