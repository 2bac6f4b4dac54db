/* The checker of keel-faults (docs/faults.md "How a run is checked"):
 * every node's data directory is dumped with `keel store dump` after a
 * clean stop, and compared with the acked attempts and the final read.
 *   lost         acked, not served, and not explained by damage the node
 *                flags itself (R1 media faults: F_EXPECT_FLAGGED)
 *   unavailable  acked, not served, the node flags damage (R1 only)
 *   on-disk      acked values whose bytes are nowhere in the node's data
 *                directory, quarantine included (deleted data)
 *   divergent    a value on some nodes only, a different value at one
 *                index across nodes, or (one node) the server serving what
 *                its disk lacks / its intact disk holding what it does not
 *                serve; a peer that was down at the end is held only to
 *                agreeing with the others up to the last entry it shares
 *                with them (lag and an uncommitted tail are legal)
 *   misplaced    an acked sequence holding another value
 *   failed       an attempt answered with a JetStream error ("not
 *   stored       stored") whose value the final read serves
 *   dump failed  a node whose `keel store dump` failed: nothing it holds
 *                excuses an unserved acked value, and the run fails
 *   consumer     acked and served, yet never delivered to the durable
 *   missing      consumer (which reads from sequence 1 while the nemesis
 *                runs, and is drained after healing)
 */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "faults.h"

#define F_LINE_BYTES (1024 * 1024)

void f_view_free(struct f_view *v)
{
    free(v->slot_at);
    memset(v, 0, sizeof *v);
}

static int view_set(struct f_view *v, uint64_t pos, uint32_t slot)
{
    if (v->slot_at == NULL) {
        v->slot_at = calloc(F_SEQS_MAX + 1024, sizeof *v->slot_at);
    }
    if (v->slot_at == NULL || pos >= F_SEQS_MAX + 1024) {
        return -1;
    }
    v->slot_at[pos] = slot;
    v->n = pos + 1 > v->n ? pos + 1 : v->n;
    return 0;
}

static void dump_line(struct f_view *v, json_t *o)
{
    const char *kind = json_string_value(json_object_get(o, "kind"));
    if (kind != NULL && strcmp(kind, "report") == 0) {
        json_t *flags = json_object_get(o, "flags");
        size_t i;
        json_t *f;
        json_t *rg;
        const char *lists[] = {"faulty", "lost"};
        for (int l = 0; l < 2; l++) {
            json_array_foreach(json_object_get(o, lists[l]), i, rg)
            {
                uint64_t from =
                    (uint64_t)json_integer_value(json_array_get(rg, 0));
                if (v->first_damage == 0 || from < v->first_damage) {
                    v->first_damage = from;
                }
            }
        }
        v->first_index =
            (uint64_t)json_integer_value(json_object_get(o, "first_index"));
        if (json_is_true(json_object_get(o, "amnesia")) &&
            v->first_damage == 0) {
            v->first_damage = 1; /* amnesia without a range: assume all */
        }
        json_array_foreach(flags, i, f)
        {
            const char *s = json_string_value(f);
            if (s != NULL && strcmp(s, "TORN_TAIL") != 0) {
                v->flagged = true; /* a torn tail alone is never acked */
            }
            if (s != NULL &&
                strlen(v->flags) + strlen(s) + 2 < sizeof v->flags) {
                strcat(v->flags, v->flags[0] != '\0' ? "," : "");
                strcat(v->flags, s);
            }
        }
        return;
    }
    if (kind == NULL || strcmp(kind, "record") != 0) {
        return;
    }
    const char *sum = json_string_value(json_object_get(o, "checksum"));
    const char *entry = json_string_value(json_object_get(o, "entry"));
    const char *payload = json_string_value(json_object_get(o, "payload"));
    uint64_t index = (uint64_t)json_integer_value(json_object_get(o, "index"));
    if (sum != NULL && strcmp(sum, "bad") == 0) {
        v->bad++;
    } else if (entry != NULL && strcmp(entry, "publish") == 0) {
        uint32_t slot =
            payload != NULL ? f_slot_of(payload, (int)strlen(payload)) : 0;
        v->alien += slot == 0;
        (void)view_set(v, index, slot);
    }
}

