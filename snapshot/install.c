/* InstallSnapshot transfers (docs/design.md §5, FORMAT.md "Transfer"): the
 * leader spools the snapshot and its retained log into one stream and cuts
 * it into checksummed frames; the follower spools frames to a file (bounded
 * memory), validates the whole, writes the retained log through the store,
 * then the snapshot, then the LMDB record, and only then may report
 * persisted(X).
 */
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

#include "internal.h"

#define XF_MAGIC "KEELSXF"
#define XF_VERSION 1u
#define XF_MANIFEST_BYTES SNAP__FIXED_BYTES
#define XF_REC_HEADER_BYTES 24u

_Static_assert(sizeof(XF_MAGIC) == 8, "transfer magic is 8 bytes");

struct xf_manifest {
    uint8_t group[16];
    uint64_t index;
    uint64_t term;
    uint64_t log_first;
    uint64_t file_bytes; /* the snapshot file: header + body */
    uint64_t log_bytes;
    uint64_t records;
    uint64_t log_hash; /* XXH3-64 of the log section */
};

struct snap_send {
    struct snap *sn;
    char path[SNAP_PATH_BYTES];
    struct fs_file *f;
    struct xf_manifest m;
    uint64_t data_bytes; /* manifest + file + log */
    uint64_t off;        /* spool write position (flushed bytes) */
    XXH3_state_t *hs;
    uint8_t *wbuf; /* SNAP_IO_BYTES of buffered spool writes */
    size_t wlen;
};

/* How the local log becomes the leader's (choose_shape). */
enum recv_shape { RECV_KEEP, RECV_APPEND, RECV_REPLACE };

struct batch;

/* Where snap_recv_apply_step is: the next record of the log section, its
 * spool offset, the last term checked, the log's last index (APPEND). */
struct recv_at {
    uint64_t i;
    uint64_t off;
    uint64_t prev_term;
    uint64_t last;
    enum recv_shape shape;
    uint8_t *buf;    /* SNAP_IO_BYTES for hashing; NULL: not begun */
    struct batch *b; /* records read, not yet appended */
};

struct snap_recv {
    struct snap *sn;
    char path[SNAP_PATH_BYTES];
    struct fs_file *f;
    uint64_t index;
    uint64_t term;
    uint64_t log_first;
    uint64_t next_wire;
    uint64_t next_data;
    uint64_t total; /* data bytes; 0 until the first frame */
    bool done;
    bool validated;
    bool log_applied;
    bool touched; /* the live log was truncated or appended to */
    /* The local log cannot continue the leader's: the retained log is
     * written as a whole new log, swapped in at commit. */
    struct store_replace *rp;
    struct xf_manifest m;
    struct snap_header h; /* of the received snapshot file */
    XXH3_state_t *hs;
    struct recv_at at; /* snap_recv_apply_step */
};

static uint64_t pad8(uint64_t n)
{
    ASSERT(n <= UINT64_MAX - 7);
    uint64_t r = (n + 7) & ~(uint64_t)7;
    ASSERT(r >= n);
    return r;
}

static uint64_t rec_bytes(uint32_t len)
{
    ASSERT(len <= STORE_RECORD_PAYLOAD_BYTES_MAX);
    uint64_t r = XF_REC_HEADER_BYTES + pad8(len);
    ASSERT(r % 8 == 0);
    return r;
}

static void manifest_encode(const struct xf_manifest *m,
                            uint8_t out[XF_MANIFEST_BYTES])
{
    ASSERT(m != NULL);
    ASSERT(m->index >= m->log_first || m->records == 0);
    const uint64_t w[SNAP__FIXED_WORDS] = {
        m->index,     m->term,    m->log_first, m->file_bytes,
        m->log_bytes, m->records, m->log_hash};
    snap__fixed_encode(XF_MAGIC, XF_VERSION, m->group, w, out);
}

static int manifest_decode(const uint8_t *b, struct xf_manifest *m,
                           char *errmsg)
{
    ASSERT(m != NULL);
    uint64_t *const w[SNAP__FIXED_WORDS] = {
        &m->index,     &m->term,    &m->log_first, &m->file_bytes,
        &m->log_bytes, &m->records, &m->log_hash};
    enum snap__fixed_bad bad =
        snap__fixed_decode(b, XF_MAGIC, XF_VERSION, m->group, w);

    if (bad == SNAP__FIXED_MAGIC || bad == SNAP__FIXED_SUM) {
        return keel_err(KEEL_ECORRUPT, errmsg, "transfer manifest damaged");
    }
    if (bad != SNAP__FIXED_OK) {
        return keel_err(KEEL_EVERSION, errmsg,
                        "transfer version %u unsupported",
                        keel_get_le32(b + 8));
    }
    return 0;
}

