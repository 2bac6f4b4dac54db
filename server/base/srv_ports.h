/* The ports file other tools read to find a keeld started with -p 0, and
 * the data-directory lock that keeps two keelds off one directory.
 */
#ifndef SRV_PORTS_H
#define SRV_PORTS_H

#include <limits.h>

#include "keel/assert.h"

/* Write DIR/keeld_<pid>.ports atomically (temp file + rename):
 * {"client":["nats://HOST:PORT"],"monitoring":["http://HOST:PORT"],
 * "cluster":["nats://HOST:PORT"]} (monitoring omitted when http_port < 0,
 * cluster when cluster_port < 0). path_out (PATH_MAX bytes) gets the
 * file's path. Returns 0 or KEEL_EIO with errmsg. */
KEEL_MUST_USE int srv_ports_write(const char *dir, const char *host,
                                  int client_port, int http_port,
                                  int cluster_port, char *path_out,
                                  char *errmsg);

/* Create dir (and parents) if missing and take an exclusive flock on
 * dir/LOCK, writing our pid into it. *fd_out keeps the lock until exit.
 * Returns 0, KEEL_ELOCKED ("data directory DIR is in use by another keeld
 * (pid N)") or KEEL_EIO. */
KEEL_MUST_USE int srv_datadir_lock(const char *dir, int *fd_out, char *errmsg);

#endif
