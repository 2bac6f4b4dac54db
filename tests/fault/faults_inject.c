/* Disk-fault injectors of keel-faults, applied to a STOPPED node's data
 * directory (after kill -9, before the restart): one bit flipped inside a
 * random record (or a segment header) of a random stream .blk file; a
 * random .blk truncated at a random offset inside its written records;
 * one byte of meta.lmdb's data pages changed; one byte of the newest
 * snapshot file changed. Each appends what it did to ctx->injury_log so a
 * failing run can be reproduced by hand (the seed reproduces it too). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "faults.h"

#define F_FILES_MAX 256
#define F_RECS_MAX 65536
#define F_SEG_HEADER 128
#define F_REC_OVERHEAD 48
#define F_META_GROUP "59863ec3cba286dee3d66a831eb83c98" /* keel-js-meta */

struct files {
    char path[F_FILES_MAX][512];
    int n;
};

/* Files named *suffix in <store>/groups/<gid>/<sub>/ of every group except
 * the meta group (the stream's data is the target). */
static void list_files(const char *store, const char *sub, const char *suffix,
                       struct files *out)
{
    char gdir[512];
    snprintf(gdir, sizeof gdir, "%s/groups", store);
    out->n = 0;
    DIR *d = opendir(gdir);
    struct dirent *g;
    while (d != NULL && (g = readdir(d)) != NULL) {
        if (g->d_name[0] == '.' || strcmp(g->d_name, F_META_GROUP) == 0) {
            continue;
        }
        char ldir[1024];
        if (snprintf(ldir, sizeof ldir, "%s/%s/%s", gdir, g->d_name, sub) >=
            (int)sizeof ldir) {
            continue;
        }
        DIR *l = opendir(ldir);
        struct dirent *e;
        while (l != NULL && (e = readdir(l)) != NULL && out->n < F_FILES_MAX) {
            size_t nl = strlen(e->d_name);
            size_t sl = strlen(suffix);
            if (nl > sl && strcmp(e->d_name + nl - sl, suffix) == 0 &&
                snprintf(out->path[out->n], sizeof out->path[0], "%s/%s", ldir,
                         e->d_name) < (int)sizeof out->path[0]) {
                out->n++;
            }
        }
        if (l != NULL) {
            closedir(l);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
}

static void store_dir(struct f_run_ctx *c, int node, char *out, size_t cap)
{
    snprintf(out, cap, "%s/js", f_k(c, node)->data_dir);
}

static void note(struct f_run_ctx *c, const char *what, const char *path,
                 long long off)
{
    size_t used = strlen(c->injury_log);
    if (used + 200 < sizeof c->injury_log) {
        const char *base = strrchr(path, '/');
        snprintf(c->injury_log + used, sizeof c->injury_log - used,
                 "%s%s %s@%lld", used > 0 ? "; " : "", what,
                 base != NULL ? base + 1 : path, off);
    }
    c->injured++;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t *buf = NULL;
    if (f == NULL || fstat(fileno(f), &st) != 0 || st.st_size <= 0) {
        goto out;
    }
    buf = malloc((size_t)st.st_size);
    if (buf != NULL &&
        fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        free(buf);
        buf = NULL;
    }
    *len = (size_t)st.st_size;
out:
    if (f != NULL) {
        fclose(f);
    }
    return buf;
}

/* Offsets of the records of a segment image (magic KREC, then length):
 * starts[i] and the end of the last one. */
static size_t record_offsets(const uint8_t *b, size_t len, size_t *starts,
                             size_t *end)
{
    size_t off = F_SEG_HEADER;
    size_t n = 0;
    *end = off;
    while (off + F_REC_OVERHEAD <= len && n < F_RECS_MAX) {
        if (memcmp(b + off, "KREC", 4) != 0) {
            if (memcmp(b + off, "KMRK", 4) == 0) {
                off += 56; /* a sync marker */
                continue;
            }
            break;
        }
        uint32_t l = (uint32_t)b[off + 4] | (uint32_t)b[off + 5] << 8 |
                     (uint32_t)b[off + 6] << 16 | (uint32_t)b[off + 7] << 24;
        size_t bytes = F_REC_OVERHEAD + ((l + 7u) & ~7u);
        if (off + bytes > len) {
            break;
        }
        starts[n++] = off;
        off += bytes;
        *end = off;
    }
    return n;
}

static int flip_at(const char *path, long long off, unsigned bit)
{
    int fd = open(path, O_RDWR);
    uint8_t b = 0;
    int rv = -1;
    if (fd >= 0 && pread(fd, &b, 1, off) == 1) {
        b ^= (uint8_t)(1u << bit);
        rv = pwrite(fd, &b, 1, off) == 1 ? 0 : -1;
    }
    if (fd >= 0) {
        close(fd);
    }
    return rv;
}

int f_inject_bitflip(struct f_run_ctx *c, int node)
{
    char dir[512];
    struct files *fs = calloc(1, sizeof *fs);
    size_t *starts = calloc(F_RECS_MAX, sizeof *starts);
    size_t len = 0;
    size_t end = 0;
    int rv = -1;
    store_dir(c, node, dir, sizeof dir);
    list_files(dir, "log", ".blk", fs);
    if (fs->n > 0 && starts != NULL) {
        const char *path = fs->path[f_rand(c) % (uint64_t)fs->n];
        uint8_t *b = slurp(path, &len);
        size_t n = b != NULL ? record_offsets(b, len, starts, &end) : 0;
        long long off;
        if (n == 0 || f_rand(c) % 8 == 0) {
            off = (long long)(f_rand(c) % F_SEG_HEADER); /* the header */
        } else {
            size_t i = f_rand(c) % n;
            size_t rec_end = i + 1 < n ? starts[i + 1] : end;
            off = (long long)(starts[i] + f_rand(c) % (rec_end - starts[i]));
        }
        rv = flip_at(path, off, (unsigned)(f_rand(c) % 8));
        note(c, "bitflip", path, off);
        free(b);
    }
    free(starts);
    free(fs);
    return rv;
}

int f_inject_truncate(struct f_run_ctx *c, int node)
{
    char dir[512];
    struct files *fs = calloc(1, sizeof *fs);
    size_t *starts = calloc(F_RECS_MAX, sizeof *starts);
    size_t len = 0;
    size_t end = 0;
    int rv = -1;
    store_dir(c, node, dir, sizeof dir);
    list_files(dir, "log", ".blk", fs);
    if (fs->n > 0 && starts != NULL) {
        const char *path = fs->path[f_rand(c) % (uint64_t)fs->n];
        uint8_t *b = slurp(path, &len);
        (void)(b != NULL ? record_offsets(b, len, starts, &end) : 0);
        long long off = (long long)(f_rand(c) % (end + 1));
        rv = truncate(path, off);
        note(c, "truncate", path, off);
        free(b);
    }
    free(starts);
    free(fs);
    return rv;
}

/* One changed byte in meta.lmdb past its two meta pages, at a non-zero
 * byte (a zero byte is most likely unused page space). */
int f_inject_meta(struct f_run_ctx *c, int node)
{
    char path[600];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/js/meta.lmdb", f_k(c, node)->data_dir);
    uint8_t *b = slurp(path, &len);
    int rv = -1;
    for (int tries = 0; b != NULL && len > 8192 && tries < 10000; tries++) {
        long long off = 8192 + (long long)(f_rand(c) % (len - 8192));
        if (b[off] != 0) {
            rv = flip_at(path, off, (unsigned)(f_rand(c) % 8));
            note(c, "meta", path, off);
            break;
        }
    }
    free(b);
    return rv;
}

/* One flipped bit in the newest snapshot file of the stream group; a run
 * whose stream never wrote a snapshot injures nothing (reported). */
int f_inject_snapshot(struct f_run_ctx *c, int node)
{
    char dir[512];
    struct files *fs = calloc(1, sizeof *fs);
    struct stat st;
    int rv = -1;
    store_dir(c, node, dir, sizeof dir);
    list_files(dir, "snap", "", fs);
    int newest = -1;
    time_t t = 0;
    for (int i = 0; i < fs->n; i++) {
        if (stat(fs->path[i], &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_size > 0 && (newest < 0 || st.st_mtime >= t)) {
            newest = i;
            t = st.st_mtime;
        }
    }
    if (newest >= 0 && stat(fs->path[newest], &st) == 0) {
        long long off = (long long)(f_rand(c) % (uint64_t)st.st_size);
        rv = flip_at(fs->path[newest], off, (unsigned)(f_rand(c) % 8));
        note(c, "snapshot", fs->path[newest], off);
    } else {
        note(c, "snapshot(none)", dir, 0);
        rv = 0;
    }
    free(fs);
    return rv;
}
