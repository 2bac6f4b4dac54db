/* Assertions for programmer errors. ASSERT stays on in release builds, as in
 * redis and TigerBeetle: a broken invariant in a storage system must stop the
 * process before it writes something wrong. ASSERT_DEBUG is for O(n) checks.
 * Bytes from disk or the network are never asserted; they are validated and
 * rejected with an error code.
 */
#ifndef KEEL_ASSERT_H
#define KEEL_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

__attribute__((noreturn, cold)) static inline void
keel_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "keel: assertion failed: %s (%s:%d)\n", expr, file, line);
    fflush(stderr);
    abort();
}

#define ASSERT(expr)                                                           \
    ((expr) ? (void)0 : keel_assert_fail(#expr, __FILE__, __LINE__))

#ifdef KEEL_DEBUG
#define ASSERT_DEBUG(expr) ASSERT(expr)
#else
#define ASSERT_DEBUG(expr) ((void)0)
#endif

#define KEEL_MUST_USE __attribute__((warn_unused_result))

#endif
