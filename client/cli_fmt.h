/* cli_fmt: human output for keel — sizes and durations in human units,
 * aligned tables, colour only on a terminal, a progress bar for long work.
 * The formatting functions are pure (unit-tested); the printers write to a
 * FILE.
 */
#ifndef KEEL_CLI_FMT_H
#define KEEL_CLI_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "keel/limits.h"

/* 1023 -> "1023 B", 1536 -> "1.5 KiB", 5 << 20 -> "5.0 MiB". */
void cli_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/* Nanoseconds as "0s", "850ms", "42s", "5m30s", "2h0m", "3d4h"; ns < 0
 * (unlimited) as "unlimited". */
void cli_fmt_duration_ns(int64_t ns, char *buf, size_t len);

/* A count with thousands separators: 1234567 -> "1,234,567". */
void cli_fmt_count(uint64_t n, char *buf, size_t len);

/* A limit: -1 (or any negative) as "unlimited", else the count. */
void cli_fmt_limit(int64_t v, char *buf, size_t len);

/* An aligned table of text cells. Cells are copied. */
struct cli_table {
    int ncols;
    int nrows;
    char *cells[CLI_TABLE_ROWS_MAX + 1][CLI_TABLE_COLS_MAX]; /* row 0: head */
    size_t width[CLI_TABLE_COLS_MAX];
    bool right[CLI_TABLE_COLS_MAX]; /* right-align (numbers) */
    size_t dropped;                 /* rows past CLI_TABLE_ROWS_MAX */
};

/* Start a table with ncols headers ("Name", "Messages", ...); a header that
 * starts with '>' is right-aligned (the '>' is not printed). Returns 0 or
 * KEEL_ENOMEM. */
int cli_table_init(struct cli_table *t, int ncols, const char *const *heads);

/* Append a row of t->ncols cells (NULL prints as ""). Returns 0 or
 * KEEL_ENOMEM; rows past CLI_TABLE_ROWS_MAX are counted, not kept. */
int cli_table_add(struct cli_table *t, const char *const *cells);

/* Print with two spaces between columns; the header bold on a terminal. */
void cli_table_print(const struct cli_table *t, FILE *out, bool color);

void cli_table_free(struct cli_table *t);

/* cli_table_free and free(t) for a table from calloc (t may be NULL). */
void cli_table_destroy(struct cli_table *t);

/* Whether to colour output written to f: a terminal and NO_COLOR unset. */
bool cli_color(FILE *f);

/* A progress bar on stderr, drawn only when stderr is a terminal, at most
 * every CLI_PROGRESS_MS. */
struct cli_progress {
    const char *what;
    uint64_t total;
    uint64_t done;
    int64_t last_ms;
    bool tty;
};
void cli_progress_init(struct cli_progress *p, const char *what,
                       uint64_t total);
void cli_progress_update(struct cli_progress *p, uint64_t done);
/* Draw the final state and end the line. */
void cli_progress_done(struct cli_progress *p);

/* "[####      ] 40%  400/1,000 what" into buf (pure; width 30). */
void cli_progress_text(const char *what, uint64_t done, uint64_t total,
                       char *buf, size_t len);

/* The one monotonic clock of keel: the progress bar's pace, the benches'
 * timings and every bounded wait (cluster changes, polls) read it. */
int64_t cli_mono_ns(void);
int64_t cli_mono_ms(void);

/* Sleep ms milliseconds: the pause between two polls of a bounded wait. */
void cli_nap_ms(int64_t ms);

#endif
