/* Range reads: consecutive records of one segment fetched with one pread,
 * each still checksum-verified (rule 5) before it is handed out. Applying
 * committed entries reads them back one after another; one pread per
 * record made that syscall the largest cost of a publish on the loop
 * thread.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Does any pending or in-flight write op cover bytes [off, off + len) of
 * seg? Those bytes may not be on disk yet. Caller holds s->mu. */
static bool ops_overlap(const struct store_group *g, const struct seg *seg,
                        uint64_t off, uint64_t len)
{
    ASSERT(g != NULL);
    ASSERT(len > 0);
    for (int pass = 0; pass < 2; pass++) {
        const struct op *op = pass == 0 ? g->ops_head : g->inflight;
        for (; op != NULL; op = op->next) {
            if ((op->kind == OP_WRITE || op->kind == OP_REPAIR ||
                 op->kind == OP_ZERO) &&
                op->seg == seg && op->off < off + len &&
                off < op->off + op->len) {
                return true;
            }
        }
    }
    return false;
}

/* The run of records from index on that lie back to back in one segment,
 * intact, at most STORE_READ_RANGE_BYTES together: returns its count
 * (0 when index itself cannot go into a run) and its byte length. */
static uint64_t run_of(struct store_group *g, uint64_t index, uint64_t to,
                       uint64_t *bytes)
{
    struct ient *first = store__ent(g, index);
    uint64_t n = 0;
    uint64_t len = 0;

    ASSERT(index <= to);
    ASSERT(bytes != NULL);
    if (first->faulty || first->off == 0) {
        *bytes = 0;
        return 0;
    }
    for (uint64_t i = index; i <= to; i++) {
        const struct ient *e = store__ent(g, i);
        if (e->faulty || e->seg != first->seg || e->off != first->off + len ||
            len + e->bytes > STORE_READ_RANGE_BYTES) {
            break;
        }
        len += e->bytes;
        n++;
    }
    *bytes = len;
    return n;
}

/* Verify and hand out n records read into buf (index first on). */
static int deliver_run(struct store_group *g, uint64_t first, uint64_t n,
                       const uint8_t *buf, store_iter_cb cb, void *arg,
                       char *errmsg)
{
    uint64_t pos = 0;

    ASSERT(buf != NULL);
    ASSERT(n > 0);
    for (uint64_t i = first; i < first + n; i++) {
        struct ient *e = store__ent(g, i);
        struct store_fmt_rec r;
        if (store_fmt_rec_decode(buf + pos, e->bytes, e->seg->salt, &r) != 0 ||
            r.index != i || r.term != e->term || r.checksum != e->checksum) {
            /* Rule 5: never serve it, never truncate: it becomes faulty
             * and waits for repair. */
            e->faulty = 1;
            return keel_err(KEEL_ECORRUPT, errmsg,
                            "index %llu failed its checksum; marked faulty",
                            (unsigned long long)i);
        }
        struct store_entry out = {i,       r.term, r.type,
                                  r.flags, r.len,  (uint8_t *)r.payload};
        /* e is not used past cb: a callback may change the table. */
        pos += e->bytes;
        int rv = cb(arg, &out);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

/* One entry through store_read (the path for records still in ops,
 * faulty or of unknown position). */
static int read_one(struct store_group *g, uint64_t index, store_iter_cb cb,
                    void *arg, char *errmsg)
{
    struct store_entry e;

    ASSERT(g != NULL && cb != NULL);
    int rv = store_read(g, index, &e, errmsg);
    if (rv == 0) {
        rv = cb(arg, &e);
        store_entry_free(&e);
    }
    return rv;
}

int store_read_range(struct store_group *g, uint64_t from, uint64_t to,
                     store_iter_cb cb, void *arg, char *errmsg)
{
    struct store *s = g->s;
    uint8_t *buf = NULL;
    int rv = 0;

    ASSERT(cb != NULL);
    ASSERT(from <= to);
    if (g->nents == 0 || from < g->first_index || to > store__last_index(g)) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "indexes %llu..%llu not in the log",
                        (unsigned long long)from, (unsigned long long)to);
    }
    for (uint64_t i = from; i <= to && rv == 0;) {
        uint64_t bytes = 0;
        uint64_t n = run_of(g, i, to, &bytes);
        struct fs_file *f = NULL;
        bool pending = true;
        if (n > 1) {
            struct ient *e = store__ent(g, i);
            pthread_mutex_lock(&s->mu);
            pending = ops_overlap(g, e->seg, e->off, bytes);
            f = e->seg->f;
            pthread_mutex_unlock(&s->mu);
        }
        if (n <= 1 || pending || f == NULL) {
            rv = read_one(g, i, cb, arg, errmsg);
            i++;
            continue;
        }
        if (buf == NULL) {
            buf = malloc(STORE_READ_RANGE_BYTES);
            if (buf == NULL) {
                rv = keel_err(KEEL_ENOMEM, errmsg, "out of memory");
                break;
            }
        }
        size_t got = 0;
        rv = s->fs->pread(s->fs, f, buf, (size_t)bytes, store__ent(g, i)->off,
                          &got, errmsg);
        if (rv == 0 && got != bytes) {
            rv = keel_err(KEEL_ECORRUPT, errmsg, "records cut short");
        }
        if (rv == 0) {
            rv = deliver_run(g, i, n, buf, cb, arg, errmsg);
        }
        i += n;
    }
    free(buf);
    return rv;
}

static int scrub_count_cb(void *arg, const struct store_entry *e)
{
    uint64_t *n = arg;
    ASSERT(e != NULL);
    (*n)++;
    return 0;
}

/* The last index of a scrub run from `from`: intact records, persisted,
 * at most max_bytes together (at least one); *bytes their size. */
static uint64_t scrub_run_end(struct store_group *g, uint64_t from,
                              uint64_t upto, uint64_t max_bytes,
                              uint64_t *bytes)
{
    uint64_t to = from;
    uint64_t acc = store__ent(g, from)->bytes;

    ASSERT(from <= upto);
    ASSERT(!store__ent(g, from)->faulty);
    while (to < upto) {
        const struct ient *e = store__ent(g, to + 1);
        if (e->faulty || acc + e->bytes > max_bytes) {
            break;
        }
        acc += e->bytes;
        to++;
    }
    *bytes = acc;
    return to;
}

int store_scrub(struct store_group *g, uint64_t from, uint64_t max_bytes,
                uint64_t *next, uint64_t *bytes, char *errmsg)
{
    uint64_t upto;
    uint64_t verified = 0;

    ASSERT(next != NULL && bytes != NULL);
    ASSERT(max_bytes > 0);
    *bytes = 0;
    pthread_mutex_lock(&g->s->mu);
    upto = g->persisted_index;
    pthread_mutex_unlock(&g->s->mu);
    upto = g->nents == 0 ? 0 : upto;
    upto = upto > store__last_index(g) ? store__last_index(g) : upto;
    from = from < g->first_index ? g->first_index : from;
    while (from <= upto && store__ent(g, from)->faulty) {
        from++; /* already known: the repair path has it */
    }
    *next = from;
    if (from > upto || g->nents == 0) {
        return 0;
    }
    uint64_t to = scrub_run_end(g, from, upto, max_bytes, bytes);
    int rv = store_read_range(g, from, to, scrub_count_cb, &verified, errmsg);
    ASSERT(verified <= to - from + 1);
    *next = rv == 0 ? to + 1 : from + verified + 1;
    if (rv == KEEL_ECORRUPT && !store__ent(g, from + verified)->faulty) {
        store__ent(g, from + verified)->faulty = 1; /* cut short: unread */
    }
    return rv;
}
