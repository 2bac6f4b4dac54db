/* Storage faults in the driver (docs/design.md §4.7 R1-R4): a group
 * whose store found damaged records or lost ranges opens anyway, tells the
 * core (raft_load_faulty / raft_load_amnesia), writes the verified copies
 * the core hands it (repair), answers FETCH with its own intact records,
 * records amnesia changes in LMDB, and reports damage that reads find while
 * running. The core decides everything else: a damaged node never leads,
 * applies only below its first fault, and an amnesiac one never votes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/assert.h>
#include <keel/error.h>
#include <keel/grow.h>

#include "meta.h"
#include "replica_int.h"

static int load_one(void *arg, const struct store_entry *e)
{
    struct replica *r = arg;
    struct raft_entry re = {
        .term = e->term, .type = e->type, .len = e->len, .buf = e->payload};
    return raft_load_entry(&r->raft, e->index, &re);
}

/* A damaged record still takes its place in the core's log (the core keeps
 * it faulty and never applies or sends it). Its term: the store's when the
 * header was readable, else the predecessor's. Terms never decrease along
 * a log, so that guess is at most the true term; if a leader's copy has
 * another term the core treats it as a conflict (truncation above the
 * commit, re-replicated from the leader), never as a repair. */
static int load_placeholder(struct replica *r, uint64_t index)
{
    uint64_t term = 0;
    if (store_term_at(r->g, index, &term) != 0 || term == 0) {
        term = index > 1 ? raft_term_at(&r->raft, index - 1) : 0;
    }
    struct raft_entry re = {.term = term > 0 ? term : 1,
                            .type = RAFT_ENTRY_NORMAL,
                            .len = 0,
                            .buf = NULL};
    return raft_load_entry(&r->raft, index, &re);
}

int replica__load_log(struct replica *r, uint64_t from,
                      const struct store_recovery *rep, char *errmsg)
{
    uint64_t first_bad = 0;
    uint64_t k = from;
    if (errmsg != NULL) {
        errmsg[0] = '\0'; /* load_one's errors write none (finding F22) */
    }
    while (k <= rep->last_index) {
        int rv = store_iterate(r->g, k, rep->last_index, load_one, r, errmsg);
        if (rv == 0) {
            break;
        }
        uint64_t bad = r->raft.last_index + 1;
        if ((rv != KEEL_EFAULTY && rv != KEEL_ECORRUPT) || bad < k ||
            bad > rep->last_index) {
            if (errmsg != NULL && errmsg[0] == '\0') {
                (void)keel_err(rv, errmsg, "record %llu of the log: %s",
                               (unsigned long long)bad, keel_strerror(rv));
            }
            return rv;
        }
        rv = load_placeholder(r, bad);
        if (rv != 0) {
            return keel_err(rv, errmsg, "damaged record %llu: cannot place it",
                            (unsigned long long)bad);
        }
        first_bad = first_bad != 0 ? first_bad : bad;
        k = bad + 1;
    }
    if (first_bad != 0) {
        r->fault_extent_index = rep->extent_index;
        r->fault_extent_term = rep->extent_term;
        raft_load_faulty(&r->raft, first_bad, rep->extent_index,
                         rep->extent_term);
    }
    return 0;
}

int replica__load_amnesia(struct replica *r, const struct store_recovery *rep,
                          char *errmsg)
{
    if (!rep->amnesia) {
        return 0;
    }
    struct store_meta_amnesia a;
    memset(&a, 0, sizeof a);
    uint64_t target = 0;
    int rv =
        store_meta_amnesia_get(store_debug_meta(r->host->store), r->gid.b, &a);
    if (rv == 0) {
        target = a.target;
    } else if (rv != KEEL_ENOENT) {
        return keel_err(rv, errmsg, "amnesia record of the group unreadable");
    }
    uint64_t t0 = rep->amnesia_t0 > 0 ? rep->amnesia_t0 : 1;
    raft_load_amnesia(&r->raft, t0, target);
    return 0;
}

/* A log that continues no valid snapshot (docs/design.md §5: state is rebuilt
 * only from index 1 or right after a valid snapshot) cannot be loaded; a
 * group with peers is restored by InstallSnapshot instead. Its log goes to
 * quarantine (never deleted) and the next open finds it empty. Safe
 * because the group is recorded amnesiac first (snap_open, or the store's
 * scan for a gap; the store refuses otherwise): it neither votes nor
 * leads until a leader of a term >= T0 caught it up through that
 * leader's last index, and the record outlives a restart in between. Its
 * hard state stays, so it never forgets a vote or lowers its term. */
int replica__quarantine_log(struct replica_host *h,
                            const struct store_group_id *gid,
                            struct store_group *g, char *errmsg)
{
    ASSERT(g != NULL);
    store_group_close(g); /* the refused open left it open */
    return store_group_quarantine_log(h->store, gid, errmsg);
}

void replica__note_quarantined(struct replica *r, const char *why)
{
    struct replica_snap *s = &r->snap;
    ASSERT(r->raft.amnesiac);
    ASSERT(r->raft.last_index == 0);
    s->log_quarantined = true;
    snprintf(s->load, sizeof s->load,
             "log moved to quarantine/, opened empty and amnesiac until "
             "InstallSnapshot from the leader restores it (%s)",
             why);
}

void replica__repair_drop(struct replica *r)
{
    ASSERT(r->rb.n <= r->rb.cap);
    for (uint32_t i = 0; i < r->rb.n; i++) {
        free((void *)r->rb.v[i].payload);
    }
    free(r->rb.v);
    r->rb = (struct replica_rbuf){0};
}

