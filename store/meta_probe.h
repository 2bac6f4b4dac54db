/* Damage detection around meta.lmdb's open (docs/decisions/0015
 * and store/FORMAT.md), used by meta.c.
 */
#ifndef KEEL_STORE_META_PROBE_H
#define KEEL_STORE_META_PROBE_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>

/* Before LMDB opens path (meta.lmdb) here: KEEL_ECORRUPT with reason set
 * when a run-time assertion left its marker (<path>.assert), when a
 * forked child fails the structural check (meta_check.h), or when it dies
 * while read_all reads every value through LMDB (read_all returns 3 when
 * LMDB cannot open the file: the open here decides then). Else 0. */
int store_meta_probe(const char *path, int (*read_all)(const char *),
                     char *reason, size_t cap);

/* mdb_env_set_assert's hook for the writable environment: writes the
 * marker (the assertion text, fsynced with its directory), logs an
 * operator-readable line on stderr and exits with STORE_META_ASSERT_EXIT
 * (meta.h). Never returns. */
void store_meta_assert_hook(MDB_env *env, const char *msg);

/* The marker's text: true when it exists (text, NUL-terminated, in out). */
#define STORE_META_MARKER_BYTES_MAX 256
bool store_meta_marker_read(const char *meta_path, char *out, size_t cap);
/* Move the marker, if any, to <dst>.assert (a quarantined meta.lmdb's
 * name). 0, or KEEL_EIO with errno set. */
int store_meta_marker_move(const char *meta_path, const char *dst);

#endif
