/* Every loop, queue and batch in Keel has a named maximum here. Each module
 * owns its section; relations between limits are checked at compile time.
 */
#ifndef KEEL_LIMITS_H
#define KEEL_LIMITS_H

/* ---- server: NATS protocol and connections ---- */
#define SRV_CONTROL_LINE_BYTES_MAX 4096
#define SRV_PAYLOAD_BYTES_DEFAULT (1024 * 1024)
#define SRV_PAYLOAD_BYTES_MAX (8 * 1024 * 1024)
#define SRV_CONN_WRITE_BYTES_MAX (64 * 1024 * 1024)
#define SRV_CONNS_MAX 65536
#define SRV_SUBS_PER_CONN_MAX 65536
#define SRV_SUBJECT_TOKENS_MAX 64
#define SRV_PING_INTERVAL_MS_DEFAULT (2 * 60 * 1000)
#define SRV_PINGS_OUTSTANDING_MAX 2

_Static_assert(SRV_PAYLOAD_BYTES_DEFAULT <= SRV_PAYLOAD_BYTES_MAX,
               "default payload must fit the hard maximum");
_Static_assert(SRV_PAYLOAD_BYTES_MAX < SRV_CONN_WRITE_BYTES_MAX,
               "one maximal message must fit a connection's write queue");

/* ---- store ---- */

/* ---- raft ---- */

/* ---- snapshot ---- */

/* ---- client (keel CLI) ---- */

#endif