int f_dump_node(struct f_run_ctx *c, int node, struct f_view *v)
{
    char cmd[1024];
    char *line = malloc(F_LINE_BYTES);
    snprintf(cmd, sizeof cmd, "'%s' store dump --data '%s' --stream %s",
             c->cfg.keel, f_k(c, node)->data_dir, F_STREAM);
    FILE *p = line != NULL ? popen(cmd, "r") : NULL;
    if (p == NULL) {
        free(line);
        return -1;
    }
    (void)view_set(v, 0, 0);
    while (fgets(line, F_LINE_BYTES, p) != NULL) {
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        if (o != NULL) {
            dump_line(v, o);
            json_decref(o);
        }
    }
    int st = pclose(p);
    free(line);
    if (st != 0) {
        /* The dump itself failed (keeld lost the stream from its meta
         * state, say): nothing is known of the node, so nothing it holds
         * excuses an acked value the read does not serve (explained()),
         * and the run fails. flagged keeps the divergence checks from
         * reading its empty view as a node lacking every value. */
        v->dump_failed = true;
        v->flagged = true;
        v->first_damage = 1;
        snprintf(v->flags, sizeof v->flags, "DUMP_FAILED(%d)", st);
    }
    return 0;
}

/* Mark every p<k>-<6 digits> token in the bytes (values are fixed width,
 * so a token is never a prefix of another). */
static void scan_tokens(const uint8_t *b, size_t n, uint8_t *seen)
{
    for (size_t i = 0; i + 9 <= n; i++) {
        if (b[i] != 'p' || b[i + 2] != '-' || b[i + 1] < '0' ||
            b[i + 1] > '7') {
            continue;
        }
        unsigned v = 0;
        size_t j = i + 3;
        for (; j < i + 9 && b[j] >= '0' && b[j] <= '9'; j++) {
            v = v * 10 + (unsigned)(b[j] - '0');
        }
        if (j == i + 9 && v < F_PER_PUB_MAX) {
            seen[(unsigned)(b[i + 1] - '0') * F_PER_PUB_MAX + v] = 1;
        }
    }
}

static void scan_dir(const char *dir, uint8_t *seen, int depth)
{
    DIR *d = depth < 8 ? opendir(dir) : NULL;
    struct dirent *e;
    static uint8_t buf[1 << 20];
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[1024];
        struct stat st;
        if (e->d_name[0] == '.') {
            continue;
        }
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >=
                (int)sizeof path ||
            stat(path, &st) != 0) {
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            scan_dir(path, seen, depth + 1);
            continue;
        }
        FILE *f = fopen(path, "rb");
        size_t got;
        size_t keep = 0;
        while (f != NULL &&
               (got = fread(buf + keep, 1, sizeof buf - keep, f)) > 0) {
            size_t total = keep + got;
            scan_tokens(buf, total, seen);
            /* Keep 8 bytes: a 9-byte token across two reads is found. */
            keep = total >= 8 ? 8 : total;
            memmove(buf, buf + total - keep, keep);
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
}

uint8_t *f_disk_snapshot(struct f_run_ctx *c, int node)
{
    uint8_t *seen = calloc(F_SEQS_MAX, 1);
    if (seen != NULL) {
        scan_dir(f_k(c, node)->data_dir, seen, 0);
    }
    return seen;
}

/* Only what this injury took: on disk before it (after the kill), gone
 * after it. A value already missing before the injury was deleted by the
 * server and stays unexplained. */