static void rec_header_encode(const struct store_entry *e, uint8_t *out)
{
    ASSERT(e != NULL);
    ASSERT(out != NULL);
    memset(out, 0, XF_REC_HEADER_BYTES);
    keel_put_le64(out, e->index);
    keel_put_le64(out + 8, e->term);
    out[16] = e->type;
    out[17] = e->flags;
    keel_put_le32(out + 20, e->len);
}

/* ---- leader side ---- */

/* Write the buffered spool bytes (large writes: few syscalls, and the
 * fault fs copies per write). */
static int spool_flush(struct snap_send *ss, char *errmsg)
{
    struct iovec iov = {ss->wbuf, ss->wlen};

    ASSERT(ss != NULL);
    ASSERT(ss->wlen <= SNAP_IO_BYTES);
    if (ss->wlen == 0) {
        return 0;
    }
    int rv = ss->sn->fs->pwritev(ss->sn->fs, ss->f, &iov, 1, ss->off, errmsg);
    ss->off += rv == 0 ? ss->wlen : 0;
    ss->wlen = 0;
    return rv;
}

static int spool_write(struct snap_send *ss, const void *p, size_t n, bool hash,
                       char *errmsg)
{
    int rv = 0;

    ASSERT(ss != NULL);
    ASSERT(p != NULL || n == 0);
    if (hash && n > 0) {
        (void)XXH3_64bits_update(ss->hs, p, n);
    }
    if (ss->wlen + n > SNAP_IO_BYTES) {
        rv = spool_flush(ss, errmsg);
    }
    if (rv == 0 && n > SNAP_IO_BYTES) {
        struct iovec iov = {(void *)p, n};
        rv = ss->sn->fs->pwritev(ss->sn->fs, ss->f, &iov, 1, ss->off, errmsg);
        ss->off += rv == 0 ? n : 0;
    } else if (rv == 0 && n > 0) {
        memcpy(ss->wbuf + ss->wlen, p, n);
        ss->wlen += n;
    }
    return rv;
}

static int send_rec_cb(void *arg, const struct store_entry *e)
{
    static const uint8_t zeros[8];
    struct snap_send *ss = arg;
    uint8_t h[XF_REC_HEADER_BYTES];
    int rv;

    ASSERT(ss != NULL);
    ASSERT(e->index == ss->m.log_first + ss->m.records);
    rec_header_encode(e, h);
    rv = spool_write(ss, h, sizeof h, true, NULL);
    rv = rv == 0 ? spool_write(ss, e->payload, e->len, true, NULL) : rv;
    rv = rv == 0 ? spool_write(ss, zeros, (size_t)(pad8(e->len) - e->len), true,
                               NULL)
                 : rv;
    ss->m.records++;
    ss->m.log_bytes += rec_bytes(e->len);
    return rv;
}

/* Spool the validated snapshot file and the retained log. */
static int send_fill(struct snap_send *ss, const uint8_t *body, size_t len,
                     char *errmsg)
{
    uint8_t hb[SNAP_HEADER_BYTES];
    struct snap_header h;
    int rv;

    ASSERT(ss != NULL);
    ASSERT(ss->off == XF_MANIFEST_BYTES);
    memset(&h, 0, sizeof h);
    memcpy(h.group, ss->sn->gid, 16);
    h.index = ss->m.index;
    h.term = ss->m.term;
    h.body_bytes = len;
    XXH128_hash_t hh = XXH3_128bits(body, len);
    h.body_hash_low = hh.low64;
    h.body_hash_high = hh.high64;
    snap_header_encode(&h, hb);
    rv = spool_write(ss, hb, sizeof hb, false, errmsg);
    rv = rv == 0 ? spool_write(ss, body, len, false, errmsg) : rv;
    if (rv != 0) {
        return rv;
    }
    ss->m.file_bytes = SNAP_HEADER_BYTES + len;
    (void)XXH3_64bits_reset(ss->hs);
    if (ss->m.log_first <= ss->m.index) {
        rv = store_iterate(ss->sn->g, ss->m.log_first, ss->m.index, send_rec_cb,
                           ss, errmsg);
    }
    rv = rv == 0 ? spool_flush(ss, errmsg) : rv;
    if (rv != 0) {
        return rv;
    }
    ss->m.log_hash = XXH3_64bits_digest(ss->hs);
    ss->data_bytes = ss->off;
    uint8_t mb[XF_MANIFEST_BYTES];
    manifest_encode(&ss->m, mb);
    struct iovec iov = {mb, sizeof mb};
    return ss->sn->fs->pwritev(ss->sn->fs, ss->f, &iov, 1, 0, errmsg);
}

static uint64_t frames_total(uint64_t data_bytes)
{
    uint64_t n =
        (data_bytes + SNAP_CHUNK_DATA_BYTES - 1) / SNAP_CHUNK_DATA_BYTES;

    ASSERT(data_bytes > 0);
    ASSERT(n >= 1);
    return (n - 1) * SNAP_FRAME_BYTES + SNAP_FRAME_HEADER_BYTES +
           (data_bytes - (n - 1) * SNAP_CHUNK_DATA_BYTES);
}

