/* cli_stream_cfg: `keel stream add|edit` flags -> a stream config JSON
 * (docs/protocol.md §2.4), and the human print of a config. Pure apart from
 * reading --config FILE.
 */
#ifndef KEEL_CLI_STREAM_CFG_H
#define KEEL_CLI_STREAM_CFG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli.h"

#define CLI_UNSET INT64_MIN

struct cli_stream_flags {
    struct cli_list subjects; /* repeatable, each may be a comma list */
    const char *storage;      /* accepted; Keel stores on file */
    const char *retention;    /* limits|interest|workqueue */
    const char *discard;      /* old|new */
    const char *max_age;      /* duration: 30s, 12h, 7d, 1y; 0 = forever */
    const char *dupe_window;
    const char *fsync; /* group|always|interval:<ms> (Keel extension) */
    const char *description;
    const char *config_file;
    int64_t max_msgs, max_bytes, max_msg_size, max_msgs_per_subject;
    int64_t max_consumers, replicas;
    bool json;
};

#define CLI_STREAM_FLAGS_ROWS 18

/* Reset sf to "nothing given" and fill flags (CLI_STREAM_FLAGS_ROWS rows,
 * NULL-terminated) pointing into sf. */
void cli_stream_flags_init(struct cli_stream_flags *sf, struct cli_flag *flags);

/* Durations for max_age / dupe_window: "500ms", "30s", "5m", "12h", "7d",
 * "1y", or a bare number of seconds; "0" and "unlimited" are 0 (forever).
 * Returns 0 or KEEL_EUSAGE. */
int cli_parse_duration_ns(const char *flag, const char *s, int64_t *out,
                          char *errmsg);

/* Build the config for stream `name`: start from *cfg when not NULL (an
 * edit: the current config), else from --config FILE or an empty object;
 * then apply every flag given. *cfg owns the result. Returns 0,
 * KEEL_EUSAGE (bad flag value or name mismatch) or KEEL_EIO (file). */
int cli_stream_cfg_build(const struct cli_stream_flags *sf, const char *name,
                         json_t **cfg, char *errmsg);

/* Print a config as aligned "Key: value" lines with human units. */
void cli_stream_cfg_print(const json_t *cfg);

/* The config's subjects joined with ", " into buf (len bytes, cut short
 * when they do not fit). */
void cli_stream_cfg_subjects(const json_t *cfg, char *buf, size_t len);

/* Ask "<what> <name>? [y/N]" on the terminal. Returns 0 on yes,
 * KEEL_ECANCELED on no, KEEL_EUSAGE when stdin is not a terminal (the
 * message says to add --force). */
int cli_confirm(const char *what, const char *name, char *errmsg);

/* keel stream get NAME [SEQ] [--last-for SUBJECT] [--json]. */
int cli_stream_get(const struct cli_cmd *cmd, int argc, char **argv,
                   char *errmsg);

#endif
