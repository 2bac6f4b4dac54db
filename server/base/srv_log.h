/* Server logging: one line per event,
 *   "<UTC time> <LEVEL> [<component>] msg" or, for an event of one Raft
 *   group, "<UTC time> <LEVEL> [<component>] group=<name>: msg".
 * Only server/ logs; other modules return codes and fill errmsg. The level
 * comes from --log-level (or -D / -V, or the config file's log_level) and a
 * SIGHUP re-reads the config file's log_level (srv_log_reload).
 */
#ifndef SRV_LOG_H
#define SRV_LOG_H

#include <stdbool.h>

enum srv_log_level {
    SRV_LOG_ERROR = 0,
    SRV_LOG_WARN,
    SRV_LOG_INFO,
    SRV_LOG_DEBUG,
    SRV_LOG_TRACE,
};

/* Open the log: path NULL or "" means stderr. debug enables DEBUG lines and
 * trace enables TRACE (protocol) lines. Returns 0 or KEEL_EIO with errmsg.
 */
int srv_log_open(const char *path, bool debug, bool trace, char *errmsg);

/* Parse "error", "warn", "info", "debug" or "trace" (any case). Returns 0
 * or KEEL_EUSAGE with errmsg listing the accepted names. */
int srv_log_level_parse(const char *s, enum srv_log_level *out, char *errmsg);

/* Set the level (any thread): lines above it are dropped; "trace" enables
 * protocol TRACE lines too. pinned: set from the command line, so a
 * SIGHUP reload keeps it. */
void srv_log_set_level(enum srv_log_level level, bool pinned);

/* The current level. */
enum srv_log_level srv_log_level(void);

/* SIGHUP: read log_level from the config file (path "" or NULL: nothing to
 * read) and apply it unless the command line pinned the level. Returns 0,
 * KEEL_EIO (file unreadable) or KEEL_ECONFIG/KEEL_EUSAGE (bad file or
 * level), with errmsg; the level is unchanged on error. */
int srv_log_reload(const char *config_file, char *errmsg);

/* Close the log file if one was opened. */
void srv_log_close(void);

/* Whether lines of this level are written (lets callers skip formatting). */
bool srv_log_enabled(enum srv_log_level level);

/* Write one line, about Raft group `group` (a stream name, "_meta_") or,
 * with group NULL, about none. Safe from any thread: each line is one
 * fwrite. */
__attribute__((format(printf, 4, 5))) void
srv_log_group(enum srv_log_level level, const char *component,
              const char *group, const char *fmt, ...);

#define srv_log(level, comp, ...) srv_log_group(level, comp, NULL, __VA_ARGS__)

/* Debug and trace lines are formatted only when their level is on. */
#define SRV__LOG_IF(level, comp, group, ...)                                   \
    do {                                                                       \
        if (srv_log_enabled(level)) {                                          \
            srv_log_group(level, comp, group, __VA_ARGS__);                    \
        }                                                                      \
    } while (0)

#define SRV_ERROR(comp, ...) srv_log(SRV_LOG_ERROR, comp, __VA_ARGS__)
#define SRV_WARN(comp, ...) srv_log(SRV_LOG_WARN, comp, __VA_ARGS__)
#define SRV_INFO(comp, ...) srv_log(SRV_LOG_INFO, comp, __VA_ARGS__)
#define SRV_DEBUG(comp, ...) SRV__LOG_IF(SRV_LOG_DEBUG, comp, NULL, __VA_ARGS__)
#define SRV_TRACE(comp, ...) SRV__LOG_IF(SRV_LOG_TRACE, comp, NULL, __VA_ARGS__)

#define SRV_GERROR(comp, group, ...)                                           \
    srv_log_group(SRV_LOG_ERROR, comp, group, __VA_ARGS__)
#define SRV_GWARN(comp, group, ...)                                            \
    srv_log_group(SRV_LOG_WARN, comp, group, __VA_ARGS__)
#define SRV_GINFO(comp, group, ...)                                            \
    srv_log_group(SRV_LOG_INFO, comp, group, __VA_ARGS__)
#define SRV_GDEBUG(comp, group, ...)                                           \
    SRV__LOG_IF(SRV_LOG_DEBUG, comp, group, __VA_ARGS__)

#endif