int snap_send_open(struct snap *sn, uint64_t log_first, struct snap_send **out,
                   uint64_t *total, char *errmsg)
{
    ASSERT(sn != NULL);
    return snap_send_open_at(sn, sn->newest.index, log_first, out, total,
                             errmsg);
}

int snap_send_open_at(struct snap *sn, uint64_t index, uint64_t log_first,
                      struct snap_send **out, uint64_t *total, char *errmsg)
{
    static unsigned seq;
    struct snap_send *ss;
    uint8_t *body = NULL;
    size_t len = 0;
    int rv;

    ASSERT(sn != NULL);
    ASSERT(out != NULL && total != NULL);
    if (index == 0) {
        return keel_err(KEEL_ENOENT, errmsg, "no valid snapshot held");
    }
    if (log_first == 0 || log_first > index + 1) {
        return keel_err(KEEL_EINVAL, errmsg, "retained log start %llu invalid",
                        (unsigned long long)log_first);
    }
    rv = snap_read_held(sn, index, &body, &len, errmsg);
    if (rv != 0) {
        return rv;
    }
    uint64_t term = index == sn->older.index ? sn->older.term : sn->newest.term;
    ss = calloc(1, sizeof *ss);
    XXH3_state_t *hs = XXH3_createState();
    uint8_t *wbuf = malloc(SNAP_IO_BYTES);
    if (ss == NULL || hs == NULL || wbuf == NULL) {
        free(ss);
        XXH3_freeState(hs);
        free(wbuf);
        free(body);
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    ss->sn = sn;
    ss->hs = hs;
    ss->wbuf = wbuf;
    memcpy(ss->m.group, sn->gid, 16);
    ss->m.index = index;
    ss->m.term = term;
    ss->m.log_first = log_first;
    ss->off = XF_MANIFEST_BYTES;
    snap__fmt(ss->path, sizeof ss->path, "%s/send-%020llu-%u.tmp", sn->dir,
              (unsigned long long)ss->m.index,
              __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
    rv = sn->fs->open(sn->fs, ss->path, FS_CREATE, &ss->f, errmsg);
    if (rv == 0) {
        rv = send_fill(ss, body, len, errmsg);
    } else {
        ss->f = NULL;
    }
    free(body);
    if (rv != 0) {
        snap_send_close(ss);
        return rv;
    }
    *total = frames_total(ss->data_bytes);
    *out = ss;
    return 0;
}

int snap_send_chunk(struct snap_send *ss, uint64_t off, uint8_t *buf,
                    size_t cap, size_t *len, bool *done, char *errmsg)
{
    ASSERT(ss != NULL && buf != NULL);
    ASSERT(cap >= SNAP_FRAME_BYTES);
    uint64_t k = off / SNAP_FRAME_BYTES;
    uint64_t doff = k * SNAP_CHUNK_DATA_BYTES;
    if (off % SNAP_FRAME_BYTES != 0 || doff >= ss->data_bytes) {
        return keel_err(KEEL_EINVAL, errmsg, "offset %llu is not a frame",
                        (unsigned long long)off);
    }
    uint64_t left = ss->data_bytes - doff;
    size_t n =
        left < SNAP_CHUNK_DATA_BYTES ? (size_t)left : SNAP_CHUNK_DATA_BYTES;
    size_t got = 0;
    int rv = ss->sn->fs->pread(ss->sn->fs, ss->f, buf + SNAP_FRAME_HEADER_BYTES,
                               n, doff, &got, errmsg);
    if (rv == 0 && got != n) {
        rv = keel_err(KEEL_EIO, errmsg, "transfer spool short");
    }
    if (rv != 0) {
        return rv;
    }
    snap_frame_seal(buf, (uint32_t)n, doff, ss->data_bytes);
    *len = SNAP_FRAME_HEADER_BYTES + n;
    *done = doff + n == ss->data_bytes;
    return 0;
}

void snap_send_info(const struct snap_send *ss, uint64_t *index, uint64_t *term,
                    uint64_t *log_first)
{
    ASSERT(ss != NULL);
    ASSERT(index != NULL && term != NULL && log_first != NULL);
    *index = ss->m.index;
    *term = ss->m.term;
    *log_first = ss->m.log_first;
}

void snap_send_close(struct snap_send *ss)
{
    if (ss == NULL) {
        return;
    }
    ASSERT(ss->sn != NULL);
    ASSERT(ss->path[0] != '\0');
    if (ss->f != NULL) {
        ss->sn->fs->close(ss->sn->fs, ss->f);
        (void)ss->sn->fs->unlink(ss->sn->fs, ss->path, NULL);
    }
    XXH3_freeState(ss->hs);
    free(ss->wbuf);
    free(ss);
}

/* ---- follower side ---- */

int snap_recv_open(struct snap *sn, uint64_t index, uint64_t term,
                   uint64_t log_first, struct snap_recv **out, char *errmsg)
{
    struct snap_recv *sr;
    int rv;

    ASSERT(sn != NULL);
    ASSERT(out != NULL);
    if (index == 0 || log_first == 0 || log_first > index + 1) {
        return keel_err(
            KEEL_EINVAL, errmsg, "install of %llu with log from %llu invalid",
            (unsigned long long)index, (unsigned long long)log_first);
    }
    struct snap_named nm = sn->named;
    if (index <= sn->newest.index || index < nm.index ||
        (index == nm.index && term != nm.term)) {
        return keel_err(KEEL_ESTALE, errmsg,
                        "install of %llu refused: snapshot %llu is held",
                        (unsigned long long)index,
                        (unsigned long long)(nm.index > sn->newest.index
                                                 ? nm.index
                                                 : sn->newest.index));
    }
    sr = calloc(1, sizeof *sr);
    if (sr == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    sr->hs = XXH3_createState();
    if (sr->hs == NULL) {
        free(sr);
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    sr->sn = sn;
    sr->index = index;
    sr->term = term;
    sr->log_first = log_first;
    snap__fmt(sr->path, sizeof sr->path, "%s/install.tmp", sn->dir);
    rv = sn->fs->open(sn->fs, sr->path, FS_CREATE, &sr->f, errmsg);
    rv = rv == 0 ? sn->fs->ftruncate(sn->fs, sr->f, 0, errmsg) : rv;
    if (rv != 0) {
        if (sr->f != NULL) {
            sn->fs->close(sn->fs, sr->f);
        }
        XXH3_freeState(sr->hs);
        free(sr);
        return rv;
    }
    *out = sr;
    return 0;
}

/* Check a frame by itself, then against what is expected next. */
static int frame_check(const struct snap_recv *sr, const uint8_t *fr,
                       size_t len, uint64_t *total, char *errmsg)
{
    struct snap_frame fm;
    int rv = snap_frame_check(fr, len, &fm, errmsg);

    ASSERT(sr != NULL);
    ASSERT(total != NULL);
    if (rv != 0) {
        return rv;
    }
    *total = fm.total;
    if (fm.data_off != sr->next_data ||
        (sr->total != 0 && fm.total != sr->total) ||
        fm.total < XF_MANIFEST_BYTES ||
        (fm.len < SNAP_CHUNK_DATA_BYTES && fm.data_off + fm.len != fm.total)) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "transfer frame names data %llu+%u of %llu, expected "
                        "data at %llu",
                        (unsigned long long)fm.data_off, fm.len,
                        (unsigned long long)fm.total,
                        (unsigned long long)sr->next_data);
    }
    return 0;
}

int snap_recv_chunk(struct snap_recv *sr, uint64_t off, const uint8_t *frame,
                    size_t len, uint64_t *next, bool *done, char *errmsg)
{
    uint64_t total = 0;
    int rv;

    ASSERT(sr != NULL);
    ASSERT(next != NULL && done != NULL);
    *next = sr->next_wire;
    *done = sr->done;
    if (sr->done || off != sr->next_wire) {
        return keel_err(
            KEEL_ESTALE, errmsg, "frame at %llu out of order: expecting %llu",
            (unsigned long long)off, (unsigned long long)sr->next_wire);
    }
    rv = frame_check(sr, frame, len, &total, errmsg);
    if (rv != 0) {
        return rv;
    }
    struct iovec iov = {(void *)(frame + SNAP_FRAME_HEADER_BYTES),
                        len - SNAP_FRAME_HEADER_BYTES};
    rv = sr->sn->fs->pwritev(sr->sn->fs, sr->f, &iov, 1, sr->next_data, errmsg);
    if (rv != 0) {
        return rv;
    }
    sr->total = total;
    sr->next_wire += len;
    sr->next_data += len - SNAP_FRAME_HEADER_BYTES;
    sr->done = sr->next_data == total;
    *next = sr->next_wire;
    *done = sr->done;
    return 0;
}

static int spool_read(struct snap_recv *sr, uint64_t off, void *buf, size_t n,
                      char *errmsg)
{
    size_t got = 0;

    ASSERT(sr != NULL);
    ASSERT(buf != NULL || n == 0);
    if (off > sr->total || n > sr->total - off) {
        return keel_err(KEEL_ECORRUPT, errmsg, "transfer section overruns");
    }
    int rv = sr->sn->fs->pread(sr->sn->fs, sr->f, buf, n, off, &got, errmsg);
    if (rv == 0 && got != n) {
        rv = keel_err(KEEL_ECORRUPT, errmsg, "transfer spool short");
    }
    return rv;
}

/* Read one log record header at off: index, term, type, flags, len. */
static int rec_read(struct snap_recv *sr, uint64_t off, struct store_entry *e,
                    char *errmsg)
{
    uint8_t h[XF_REC_HEADER_BYTES];
    int rv = spool_read(sr, off, h, sizeof h, errmsg);

    ASSERT(e != NULL);
    /* Records are 8-aligned within the log section; the section itself
     * follows the snapshot file, whose length is any. */
    if (rv != 0) {
        return rv;
    }
    e->index = keel_get_le64(h);
    e->term = keel_get_le64(h + 8);
    e->type = h[16];
    e->flags = h[17];
    e->len = keel_get_le32(h + 20);
    if (h[18] != 0 || h[19] != 0 || e->len > STORE_RECORD_PAYLOAD_BYTES_MAX) {
        return keel_err(KEEL_ECORRUPT, errmsg, "transfer record malformed");
    }
    return 0;
}

/* Hash n bytes of the spool at off into the state, SNAP_IO_BYTES at a time
 * (bounded memory). */
static int spool_hash(struct snap_recv *sr, uint64_t off, uint64_t n,
                      uint8_t *buf, bool wide, XXH3_state_t *st, char *errmsg)
{
    uint64_t done = 0;
    uint64_t steps = 0;

    ASSERT(sr != NULL && buf != NULL);
    ASSERT(st != NULL);
    while (done < n) {
        ASSERT(++steps <= SNAP_INSTALL_BYTES_MAX / SNAP_IO_BYTES + 1);
        uint64_t left = n - done;
        size_t k = left < SNAP_IO_BYTES ? (size_t)left : SNAP_IO_BYTES;
        int rv = spool_read(sr, off + done, buf, k, errmsg);
        if (rv != 0) {
            return rv;
        }
        if (wide) {
            (void)XXH3_128bits_update(st, buf, k);
        } else {
            (void)XXH3_64bits_update(st, buf, k);
        }
        done += k;
    }
    return 0;
}

/* The manifest names this install and the sections add up. */
static int check_manifest(struct snap_recv *sr, char *errmsg)
{
    uint8_t mb[XF_MANIFEST_BYTES];
    struct xf_manifest *m = &sr->m;
    int rv = spool_read(sr, 0, mb, sizeof mb, errmsg);

    ASSERT(sr->done);
    ASSERT(sr->total >= XF_MANIFEST_BYTES);
    rv = rv == 0 ? manifest_decode(mb, m, errmsg) : rv;
    if (rv != 0) {
        return rv;
    }
    uint64_t want_recs = sr->index - sr->log_first + 1;
    if (memcmp(m->group, sr->sn->gid, 16) != 0 || m->index != sr->index ||
        m->term != sr->term || m->log_first != sr->log_first ||
        m->records != want_recs) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "transfer names another snapshot or log range");
    }
    if (m->file_bytes < SNAP_HEADER_BYTES ||
        m->file_bytes > SNAP_HEADER_BYTES + SNAP_BODY_BYTES_MAX ||
        m->log_bytes > SNAP_INSTALL_BYTES_MAX ||
        XF_MANIFEST_BYTES + m->file_bytes + m->log_bytes != sr->total) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "transfer sections do not add up");
    }
    return 0;
}