void f_note_destroyed(struct f_run_ctx *c, int node, const uint8_t *before)
{
    uint8_t *after = f_disk_snapshot(c, node);
    if (after == NULL || before == NULL) {
        free(after);
        return;
    }
    pthread_mutex_lock(&c->mu);
    for (uint32_t s = 0; s < F_SEQS_MAX; s++) {
        if (c->att[s].outcome == F_ACKED && before[s] && !after[s]) {
            c->destroyed[s] = 1;
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(after);
}

static uint8_t *disk_tokens(struct f_run_ctx *c)
{
    uint8_t *seen = calloc(F_SEQS_MAX, 1);
    for (int i = 0; seen != NULL && c->cfg.urls == NULL && i < c->cfg.nodes;
         i++) {
        scan_dir(f_k(c, i)->data_dir, seen, 0);
    }
    return seen;
}

/* Reverse of a view: slot -> first position + 1, and duplicates. */
static uint64_t *positions(const struct f_view *v, uint64_t *dup)
{
    uint64_t *pos = calloc(F_SEQS_MAX, sizeof *pos);
    for (uint64_t i = 1; pos != NULL && i < v->n; i++) {
        uint32_t s = v->slot_at[i];
        if (s == 0) {
            continue;
        }
        if (pos[s - 1] != 0) {
            *dup += 1;
        } else {
            pos[s - 1] = i;
        }
    }
    return pos;
}

/* Is the acked value in slot s explained by damage the nodes flag? Only
 * under F_EXPECT_FLAGGED, and only at or after a node's first flagged
 * index (an intact record before it must still be served, docs/design.md §4
 * rule 5), or destroyed outright by an injury. */
static bool explained(const struct f_run_ctx *c, uint32_t s,
                      const struct f_view *nodes, uint64_t *const *npos, int n)
{
    /* With replicas a damaged minority is repaired around: the intact
     * majority must serve every acked value. */
    if (c->nem->expect != F_EXPECT_FLAGGED || c->cfg.replicas > 1) {
        return false;
    }
    if (c->destroyed[s]) {
        return true;
    }
    for (int i = 0; i < n; i++) {
        uint64_t at = npos[i] != NULL ? npos[i][s] : 0;
        if (nodes[i].flagged && !nodes[i].dump_failed &&
            (at == 0 || at >= nodes[i].first_damage)) {
            return true;
        }
    }
    return false;
}

static void check_acked(struct f_run_ctx *c, const uint64_t *rpos,
                        const uint8_t *disk, const struct f_view *nodes,
                        uint64_t *const *npos, int n, struct f_result *r)
{
    for (uint32_t s = 0; s < F_SEQS_MAX; s++) {
        uint8_t o = c->att[s].outcome;
        if (o == F_NONE) {
            continue;
        }
        r->attempts++;
        r->failed += o == F_FAILED;
        /* An error reply says "not stored". The workload sends no
         * Nats-Msg-Id and never retries a value, so nothing dedupes a
         * retry of it: a client that believed the answer and published
         * again would hold the value twice. Served anyway fails the run. */
        r->failed_stored += o == F_FAILED && rpos[s] != 0;
        r->indet += o == F_INDET || o == F_PENDING;
        if (o != F_ACKED) {
            continue;
        }
        r->acked++;
        /* The durable consumer delivers every stored message at least
         * once: a value the final read serves that it never delivered was
         * skipped (its state ran ahead of the stream). */
        r->consumer_missing += c->consumer_seen[s] == 0 && rpos[s] != 0;
        if (c->cfg.urls == NULL && !disk[s] && !c->destroyed[s]) {
            r->on_disk_missing++; /* deleted by the server */
        }
        if (rpos[s] != 0) {
            r->misplaced += rpos[s] != c->att[s].seq;
        } else if (explained(c, s, nodes, npos, n)) {
            r->unavailable++;
        } else {
            r->lost++;
        }
    }
}

/* The value the live (running, undamaged) peers hold at idx: 0 when none
 * holds one; *differ when two of them disagree, *missing when one lacks a
 * value another holds. */
static uint32_t live_value(const struct f_view *nodes, int n, uint64_t idx,
                           bool *differ, bool *missing)
{
    uint32_t first = 0;
    bool lack = false;
    *differ = false;
    for (int i = 0; i < n; i++) {
        if (nodes[i].lagging) {
            continue;
        }
        uint32_t s = idx < nodes[i].n ? nodes[i].slot_at[idx] : 0;
        if (s == 0) {
            /* Below its first index a replica holds the log in the
             * snapshot it installed: not a lack. */
            lack = lack || (!nodes[i].flagged && idx >= nodes[i].first_index);
            continue;
        }
        *differ = *differ || (first != 0 && s != first);
        first = first == 0 ? s : first;
    }
    *missing = lack && first != 0;
    return first;
}

/* A peer that was down at the end (it refused to restart) never caught
 * up: what it lacks is lag, and entries past the last one it shares with
 * the live peers may be an uncommitted tail a new leader replaced (Raft
 * allows both). Below that point it must agree, and what it holds that
 * no live peer holds is divergent. */
static uint64_t lagging_divergence(const struct f_view *lag,
                                   const struct f_view *nodes, int n)
{
    uint64_t agree = 0;
    uint64_t d = 0;
    bool differ;
    bool missing;
    for (uint64_t idx = 1; idx < lag->n; idx++) {
        uint32_t s = lag->slot_at[idx];
        if (s != 0 && live_value(nodes, n, idx, &differ, &missing) == s) {
            agree = idx;
        }
    }
    for (uint64_t idx = 1; idx <= agree; idx++) {
        uint32_t s = lag->slot_at[idx];
        uint32_t v = live_value(nodes, n, idx, &differ, &missing);
        d += s != 0 && v != s;
    }
    return d;
}

/* Does node i hold slot s (absent from its log) in the snapshot it
 * installed? Yes when another replica's log has s below i's first index. */
static bool in_installed_snapshot(const struct f_view *nodes,
                                  uint64_t *const *npos, int n, int i,
                                  uint32_t s)
{
    for (int j = 0; j < n && nodes[i].first_index > 1; j++) {
        uint64_t at = npos[j] != NULL ? npos[j][s - 1] : 0;
        if (j != i && at != 0 && at < nodes[i].first_index) {
            return true;
        }
    }
    return false;
}

/* Divergence among the node dumps (by index), and between the read and a
 * node whose disk reports no damage. */
static void check_divergence(const struct f_view *read, const uint64_t *rpos,
                             const struct f_view *nodes, int n,
                             struct f_result *r)
{
    uint64_t top = 0;
    for (int i = 0; i < n; i++) {
        top = nodes[i].n > top ? nodes[i].n : top;
    }
    for (uint64_t idx = 1; idx < top; idx++) {
        bool differ;
        bool missing;
        (void)live_value(nodes, n, idx, &differ, &missing);
        r->divergent += differ || (missing && n > 1);
    }
    uint64_t *npos[F_NODES_MAX] = {0};
    for (int i = 0; i < n; i++) {
        uint64_t d = 0;
        npos[i] = positions(&nodes[i], &d);
    }
    for (int i = 0; i < n; i++) {
        if (nodes[i].lagging) {
            r->divergent += lagging_divergence(&nodes[i], nodes, n);
            continue;
        }
        for (uint64_t q = 1; npos[i] != NULL && q < read->n; q++) {
            uint32_t s = read->slot_at[q];
            r->divergent += s != 0 && npos[i][s - 1] == 0 &&
                            !nodes[i].flagged &&
                            !in_installed_snapshot(nodes, npos, n, i, s);
        }
        for (uint64_t q = 1; q < nodes[i].n && !nodes[i].flagged; q++) {
            uint32_t s = nodes[i].slot_at[q];
            r->divergent += s != 0 && rpos[s - 1] == 0; /* held, not served */
        }
    }
    for (int i = 0; i < n; i++) {
        free(npos[i]);
    }
}

void f_check(struct f_run_ctx *c, const struct f_view *read,
             const struct f_view *nodes, int n, struct f_result *r)
{
    memset(r, 0, sizeof *r);
    uint8_t *disk = disk_tokens(c);
    uint64_t *rpos = positions(read, &r->dup);
    if (disk == NULL || rpos == NULL) {
        free(disk);
        free(rpos);
        return;
    }
    uint64_t *npos[F_NODES_MAX] = {0};
    uint64_t ndup = 0;
    for (int i = 0; i < n; i++) {
        npos[i] = positions(&nodes[i], &ndup);
    }
    check_acked(c, rpos, disk, nodes, npos, n, r);
    for (int i = 0; i < n; i++) {
        r->dump_failed += nodes[i].dump_failed;
    }
    for (int i = 0; i < n; i++) {
        free(npos[i]);
    }
    for (uint64_t q = 1; q < read->n; q++) {
        uint32_t s = read->slot_at[q];
        r->read_total += s != 0;
        r->never_published += s != 0 && c->att[s - 1].outcome == F_NONE;
    }
    r->never_published += read->alien;
    check_divergence(read, rpos, nodes, n, r);
    r->pass = r->lost == 0 && r->divergent == 0 && r->misplaced == 0 &&
              r->on_disk_missing == 0 && r->never_published == 0 &&
              r->consumer_missing == 0 && r->failed_stored == 0 &&
              r->dump_failed == 0 &&
              (c->nem->expect == F_EXPECT_FLAGGED || r->unavailable == 0);
    free(disk);
    free(rpos);
}
