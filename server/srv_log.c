#include "srv_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "keel/error.h"

#define LOG_LINE_BYTES_MAX 4096

static FILE *log_file;
static bool log_owned;
static enum srv_log_level log_level = SRV_LOG_INFO;
static bool log_trace;

int srv_log_open(const char *path, bool debug, bool trace, char *errmsg)
{
    log_level = debug ? SRV_LOG_DEBUG : SRV_LOG_INFO;
    log_trace = trace;
    if (path == NULL || path[0] == '\0') {
        log_file = stderr;
        log_owned = false;
        return 0;
    }
    log_file = fopen(path, "a");
    if (log_file == NULL) {
        log_file = stderr;
        return keel_err(KEEL_EIO, errmsg, "cannot open log file %s: %s", path,
                        strerror(errno));
    }
    /* Line buffering keeps each event visible as soon as it happens. */
    setvbuf(log_file, NULL, _IOLBF, 0);
    log_owned = true;
    return 0;
}

void srv_log_close(void)
{
    if (log_owned && log_file != NULL) {
        fclose(log_file);
    }
    log_file = NULL;
    log_owned = false;
}

bool srv_log_enabled(enum srv_log_level level)
{
    if (level == SRV_LOG_TRACE) {
        return log_trace;
    }
    return level <= log_level;
}

static const char *level_name(enum srv_log_level level)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
    return names[level];
}

void srv_log(enum srv_log_level level, const char *component, const char *fmt,
             ...)
{
    char line[LOG_LINE_BYTES_MAX];
    struct timespec ts;
    struct tm tm;
    size_t n;
    int w;
    va_list ap;

    if (!srv_log_enabled(level)) {
        return;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    w = snprintf(line + n, sizeof line - n, ".%06ldZ %s [%s] ",
                 ts.tv_nsec / 1000, level_name(level), component);
    if (w > 0) {
        n += (size_t)w;
    }
    va_start(ap, fmt);
    w = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (w > 0) {
        n += (size_t)w < sizeof line - n - 1 ? (size_t)w : sizeof line - n - 2;
    }
    line[n++] = '\n';
    fwrite(line, 1, n, log_file != NULL ? log_file : stderr);
}