/* The snapshot file: header against (group, index, term), XXH3-128. */
static int check_file(struct snap_recv *sr, uint8_t *buf, char *errmsg)
{
    uint8_t hb[SNAP_HEADER_BYTES];
    struct snap_expect exp;
    int rv = spool_read(sr, XF_MANIFEST_BYTES, hb, sizeof hb, errmsg);

    ASSERT(sr != NULL);
    ASSERT(buf != NULL);
    rv = rv == 0 ? snap_header_decode(hb, sizeof hb, &sr->h, errmsg) : rv;
    memcpy(exp.group, sr->sn->gid, 16);
    exp.index = sr->index;
    exp.term = sr->term;
    rv = rv == 0 ? snap_check_expect(&sr->h, &exp, errmsg) : rv;
    if (rv == 0 && SNAP_HEADER_BYTES + sr->h.body_bytes != sr->m.file_bytes) {
        rv = keel_err(KEEL_ECORRUPT, errmsg, "transfer snapshot length wrong");
    }
    if (rv != 0) {
        return rv;
    }
    XXH3_state_t *st = XXH3_createState();
    if (st == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    (void)XXH3_128bits_reset(st);
    rv = spool_hash(sr, XF_MANIFEST_BYTES + SNAP_HEADER_BYTES, sr->h.body_bytes,
                    buf, true, st, errmsg);
    XXH128_hash_t hh = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    if (rv == 0 && (hh.low64 != sr->h.body_hash_low ||
                    hh.high64 != sr->h.body_hash_high)) {
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "transfer snapshot body checksum mismatch");
    }
    return rv;
}

