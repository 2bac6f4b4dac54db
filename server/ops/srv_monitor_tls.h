/* HTTPS for the monitoring endpoint (https_port / https: as nats-server
 * spells them): libmicrohttpd serves TLS itself (Debian builds it with
 * GnuTLS), with the certificate and key of the top-level tls { } block.
 */
#ifndef SRV_MONITOR_TLS_H
#define SRV_MONITOR_TLS_H

#include <microhttpd.h>

#include "keel/assert.h"
#include "srv_config.h"

/* Flags and options to add to MHD_start_daemon for cfg: without https
 * *flags is 0 and *opts an empty list (MHD_OPTION_ARRAY takes it either
 * way). With https the PEM files are read (they stay loaded for the
 * process's life: one monitor per keeld). Returns 0, KEEL_ECONFIG
 * (no certificate or key, unreadable file, libmicrohttpd without TLS;
 * errmsg says which) or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_monitor_tls_options(const struct srv_config *cfg,
                                          unsigned *flags,
                                          const struct MHD_OptionItem **opts,
                                          char *errmsg);

#endif
