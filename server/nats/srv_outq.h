/* srv_outq: a connection's outbound byte queue, built from fixed-size
 * blocks shared through a per-server pool.
 *
 * Why blocks and not one growing buffer: a growing buffer is copied on
 * every doubling and, once freed after a burst, faults its pages in again
 * on the next one; with 16-byte messages that copying and faulting was
 * the largest cost of a 1 -> 1 fan-out. Blocks are written in place,
 * handed to the kernel as an iovec, and go back to the pool.
 *
 * The queue is one FIFO byte stream. Its first `flight` bytes belong to
 * an in-flight write (the kernel reads them until the write completes);
 * new bytes only ever go to the tail, so appending never disturbs them.
 * Callers append whole protocol messages between flushes, so the end of
 * the in-flight prefix is always a message boundary. Not thread-safe: the
 * loop thread owns every queue and the pool.
 */
#ifndef SRV_OUTQ_H
#define SRV_OUTQ_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "keel/assert.h"
#include "keel/limits.h"

struct srv_outblk {
    struct srv_outblk *next;
    size_t off; /* bytes already written to the socket */
    size_t len; /* bytes filled */
    char data[SRV_OUT_BLOCK_BYTES];
};

/* Free blocks kept for reuse, at most SRV_OUT_POOL_BLOCKS_MAX. */
struct srv_outpool {
    struct srv_outblk *free;
    size_t nfree;
    size_t nlive; /* blocks handed out and not yet returned */
};

struct srv_outq {
    struct srv_outblk *head, *tail;
    size_t bytes;  /* unwritten bytes, the in-flight prefix included */
    size_t flight; /* leading bytes owned by an in-flight write */
};

void srv_outpool_init(struct srv_outpool *p);
/* Free the pooled blocks. Every queue must have been closed first. */
void srv_outpool_close(struct srv_outpool *p);

static inline void srv_outq_init(struct srv_outq *q)
{
    q->head = q->tail = NULL;
    q->bytes = q->flight = 0;
}

/* Return every block to the pool (the connection is gone). */
void srv_outq_close(struct srv_outq *q, struct srv_outpool *p);

/* Contiguous room for n bytes at the tail (n <= SRV_OUT_BLOCK_BYTES),
 * taking a block from the pool when the tail is full. Commit what was
 * written with srv_outq_commit. NULL when out of memory. */
KEEL_MUST_USE char *srv_outq_reserve(struct srv_outq *q, struct srv_outpool *p,
                                     size_t n);
static inline void srv_outq_commit(struct srv_outq *q, size_t n)
{
    ASSERT(q->tail != NULL && q->tail->len + n <= SRV_OUT_BLOCK_BYTES);
    q->tail->len += n;
    q->bytes += n;
}

/* Append len bytes of any size, spanning blocks. Returns 0 or
 * KEEL_ENOMEM (nothing appended then). */
KEEL_MUST_USE int srv_outq_append(struct srv_outq *q, struct srv_outpool *p,
                                  const void *data, size_t len);

/* Fill at most max iovecs with the unwritten bytes past the in-flight
 * prefix, in order. Returns the count; *total gets their byte sum. */
unsigned srv_outq_iov(const struct srv_outq *q, uv_buf_t *iov, unsigned max,
                      size_t *total);

/* n bytes from the front were written (n <= bytes); fully written blocks
 * go back to the pool, except a tail, which is kept and rewound. */
void srv_outq_consume(struct srv_outq *q, struct srv_outpool *p, size_t n);

/* The next n unwritten bytes are now owned by an in-flight write. */
static inline void srv_outq_start_flight(struct srv_outq *q, size_t n)
{
    ASSERT(q->flight == 0 && n <= q->bytes);
    q->flight = n;
}

/* The in-flight write finished: consume its bytes. */
void srv_outq_end_flight(struct srv_outq *q, struct srv_outpool *p);

/* Drop every unwritten byte that is not in flight (a slow consumer is cut
 * off: only whole messages go, so the stream stays well-formed). */
void srv_outq_drop_unsent(struct srv_outq *q, struct srv_outpool *p);

#endif
