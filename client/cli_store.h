/* keel store: offline commands on a stopped node's data directory. */
#ifndef KEEL_CLI_STORE_H
#define KEEL_CLI_STORE_H

#include "cli.h"

/* keel store dump --data DIR [--stream S] [--group HEX] [--no-payload]:
 * JSON lines (node, then per group its records and recovery report) of
 * the store under DIR, opened read-only (nothing on disk changes). Returns
 * 0 when the dump completed (damage is reported in the output, not in the
 * return code), KEEL_EUSAGE, or the error that stopped it (errmsg says
 * what to do). */
int cli_store(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);

#endif
