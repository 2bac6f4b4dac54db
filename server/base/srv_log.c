#include "srv_log.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_confparse.h"

#define LOG_LINE_BYTES_MAX 4096

static FILE *log_file;
static bool log_owned;
/* Read by every thread that logs, written by main and the SIGHUP handler:
 * accessed with __atomic builtins. */
static int log_level = SRV_LOG_INFO;
static bool log_trace;
static bool log_pinned;

static const char *const level_names[] = {"error", "warn", "info", "debug",
                                          "trace"};

int srv_log_open(const char *path, bool debug, bool trace, char *errmsg)
{
    srv_log_set_level(debug ? SRV_LOG_DEBUG : SRV_LOG_INFO, false);
    __atomic_store_n(&log_trace, trace, __ATOMIC_RELAXED);
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

int srv_log_level_parse(const char *s, enum srv_log_level *out, char *errmsg)
{
    for (int i = SRV_LOG_ERROR; i <= SRV_LOG_TRACE; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (enum srv_log_level)i;
            return 0;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *out = SRV_LOG_WARN;
        return 0;
    }
    return keel_err(KEEL_EUSAGE, errmsg,
                    "unknown log level '%s': use error, warn, info, debug or "
                    "trace",
                    s);
}

void srv_log_set_level(enum srv_log_level level, bool pinned)
{
    __atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
    __atomic_store_n(&log_trace, level == SRV_LOG_TRACE, __ATOMIC_RELAXED);
    if (pinned) {
        log_pinned = true;
    }
}

enum srv_log_level srv_log_level(void)
{
    return (enum srv_log_level)__atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

/* The log_level key of a config file, or "" when it has none. */
static int file_level(const char *path, char *level, size_t len, char *errmsg)
{
    char *text = NULL;
    size_t n = 0;
    json_t *root = NULL;
    int rv = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return keel_err(KEEL_EIO, errmsg, "cannot read config file %s: %s",
                        path, strerror(errno));
    }
    text = malloc(SRV_CONFIG_BYTES_MAX + 1);
    if (text == NULL) {
        rv = KEEL_ENOMEM;
        goto out;
    }
    n = fread(text, 1, SRV_CONFIG_BYTES_MAX + 1, f);
    rv = srv_confparse(text, n, &root, errmsg);
    if (rv == 0) {
        const char *v = json_string_value(json_object_get(root, "log_level"));
        snprintf(level, len, "%s", v != NULL ? v : "");
    }
out:
    json_decref(root);
    free(text);
    fclose(f);
    return rv;
}

int srv_log_reload(const char *config_file, char *errmsg)
{
    char name[32] = "";
    enum srv_log_level level = SRV_LOG_INFO;
    if (log_pinned || config_file == NULL || config_file[0] == '\0') {
        return 0;
    }
    int rv = file_level(config_file, name, sizeof name, errmsg);
    if (rv != 0 || name[0] == '\0') {
        return rv;
    }
    rv = srv_log_level_parse(name, &level, errmsg);
    if (rv == 0) {
        srv_log_set_level(level, false);
    }
    return rv;
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
        return __atomic_load_n(&log_trace, __ATOMIC_RELAXED);
    }
    return (int)level <= __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

static const char *level_name(enum srv_log_level level)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
    return names[level];
}

static void vlog(enum srv_log_level level, const char *component,
                 const char *group, const char *fmt, va_list ap)
{
    char line[LOG_LINE_BYTES_MAX];
    struct timespec ts;
    struct tm tm;
    size_t n;
    int w;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    if (group != NULL) {
        w = snprintf(line + n, sizeof line - n,
                     ".%06ldZ %s [%s] group=%.256s: ", ts.tv_nsec / 1000,
                     level_name(level), component, group);
    } else {
        w = snprintf(line + n, sizeof line - n, ".%06ldZ %s [%s] ",
                     ts.tv_nsec / 1000, level_name(level), component);
    }
    if (w > 0) {
        n += (size_t)w;
    }
    w = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    if (w > 0) {
        n += (size_t)w < sizeof line - n - 1 ? (size_t)w : sizeof line - n - 2;
    }
    line[n++] = '\n';
    fwrite(line, 1, n, log_file != NULL ? log_file : stderr);
}

void srv_log_group(enum srv_log_level level, const char *component,
                   const char *group, const char *fmt, ...)
{
    va_list ap;
    if (!srv_log_enabled(level)) {
        return;
    }
    va_start(ap, fmt);
    vlog(level, component, group, fmt, ap);
    va_end(ap);
}
