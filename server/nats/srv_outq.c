#include "srv_outq.h"

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"

void srv_outpool_init(struct srv_outpool *p)
{
    p->free = NULL;
    p->nfree = 0;
    p->nlive = 0;
}

void srv_outpool_close(struct srv_outpool *p)
{
    ASSERT(p->nlive == 0);
    while (p->free != NULL) {
        struct srv_outblk *b = p->free;
        p->free = b->next;
        free(b);
    }
    p->nfree = 0;
}

static struct srv_outblk *blk_get(struct srv_outpool *p)
{
    struct srv_outblk *b = p->free;

    if (b != NULL) {
        p->free = b->next;
        p->nfree--;
    } else {
        /* Not calloc: the bytes are always written before they are read,
         * and touching 64 KiB here would be the page-fault cost the pool
         * exists to avoid. */
        b = malloc(sizeof *b);
        if (b == NULL) {
            return NULL;
        }
    }
    b->next = NULL;
    b->off = b->len = 0;
    p->nlive++;
    return b;
}

static void blk_put(struct srv_outpool *p, struct srv_outblk *b)
{
    ASSERT(p->nlive > 0);
    p->nlive--;
    if (p->nfree >= SRV_OUT_POOL_BLOCKS_MAX) {
        free(b);
        return;
    }
    b->next = p->free;
    p->free = b;
    p->nfree++;
}

void srv_outq_close(struct srv_outq *q, struct srv_outpool *p)
{
    while (q->head != NULL) {
        struct srv_outblk *b = q->head;
        q->head = b->next;
        blk_put(p, b);
    }
    srv_outq_init(q);
}

char *srv_outq_reserve(struct srv_outq *q, struct srv_outpool *p, size_t n)
{
    struct srv_outblk *b;

    ASSERT(n <= SRV_OUT_BLOCK_BYTES);
    if (q->tail != NULL && SRV_OUT_BLOCK_BYTES - q->tail->len >= n) {
        return q->tail->data + q->tail->len;
    }
    b = blk_get(p);
    if (b == NULL) {
        return NULL;
    }
    if (q->tail == NULL) {
        q->head = b;
    } else {
        q->tail->next = b;
    }
    q->tail = b;
    return b->data;
}

int srv_outq_append(struct srv_outq *q, struct srv_outpool *p, const void *data,
                    size_t len)
{
    const char *s = data;
    struct srv_outblk *old_tail = q->tail;
    size_t old_len = old_tail != NULL ? old_tail->len : 0;
    size_t done = 0;

    while (done < len) {
        size_t room = q->tail != NULL ? SRV_OUT_BLOCK_BYTES - q->tail->len : 0;
        size_t n;
        char *dst;

        if (room == 0) {
            room = SRV_OUT_BLOCK_BYTES;
        }
        n = len - done < room ? len - done : room;
        dst = srv_outq_reserve(q, p, n);
        if (dst == NULL) {
            goto undo;
        }
        memcpy(dst, s + done, n);
        q->tail->len += n;
        done += n;
    }
    q->bytes += len;
    return 0;

undo:
    /* All or nothing, so the queue holds whole messages only. */
    while (old_tail != NULL && old_tail->next != NULL) {
        struct srv_outblk *b = old_tail->next;
        old_tail->next = b->next;
        blk_put(p, b);
    }
    if (old_tail == NULL) {
        srv_outq_close(q, p);
    } else {
        old_tail->len = old_len;
        q->tail = old_tail;
    }
    return KEEL_ENOMEM;
}

unsigned srv_outq_iov(const struct srv_outq *q, uv_buf_t *iov, unsigned max,
                      size_t *total)
{
    size_t skip = q->flight;
    size_t sum = 0;
    unsigned n = 0;

    for (const struct srv_outblk *b = q->head; b != NULL && n < max;
         b = b->next) {
        size_t start = b->off;
        size_t avail = b->len - b->off;

        if (skip >= avail) {
            skip -= avail;
            continue;
        }
        start += skip;
        skip = 0;
        iov[n++] =
            uv_buf_init((char *)b->data + start, (unsigned)(b->len - start));
        sum += b->len - start;
    }
    ASSERT(sum + q->flight <= q->bytes);
    *total = sum;
    return n;
}

void srv_outq_consume(struct srv_outq *q, struct srv_outpool *p, size_t n)
{
    ASSERT(n <= q->bytes);
    q->bytes -= n;
    while (n > 0 || (q->head != NULL && q->head->off == q->head->len)) {
        struct srv_outblk *b = q->head;
        size_t avail;

        ASSERT(b != NULL);
        avail = b->len - b->off;
        if (n < avail) {
            b->off += n;
            return;
        }
        n -= avail;
        q->head = b->next;
        if (q->head == NULL) {
            q->tail = NULL;
        }
        blk_put(p, b);
    }
}

void srv_outq_end_flight(struct srv_outq *q, struct srv_outpool *p)
{
    size_t n = q->flight;

    q->flight = 0;
    srv_outq_consume(q, p, n);
}

void srv_outq_drop_unsent(struct srv_outq *q, struct srv_outpool *p)
{
    size_t keep = q->flight;
    struct srv_outblk *b = q->head;
    struct srv_outblk *last = NULL;

    while (b != NULL && keep > 0) {
        size_t avail = b->len - b->off;
        if (keep <= avail) {
            b->len = b->off + keep;
            keep = 0;
        } else {
            keep -= avail;
        }
        last = b;
        b = b->next;
    }
    ASSERT(keep == 0);
    while (b != NULL) {
        struct srv_outblk *next = b->next;
        blk_put(p, b);
        b = next;
    }
    if (last == NULL) {
        q->head = q->tail = NULL;
    } else {
        last->next = NULL;
        q->tail = last;
    }
    q->bytes = q->flight;
}
