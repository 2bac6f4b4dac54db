/* Human output helpers for keel (see cli_fmt.h). */
#include "cli_fmt.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keel/assert.h"
#include "keel/error.h"

void cli_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes / 1024.0;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, units[u]);
}

void cli_fmt_duration_ns(int64_t ns, char *buf, size_t len)
{
    if (ns < 0) {
        snprintf(buf, len, "unlimited");
        return;
    }
    uint64_t ms = (uint64_t)ns / 1000000u;
    uint64_t s = ms / 1000;
    if (s == 0) {
        snprintf(buf, len, ms == 0 && ns > 0 ? "%lluus" : "%llums",
                 ms == 0 && ns > 0 ? (unsigned long long)((uint64_t)ns / 1000u)
                                   : (unsigned long long)ms);
    } else if (s < 60) {
        snprintf(buf, len, "%llus", (unsigned long long)s);
    } else if (s < 3600) {
        snprintf(buf, len, "%llum%llus", (unsigned long long)(s / 60),
                 (unsigned long long)(s % 60));
    } else if (s < 86400) {
        snprintf(buf, len, "%lluh%llum", (unsigned long long)(s / 3600),
                 (unsigned long long)(s % 3600 / 60));
    } else {
        snprintf(buf, len, "%llud%lluh", (unsigned long long)(s / 86400),
                 (unsigned long long)(s % 86400 / 3600));
    }
}

void cli_fmt_count(uint64_t n, char *buf, size_t len)
{
    char digits[32];
    char out[48];
    int nd = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    size_t o = 0;
    for (int i = 0; i < nd; i++) {
        if (i > 0 && (nd - i) % 3 == 0) {
            out[o++] = ',';
        }
        out[o++] = digits[i];
    }
    out[o] = '\0';
    if (o >= len) {
        o = len - 1; /* callers pass >= 32 bytes; never reached then */
    }
    memcpy(buf, out, o);
    buf[o] = '\0';
}

void cli_fmt_limit(int64_t v, char *buf, size_t len)
{
    if (v < 0) {
        snprintf(buf, len, "unlimited");
    } else {
        cli_fmt_count((uint64_t)v, buf, len);
    }
}

int cli_table_init(struct cli_table *t, int ncols, const char *const *heads)
{
    ASSERT(ncols > 0 && ncols <= CLI_TABLE_COLS_MAX);
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
    for (int c = 0; c < ncols; c++) {
        const char *h = heads[c];
        t->right[c] = h[0] == '>';
        t->cells[0][c] = strdup(t->right[c] ? h + 1 : h);
        if (t->cells[0][c] == NULL) {
            cli_table_free(t);
            return KEEL_ENOMEM;
        }
        t->width[c] = strlen(t->cells[0][c]);
    }
    t->nrows = 1;
    return 0;
}

int cli_table_add(struct cli_table *t, const char *const *cells)
{
    if (t->nrows > CLI_TABLE_ROWS_MAX) {
        t->dropped++;
        return 0;
    }
    for (int c = 0; c < t->ncols; c++) {
        const char *v = cells[c] != NULL ? cells[c] : "";
        t->cells[t->nrows][c] = strdup(v);
        if (t->cells[t->nrows][c] == NULL) {
            return KEEL_ENOMEM;
        }
        size_t w = strlen(v);
        if (w > t->width[c]) {
            t->width[c] = w;
        }
    }
    t->nrows++;
    return 0;
}

void cli_table_print(const struct cli_table *t, FILE *out, bool color)
{
    for (int r = 0; r < t->nrows; r++) {
        if (r == 0 && color) {
            fputs("\033[1m", out);
        }
        for (int c = 0; c < t->ncols; c++) {
            const char *v = t->cells[r][c] != NULL ? t->cells[r][c] : "";
            int w = (int)t->width[c];
            bool last = c + 1 == t->ncols;
            if (t->right[c]) {
                fprintf(out, "%*s", w, v);
            } else if (last) {
                fputs(v, out); /* no trailing blanks */
            } else {
                fprintf(out, "%-*s", w, v);
            }
            if (!last) {
                fputs("  ", out);
            }
        }
        if (r == 0 && color) {
            fputs("\033[0m", out);
        }
        fputc('\n', out);
    }
    if (t->dropped > 0) {
        fprintf(out, "(%zu more rows not shown; use --json)\n", t->dropped);
    }
}

void cli_table_free(struct cli_table *t)
{
    for (int r = 0; r <= CLI_TABLE_ROWS_MAX; r++) {
        for (int c = 0; c < CLI_TABLE_COLS_MAX; c++) {
            free(t->cells[r][c]);
            t->cells[r][c] = NULL;
        }
    }
    t->nrows = 0;
}

void cli_table_destroy(struct cli_table *t)
{
    if (t != NULL) {
        cli_table_free(t);
        free(t);
    }
}

bool cli_color(FILE *f)
{
    const char *no = getenv("NO_COLOR");
    return isatty(fileno(f)) && (no == NULL || no[0] == '\0');
}

int64_t cli_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t cli_mono_ms(void)
{
    return cli_mono_ns() / 1000000;
}

void cli_nap_ms(int64_t ms)
{
    ASSERT(ms >= 0);
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void cli_progress_text(const char *what, uint64_t done, uint64_t total,
                       char *buf, size_t len)
{
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    char d[32];
    char tot[32];
    uint64_t pct = total > 0 ? (done >= total ? 100 : done * 100 / total) : 0;
    size_t fill = (size_t)(pct * WIDTH / 100);
    memset(bar, '#', fill);
    memset(bar + fill, ' ', WIDTH - fill);
    bar[WIDTH] = '\0';
    cli_fmt_count(done, d, sizeof d);
    cli_fmt_count(total, tot, sizeof tot);
    snprintf(buf, len, "[%s] %3llu%%  %s/%s %s", bar, (unsigned long long)pct,
             d, tot, what);
}

void cli_progress_init(struct cli_progress *p, const char *what, uint64_t total)
{
    memset(p, 0, sizeof *p);
    p->what = what;
    p->total = total;
    p->tty = isatty(STDERR_FILENO);
}

void cli_progress_update(struct cli_progress *p, uint64_t done)
{
    char line[256];
    p->done = done;
    int64_t now = cli_mono_ms();
    if (!p->tty || now - p->last_ms < CLI_PROGRESS_MS) {
        return;
    }
    p->last_ms = now;
    cli_progress_text(p->what, done, p->total, line, sizeof line);
    fprintf(stderr, "\r%s", line);
}

void cli_progress_done(struct cli_progress *p)
{
    char line[256];
    if (!p->tty) {
        return;
    }
    cli_progress_text(p->what, p->done, p->total, line, sizeof line);
    fprintf(stderr, "\r%s\n", line);
}