/* Keep one copy (its payload copied: it points into the step's input). */
static int repair_hold(struct replica *r, const struct raft_repair *rp)
{
    size_t bytes = rp->entry.len + sizeof(struct store_record);
    if (r->rb.bytes + bytes > STORE_REPAIR_BYTES_MAX ||
        r->rb.n >= STORE_REPAIR_RECORDS_MAX) {
        return KEEL_ELIMIT;
    }
    if (keel_grow_u32(&r->rb.v, &r->rb.cap, r->rb.n, sizeof *r->rb.v, 64) !=
        0) {
        return KEEL_ENOMEM;
    }
    void *pl = NULL;
    if (rp->entry.len > 0) {
        pl = malloc(rp->entry.len);
        if (pl == NULL) {
            return KEEL_ENOMEM;
        }
        memcpy(pl, rp->entry.buf, rp->entry.len);
    }
    r->rb.v[r->rb.n++] = (struct store_record){.index = rp->index,
                                               .term = rp->entry.term,
                                               .type = rp->entry.type,
                                               .flags = 0,
                                               .len = rp->entry.len,
                                               .payload = pl};
    r->rb.bytes += bytes;
    return 0;
}

/* One leader copy (the core hands them in index order from its first
 * fault). The store verifies a damaged run only whole, against the intact
 * record after it (finding F12: handing it one record of a 5,377-record
 * run at a time was refused for ever), so the copies of the run are
 * collected and handed over together once the last one arrived. */
static void repair_collect(struct replica *r, const struct raft_repair *rp)
{
    char err[KEEL_ERRMSG_MAX];
    uint64_t last = 0;
    if (store_faulty_run(r->g, rp->index, &last) == 0 &&
        (r->rb.n == 0 || rp->index != r->rb.first + r->rb.n)) {
        /* A run starts at this copy: the core starts each at its fault. */
        struct store_group_info gi;
        store_group_info(r->g, &gi);
        replica__repair_drop(r);
        if (rp->index != gi.first_faulty) {
            return;
        }
        r->rb.first = rp->index;
        r->rb.last = last;
    } else if (r->rb.n == 0 || rp->index != r->rb.first + r->rb.n ||
               rp->index > r->rb.last) {
        return; /* an intact record after the run, or out of order */
    }
    if (repair_hold(r, rp) != 0) {
        /* Too large to verify in memory: it stays faulty (apply stops
         * before it); /healthz and the refused count say so. */
        replica__repair_drop(r);
        r->repairs_refused++;
        return;
    }
    if (rp->index < r->rb.last) {
        return;
    }
    if (store_repair(r->g, r->rb.v, r->rb.n, err) == 0) {
        r->repairs_queued += r->rb.n;
    } else {
        r->repairs_refused += r->rb.n;
        r->repair_restart = true; /* ask for the run again */
    }
    replica__repair_drop(r);
}

/* Before any message of this step goes out: amnesia changes are durable
 * (rule 3), and verified runs are queued for an in-place write. A run
 * that does not verify is dropped: its records stay faulty. */
int replica__fault_out(struct replica *r, const struct raft_out *o,
                       char *errmsg)
{
    int rv = 0;
    if (o->amnesia_changed) {
        rv = o->amnesiac ? store_amnesia_enter(r->g, o->amnesia_t0,
                                               o->amnesia_target, errmsg)
                         : store_amnesia_clear(r->g, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    ASSERT(o->n_repairs <= RAFT_OUT_REPAIRS_MAX);
    for (uint32_t i = 0; i < o->n_repairs; i++) {
        repair_collect(r, &o->repairs[i]);
    }
    return 0;
}

/* Tell the core where the first fault is now (0: intact again). */
void replica__fault_report(struct replica *r)
{
    struct store_group_info gi;
    store_group_info(r->g, &gi);
    bool restart = r->repair_restart;
    r->repair_restart = false;
    if ((gi.first_faulty == r->raft.faulty && !restart) ||
        (gi.first_faulty != 0 && gi.first_faulty <= r->raft.snap_index)) {
        return;
    }
    if (gi.first_faulty != 0 && r->fault_extent_index < gi.last_index) {
        r->fault_extent_index = gi.last_index;
        r->fault_extent_term = gi.last_term;
    }
    struct raft_in in = {.type = RAFT_IN_FAULTY};
    in.faulty.index = gi.first_faulty;
    in.faulty.extent_index = r->fault_extent_index;
    in.faulty.extent_term = r->fault_extent_term;
    (void)replica__step(r, &in);
}

/* A FETCH answer the core marked HAS carries the record itself, read (and
 * verified) from the store; a record that fails verification now is
 * answered FAULTY and reported to the core after this step. */
void replica__fill_fetch(struct replica *r, const struct raft_msg *m,
                         void (*send)(struct replica *,
                                      const struct raft_msg *))
{
    const struct raft_msg_discard_resp *a = &m->discard_resp;
    struct store_entry se;
    char err[KEEL_ERRMSG_MAX];
    struct raft_msg copy = *m;
    ASSERT(m->type == RAFT_MSG_FETCH_RESP);
    if (a->status != RAFT_DISCARD_HAS || a->entry != NULL) {
        send(r, m);
        return;
    }
    int rv = store_read(r->g, a->index, &se, err);
    if (rv == KEEL_EFAULTY || rv == KEEL_ECORRUPT) {
        copy.discard_resp.status = RAFT_DISCARD_FAULTY;
        copy.discard_resp.term = 0;
        r->fault_check = true;
        send(r, &copy);
        return;
    }
    if (rv != 0) {
        send(r, m); /* below the retained log: HAS without a copy */
        return;
    }
    struct raft_entry e = {
        .term = se.term, .type = se.type, .len = se.len, .buf = se.payload};
    copy.discard_resp.entry = &e;
    send(r, &copy);
    store_entry_free(&se);
}