/* The retained log: consecutive indexes log_first..index (none when
 * log_first = index + 1), terms non-decreasing and ending with the
 * snapshot's term, hash. Checks records from sr->at until about budget
 * bytes were read; *end once the whole section passed. */
static int check_log_step(struct snap_recv *sr, uint64_t budget, bool *end,
                          char *errmsg)
{
    struct recv_at *at = &sr->at;
    uint64_t read = 0;
    struct store_entry e;
    int rv = 0;

    ASSERT(sr != NULL && at->buf != NULL);
    ASSERT(sr->m.records == sr->index - sr->log_first + 1);
    while (rv == 0 && at->i < sr->m.records && read < budget) {
        ASSERT(at->i < SNAP_INSTALL_BYTES_MAX / XF_REC_HEADER_BYTES);
        rv = rec_read(sr, at->off, &e, errmsg);
        if (rv == 0 && (e.index != sr->log_first + at->i ||
                        e.term < at->prev_term || e.term > sr->term)) {
            rv = keel_err(KEEL_ECORRUPT, errmsg,
                          "transfer record %llu out of order",
                          (unsigned long long)(sr->log_first + at->i));
        }
        rv = rv == 0 ? spool_hash(sr, at->off, rec_bytes(e.len), at->buf, false,
                                  sr->hs, errmsg)
                     : rv;
        at->prev_term = e.term;
        at->off += rv == 0 ? rec_bytes(e.len) : 0;
        read += rv == 0 ? rec_bytes(e.len) : 0;
        at->i++;
    }
    *end = rv == 0 && at->i == sr->m.records;
    /* An empty section (the leader dropped its log through the
     * snapshot: log_first = index + 1) has no last term to compare. */
    if (*end && sr->m.records > 0 && at->prev_term != sr->term) {
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "transfer log ends in term %llu, not the snapshot's "
                      "term %llu",
                      (unsigned long long)at->prev_term,
                      (unsigned long long)sr->term);
    }
    if (*end && rv == 0 &&
        (at->off != XF_MANIFEST_BYTES + sr->m.file_bytes + sr->m.log_bytes ||
         XXH3_64bits_digest(sr->hs) != sr->m.log_hash)) {
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "transfer log section failed its checksum");
    }
    return rv;
}

