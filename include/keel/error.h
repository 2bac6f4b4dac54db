/* Error codes shared by every module.
 *
 * Functions return 0 or a negative KEEL_E* code; details go into the caller's
 * errmsg buffer. One X-macro table gives each code its name and a message
 * that says what went wrong in operator terms. Add new codes at the end of
 * the group they belong to; never renumber (codes appear in logs).
 */
#ifndef KEEL_ERROR_H
#define KEEL_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#define KEEL_ERRMSG_MAX 256

/* X(name, value, message) */
#define KEEL_ERRORS(X)                                                         \
    X(KEEL_ENOMEM, -1, "out of memory")                                        \
    X(KEEL_EINVAL, -2, "invalid argument")                                     \
    X(KEEL_EIO, -3, "I/O error")                                               \
    X(KEEL_ECORRUPT, -4, "data failed its checksum or format check")           \
    X(KEEL_ENOENT, -5, "not found")                                            \
    X(KEEL_EEXIST, -6, "already exists")                                       \
    X(KEEL_ENOSPC, -7, "no space left on device")                              \
    X(KEEL_EBUSY, -8, "resource busy")                                         \
    X(KEEL_ELIMIT, -9, "limit exceeded")                                       \
    X(KEEL_EPROTO, -10, "protocol error")                                      \
    X(KEEL_ESHUTDOWN, -11, "shutting down")                                    \
    X(KEEL_EAGAIN, -12, "try again")                                           \
    X(KEEL_ETOOBIG, -13, "too big")                                            \
    X(KEEL_EVERSION, -14, "unsupported format version")                        \
    X(KEEL_ELOCKED, -15, "data directory is in use by another process")        \
    X(KEEL_ENOTLEADER, -16, "not the leader")                                  \
    X(KEEL_ESTALE, -17, "stale term or index")                                 \
    X(KEEL_EFAULTY, -18, "record is faulty and awaits repair")                 \
    X(KEEL_EAMNESIA, -19, "node is amnesiac and awaits catch-up")              \
    X(KEEL_ECONFIG, -20, "invalid configuration")                              \
    X(KEEL_ECANCELED, -21, "operation canceled")                               \
    X(KEEL_ETIMEOUT, -22, "timed out")                                         \
    X(KEEL_ECONN, -23, "connection failed")                                    \
    X(KEEL_EAUTH, -24, "authentication failed")                                \
    X(KEEL_EPERM, -25, "permission denied")                                    \
    X(KEEL_EUSAGE, -26, "usage error")                                         \
    X(KEEL_ETRUNCATED, -27, "input is truncated")                              \
    X(KEEL_ECONFLICT, -28, "conflicting entry")                                \
    X(KEEL_ELOST, -29, "range is lost")

enum keel_error {
#define KEEL_ERROR_ENUM(name, value, msg) name = (value),
    KEEL_ERRORS(KEEL_ERROR_ENUM)
#undef KEEL_ERROR_ENUM
};

/* A code's name and message, from one switch over the KEEL_ERRORS table
 * (returned by value, so the compiler still sees each text's length where
 * a caller formats it). */
struct keel_error_text {
    const char *name;
    const char *msg;
};

static inline struct keel_error_text keel__error_text(int rv)
{
    switch (rv) {
    case 0:
        return (struct keel_error_text){"OK", "ok"};
#define KEEL_ERROR_TEXT(name, value, msg)                                      \
    case (value):                                                              \
        return (struct keel_error_text){#name, msg};
        KEEL_ERRORS(KEEL_ERROR_TEXT)
#undef KEEL_ERROR_TEXT
    default:
        return (struct keel_error_text){"KEEL_E?", "unknown error"};
    }
}

/* Name of a code ("KEEL_ECORRUPT"), or "KEEL_E?" for an unknown one. */
static inline const char *keel_errname(int rv)
{
    return keel__error_text(rv).name;
}

/* Human message of a code, or "unknown error". */
static inline const char *keel_strerror(int rv)
{
    return keel__error_text(rv).msg;
}

/* Fill errmsg (if not NULL, KEEL_ERRMSG_MAX bytes) and return rv, so error
 * paths read `return keel_err(KEEL_ECORRUPT, errmsg, "bad header in %s", p);`.
 */
__attribute__((format(printf, 3, 4))) static inline int
keel_err(int rv, char *errmsg, const char *fmt, ...)
{
    if (errmsg != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errmsg, KEEL_ERRMSG_MAX, fmt, ap);
        va_end(ap);
    }
    return rv;
}

#endif
