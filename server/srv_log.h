/* Server logging: one line per event, "<UTC time> <LEVEL> [<component>] msg".
 * Only server/ logs; other modules return codes and fill errmsg.
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

/* Close the log file if one was opened. */
void srv_log_close(void);

/* Whether lines of this level are written (lets callers skip formatting). */
bool srv_log_enabled(enum srv_log_level level);

/* Write one line. Safe from any thread: each line is one fwrite. */
__attribute__((format(printf, 3, 4))) void
srv_log(enum srv_log_level level, const char *component, const char *fmt, ...);

#define SRV_ERROR(comp, ...) srv_log(SRV_LOG_ERROR, comp, __VA_ARGS__)
#define SRV_WARN(comp, ...) srv_log(SRV_LOG_WARN, comp, __VA_ARGS__)
#define SRV_INFO(comp, ...) srv_log(SRV_LOG_INFO, comp, __VA_ARGS__)
#define SRV_DEBUG(comp, ...)                                                   \
    do {                                                                       \
        if (srv_log_enabled(SRV_LOG_DEBUG)) {                                  \
            srv_log(SRV_LOG_DEBUG, comp, __VA_ARGS__);                         \
        }                                                                      \
    } while (0)
#define SRV_TRACE(comp, ...)                                                   \
    do {                                                                       \
        if (srv_log_enabled(SRV_LOG_TRACE)) {                                  \
            srv_log(SRV_LOG_TRACE, comp, __VA_ARGS__);                         \
        }                                                                      \
    } while (0)

#endif