/* The manifest and the snapshot file (one step: the file is at most
 * SNAP_BODY_BYTES_MAX), then the log section is checked from its start. */
static int validate_begin(struct snap_recv *sr, char *errmsg)
{
    ASSERT(sr != NULL);
    ASSERT(!sr->validated && sr->at.buf == NULL);
    if (!sr->done) {
        return keel_err(KEEL_EAGAIN, errmsg, "transfer not complete");
    }
    sr->at.buf = malloc(SNAP_IO_BYTES);
    if (sr->at.buf == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    int rv = check_manifest(sr, errmsg);
    rv = rv == 0 ? check_file(sr, sr->at.buf, errmsg) : rv;
    (void)XXH3_64bits_reset(sr->hs);
    sr->at.i = 0;
    sr->at.off = XF_MANIFEST_BYTES + sr->m.file_bytes;
    sr->at.prev_term = 0;
    return rv;
}

struct batch {
    struct store_record recs[SNAP_INSTALL_BATCH_RECORDS];
    void *bufs[SNAP_INSTALL_BATCH_RECORDS];
    size_t n;
    uint64_t bytes;
};

/* Append the batch (write=false: an earlier step failed, drop it). */
static int batch_flush(struct snap_recv *sr, struct batch *b, bool write,
                       char *errmsg)
{
    int rv = 0;

    ASSERT(sr != NULL && b != NULL);
    ASSERT(b->n <= SNAP_INSTALL_BATCH_RECORDS);
    if (write && b->n > 0 && sr->rp != NULL) {
        rv = store_replace_append(sr->rp, b->recs, b->n, errmsg);
    } else if (write && b->n > 0) {
        sr->touched = true;
        rv = store_append(sr->sn->g, b->recs, b->n, errmsg);
    }
    for (size_t i = 0; i < b->n; i++) {
        free(b->bufs[i]);
    }
    b->n = 0;
    b->bytes = 0;
    return rv;
}

static int batch_add(struct snap_recv *sr, struct batch *b,
                     const struct store_entry *e, uint64_t off, char *errmsg)
{
    ASSERT(b->n < SNAP_INSTALL_BATCH_RECORDS);
    ASSERT(e->len <= STORE_RECORD_PAYLOAD_BYTES_MAX);
    void *p = malloc(e->len > 0 ? e->len : 1);
    if (p == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    int rv = spool_read(sr, off + XF_REC_HEADER_BYTES, p, e->len, errmsg);
    if (rv != 0) {
        free(p);
        return rv;
    }
    b->bufs[b->n] = p;
    b->recs[b->n] =
        (struct store_record){e->index, e->term, e->type, e->flags, e->len, p};
    b->n++;
    b->bytes += e->len;
    if (b->n == SNAP_INSTALL_BATCH_RECORDS || b->bytes >= 4 * SNAP_IO_BYTES) {
        return batch_flush(sr, b, true, errmsg);
    }
    return 0;
}

/* How the local log becomes the leader's retained log (§5: drop our own
 * entries below log_first, never discard one that matches the leader's):
 *   KEEP    we hold the snapshot's (index, term): by Log Matching every
 *           entry we hold up to it matches, and those after it may too;
 *   APPEND  the log is empty at log_first, or holds log_first with the
 *           leader's term: append what we lack, truncating at the first
 *           mismatch (the current leader sends a different entry there);
 *   REPLACE anything else: the retained log becomes the whole log (no
 *           local entry after the snapshot matches: we do not hold it). */
static int choose_shape(struct snap_recv *sr, const struct store_group_info *gi,
                        enum recv_shape *out, char *errmsg)
{
    bool empty = gi->last_index < gi->first_index;
    uint64_t t = 0;

    ASSERT(sr != NULL && gi != NULL);
    *out = RECV_REPLACE;
    if (!empty && gi->first_index <= sr->index && sr->index <= gi->last_index &&
        store_term_at(sr->sn->g, sr->index, &t) == 0 && t == sr->term) {
        *out = RECV_KEEP;
        return 0;
    }
    if (empty && gi->first_index == sr->log_first) {
        *out = RECV_APPEND;
        return 0;
    }
    if (!empty && sr->m.records > 0 && gi->first_index <= sr->log_first &&
        sr->log_first <= gi->last_index &&
        store_term_at(sr->sn->g, sr->log_first, &t) == 0) {
        struct store_entry e;
        int rv = rec_read(sr, XF_MANIFEST_BYTES + sr->m.file_bytes, &e, errmsg);
        if (rv != 0) {
            return rv;
        }
        *out = e.term == t ? RECV_APPEND : RECV_REPLACE;
    }
    return 0;
}

/* One record of the log section at sr->at. APPEND: Log Matching at
 * log_first holds, so the first mismatch (if any) is above it and
 * truncation never reaches below log_first. REPLACE: every record goes to
 * the new log. */
static int apply_record(struct snap_recv *sr, char *errmsg)
{
    struct recv_at *at = &sr->at;
    struct store_entry e;
    int rv = rec_read(sr, at->off, &e, errmsg);

    ASSERT(sr->validated && at->b != NULL);
    if (rv == 0 && at->shape == RECV_APPEND && e.index <= at->last) {
        uint64_t t = 0;
        if (store_term_at(sr->sn->g, e.index, &t) == 0 && t == e.term) {
            at->off += rec_bytes(e.len); /* never discard a matching entry */
            return 0;
        }
        ASSERT(e.index > sr->log_first);
        sr->touched = true;
        rv = store_truncate(sr->sn->g, e.index, errmsg);
        at->last = e.index - 1;
    }
    rv = rv == 0 ? batch_add(sr, at->b, &e, at->off, errmsg) : rv;
    at->last = rv == 0 ? e.index : at->last;
    at->off += rv == 0 ? rec_bytes(e.len) : 0;
    return rv;
}

/* REPLACE: our entries from log_first on (if any) differ from the
 * leader's; the rest of the old log goes at commit, in the same LMDB
 * transaction that names the new one. */
static int start_replace(struct snap_recv *sr,
                         const struct store_group_info *gi, char *errmsg)
{
    int rv = 0;

    ASSERT(sr->rp == NULL);
    if (gi->last_index >= gi->first_index && gi->last_index >= sr->log_first) {
        uint64_t from =
            sr->log_first > gi->first_index ? sr->log_first : gi->first_index;
        sr->touched = true;
        rv = store_truncate(sr->sn->g, from, errmsg);
    }
    return rv == 0
               ? store_replace_begin(sr->sn->g, sr->log_first, &sr->rp, errmsg)
               : rv;
}

/* The log section checked: choose the shape and start applying it. */
static int apply_begin(struct snap_recv *sr, bool *end, char *errmsg)
{
    struct recv_at *at = &sr->at;
    struct store_group_info gi;

    store_group_info(sr->sn->g, &gi);
    int rv = choose_shape(sr, &gi, &at->shape, errmsg);
    *end = rv == 0 && at->shape == RECV_KEEP;
    if (rv != 0 || *end) {
        return rv;
    }
    at->b = calloc(1, sizeof *at->b);
    if (at->b == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    at->i = 0;
    at->off = XF_MANIFEST_BYTES + sr->m.file_bytes;
    at->last = gi.last_index;
    return at->shape == RECV_REPLACE ? start_replace(sr, &gi, errmsg) : 0;
}

/* Free the step state; a batch not flushed is dropped. */
static void steps_free(struct snap_recv *sr)
{
    if (sr->at.b != NULL) {
        (void)batch_flush(sr, sr->at.b, false, NULL);
        free(sr->at.b);
        sr->at.b = NULL;
    }
    free(sr->at.buf);
    sr->at.buf = NULL;
}

/* Apply records from sr->at until about budget bytes were written; at the
 * end the last batch is flushed and a replacement synced. */
static int apply_step(struct snap_recv *sr, uint64_t budget, bool *end,
                      char *errmsg)
{
    struct recv_at *at = &sr->at;
    uint64_t from = at->off;
    int rv = 0;

    while (rv == 0 && at->i < sr->m.records && at->off - from < budget) {
        ASSERT(at->i < SNAP_INSTALL_BYTES_MAX / XF_REC_HEADER_BYTES);
        rv = apply_record(sr, errmsg);
        at->i++;
    }
    *end = rv == 0 && at->i == sr->m.records;
    if (*end) {
        rv = batch_flush(sr, at->b, true, errmsg);
    }
    if (*end && rv == 0 && sr->rp != NULL) {
        /* Segments and directory durable before anything names them. */
        rv = store_replace_sync(sr->rp, errmsg);
    }
    return rv;
}

int snap_recv_apply_step(struct snap_recv *sr, uint64_t budget, bool *done,
                         char *errmsg)
{
    bool end = false;
    int rv = 0;

    ASSERT(sr != NULL && done != NULL && budget > 0);
    ASSERT(!sr->log_applied);
    *done = false;
    if (!sr->validated && sr->at.buf == NULL) {
        rv = validate_begin(sr, errmsg);
    } else if (!sr->validated) {
        rv = check_log_step(sr, budget, &end, errmsg);
        sr->validated = rv == 0 && end;
        if (sr->validated) {
            rv = apply_begin(sr, &end, errmsg);
            sr->log_applied = rv == 0 && end; /* KEEP */
        }
    } else {
        rv = apply_step(sr, budget, &end, errmsg);
        sr->log_applied = rv == 0 && end;
    }
    if (rv != 0 && sr->rp != NULL) {
        store_replace_abort(sr->rp);
        sr->rp = NULL;
    }
    if (rv != 0 || sr->log_applied) {
        steps_free(sr);
    }
    *done = sr->log_applied;
    return rv;
}

int snap_recv_apply_log(struct snap_recv *sr, char *errmsg)
{
    bool done = false;
    int rv = 0;
    uint64_t steps = 0;

    ASSERT(sr != NULL);
    while (rv == 0 && !done) {
        ASSERT(++steps <= 4); /* begin, check, start, apply */
        rv = snap_recv_apply_step(sr, UINT64_MAX, &done, errmsg);
    }
    return rv;
}

bool snap_recv_touched_log(const struct snap_recv *sr)
{
    ASSERT(sr != NULL);
    return sr->touched;
}

bool snap_recv_replacing(const struct snap_recv *sr)
{
    ASSERT(sr != NULL);
    return sr->rp != NULL;
}

static int spool_body_read(void *arg, uint64_t off, uint8_t *buf, size_t n,
                           char *errmsg)
{
    struct snap_recv *sr = arg;

    ASSERT(sr != NULL);
    ASSERT(off + n <= sr->h.body_bytes);
    return spool_read(sr, XF_MANIFEST_BYTES + SNAP_HEADER_BYTES + off, buf, n,
                      errmsg);
}

int snap_recv_commit(struct snap_recv *sr, char *errmsg)
{
    int rv;

    ASSERT(sr != NULL);
    ASSERT(sr->log_applied && sr->validated);
    if (sr->rp == NULL) {
        /* store_snapshot_record refuses (KEEL_EAGAIN) until the retained
         * log is persisted through index (§5), and the unrecorded file is
         * removed. */
        rv = snap__write_file(sr->sn, &sr->h, spool_body_read, sr, errmsg);
        return rv == 0 ? snap__record(sr->sn, sr->index, sr->term, errmsg) : rv;
    }
    /* §5 order: segments (synced by apply_log), then the snapshot file,
     * then catalogue and snapshot record in one synced LMDB transaction. */
    rv = snap__write_file(sr->sn, &sr->h, spool_body_read, sr, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (snap__crash_here(sr->sn, SNAP_CRASH_BEFORE_RECORD)) {
        return keel_err(KEEL_ECANCELED, errmsg, "crash before LMDB record");
    }
    struct store_replace *rp = sr->rp;
    rv = store_replace_commit(rp, sr->index, sr->term, errmsg);
    if (rv != 0) {
        return rv; /* tests' killed store: the caller aborts */
    }
    sr->rp = NULL;
    struct store_snapshot_pair pair;
    rv = store_snapshot_get(sr->sn->g, &pair, errmsg);
    if (rv != 0) {
        return rv;
    }
    ASSERT(pair.index == sr->index);
    snap__adopt_replaced(sr->sn, pair.index, pair.term, pair.older_index,
                         pair.older_term);
    return 0;
}

void snap_recv_close(struct snap_recv *sr)
{
    if (sr == NULL) {
        return;
    }
    ASSERT(sr->sn != NULL);
    ASSERT(sr->f != NULL);
    sr->sn->fs->close(sr->sn->fs, sr->f);
    (void)sr->sn->fs->unlink(sr->sn->fs, sr->path, NULL);
    store_replace_abort(sr->rp);
    steps_free(sr);
    XXH3_freeState(sr->hs);
    free(sr);
}
