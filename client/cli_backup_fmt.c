/* The stream archive format (cli_backup.h, docs/backup.md): pure file I/O,
 * no server, so the unit test round-trips and corrupts archives directly.
 */
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/error.h"
#include "keel/limits.h"
#include "cli.h"
#include "cli_backup.h"

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static int init_hashes(struct cli_bak *b, FILE *f)
{
    memset(b, 0, sizeof *b);
    b->f = f;
    b->file_hash = XXH3_createState();
    b->rec_hash = XXH3_createState();
    if (b->file_hash == NULL || b->rec_hash == NULL) {
        cli_bak_close(b);
        return KEEL_ENOMEM;
    }
    XXH3_64bits_reset(b->file_hash);
    XXH3_64bits_reset(b->rec_hash);
    return 0;
}

/* Write len bytes into the file and both hashes. */
static int put(struct cli_bak *b, const void *p, size_t len, char *errmsg)
{
    if (len > 0 && fwrite(p, 1, len, b->f) != len) {
        b->failed = true;
        return keel_err(KEEL_EIO, errmsg,
                        "write the archive: disk full or not writable?");
    }
    XXH3_64bits_update(b->file_hash, p, len);
    XXH3_64bits_update(b->rec_hash, p, len);
    return 0;
}

/* Read exactly len bytes; both hashes see them. */
static int get(struct cli_bak *b, void *p, size_t len, const char *what,
               char *errmsg)
{
    if (len > 0 && fread(p, 1, len, b->f) != len) {
        return keel_err(KEEL_ETRUNCATED, errmsg,
                        "the archive ends inside %s (record %llu): it is "
                        "truncated",
                        what, (unsigned long long)b->count + 1);
    }
    XXH3_64bits_update(b->file_hash, p, len);
    XXH3_64bits_update(b->rec_hash, p, len);
    return 0;
}

int cli_bak_write_start(struct cli_bak *b, FILE *f, const char *config_json,
                        char *errmsg)
{
    unsigned char h[16];
    unsigned char n[8];
    int rv = init_hashes(b, f);
    if (rv != 0) {
        return rv;
    }
    memcpy(h, CLI_BACKUP_MAGIC, 8); /* includes the NUL */
    put_u32(h + 8, CLI_BACKUP_VERSION);
    put_u32(h + 12, 0);
    size_t len = strlen(config_json);
    ASSERT(len <= CLI_BACKUP_CONFIG_BYTES_MAX);
    put_u32(n, (uint32_t)len);
    rv = put(b, h, sizeof h, errmsg);
    if (rv == 0) {
        rv = put(b, n, 4, errmsg);
    }
    if (rv == 0) {
        rv = put(b, config_json, len, errmsg);
    }
    put_u64(n, XXH3_64bits(config_json, len));
    return rv == 0 ? put(b, n, 8, errmsg) : rv;
}

int cli_bak_write_msg(struct cli_bak *b, const struct cli_bak_msg *m,
                      char *errmsg)
{
    unsigned char h[29];
    unsigned char sum[8];
    h[0] = CLI_BACKUP_KIND_MSG;
    put_u64(h + 1, m->seq);
    put_u64(h + 9, (uint64_t)m->time_ns);
    put_u32(h + 17, m->subject_len);
    put_u32(h + 21, m->hdr_len);
    put_u32(h + 25, m->data_len);
    XXH3_64bits_reset(b->rec_hash);
    int rv = put(b, h, sizeof h, errmsg);
    if (rv == 0) {
        rv = put(b, m->subject, m->subject_len, errmsg);
    }
    if (rv == 0) {
        rv = put(b, m->hdr, m->hdr_len, errmsg);
    }
    if (rv == 0) {
        rv = put(b, m->data, m->data_len, errmsg);
    }
    put_u64(sum, XXH3_64bits_digest(b->rec_hash));
    if (rv == 0) {
        rv = put(b, sum, sizeof sum, errmsg);
    }
    b->count += rv == 0;
    return rv;
}

int cli_bak_write_end(struct cli_bak *b, char *errmsg)
{
    unsigned char t[9];
    unsigned char sum[8];
    t[0] = CLI_BACKUP_KIND_END;
    put_u64(t + 1, b->count);
    int rv = put(b, t, sizeof t, errmsg);
    put_u64(sum, XXH3_64bits_digest(b->file_hash));
    if (rv == 0 && fwrite(sum, 1, sizeof sum, b->f) != sizeof sum) {
        rv = keel_err(KEEL_EIO, errmsg, "write the archive's end record");
    }
    return rv;
}

int cli_bak_read_start(struct cli_bak *b, FILE *f, char **config, char *errmsg)
{
    unsigned char h[20];
    unsigned char sum[8];
    int rv = init_hashes(b, f);
    if (rv == 0) {
        rv = get(b, h, sizeof h, "the header", errmsg);
    }
    if (rv != 0) {
        return rv;
    }
    if (memcmp(h, CLI_BACKUP_MAGIC, 8) != 0) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "not a keel stream backup (no KEELBAK header)");
    }
    if (get_u32(h + 8) != CLI_BACKUP_VERSION) {
        return keel_err(KEEL_EVERSION, errmsg,
                        "backup format version %u: this keel reads %u",
                        get_u32(h + 8), CLI_BACKUP_VERSION);
    }
    uint32_t len = get_u32(h + 16);
    if (len > CLI_BACKUP_CONFIG_BYTES_MAX) {
        return keel_err(KEEL_ECORRUPT, errmsg, "config of %u bytes: corrupt",
                        len);
    }
    *config = malloc((size_t)len + 1);
    if (*config == NULL) {
        return KEEL_ENOMEM;
    }
    rv = get(b, *config, len, "the config", errmsg);
    if (rv == 0) {
        rv = get(b, sum, sizeof sum, "the config checksum", errmsg);
    }
    (*config)[len] = '\0';
    if (rv == 0 && get_u64(sum) != XXH3_64bits(*config, len)) {
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "the stream config in the archive fails its checksum");
    }
    if (rv != 0) {
        free(*config);
        *config = NULL;
    }
    return rv;
}

static int grow(void **buf, uint32_t len)
{
    void *p = realloc(*buf, (size_t)len + 1);
    if (p == NULL) {
        return KEEL_ENOMEM;
    }
    *buf = p;
    return 0;
}

static int read_end(struct cli_bak *b, char *errmsg)
{
    unsigned char c[8];
    unsigned char sum[8];
    int rv = get(b, c, sizeof c, "the end record", errmsg);
    uint64_t want = XXH3_64bits_digest(b->file_hash);
    if (rv == 0 && fread(sum, 1, sizeof sum, b->f) != sizeof sum) {
        rv = keel_err(KEEL_ETRUNCATED, errmsg,
                      "the archive ends inside its file checksum");
    }
    if (rv == 0 && get_u64(c) != b->count) {
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "the end record counts %llu messages, the archive "
                      "holds %llu",
                      (unsigned long long)get_u64(c),
                      (unsigned long long)b->count);
    }
    if (rv == 0 && get_u64(sum) != want) {
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "the archive fails its whole-file checksum");
    }
    return rv;
}

static int read_body(struct cli_bak *b, struct cli_bak_msg *m, char *errmsg)
{
    unsigned char sum[8];
    int rv = grow((void **)&m->subject, m->subject_len);
    if (rv == 0) {
        rv = grow((void **)&m->hdr, m->hdr_len);
    }
    if (rv == 0) {
        rv = grow((void **)&m->data, m->data_len);
    }
    if (rv == 0) {
        rv = get(b, m->subject, m->subject_len, "a subject", errmsg);
    }
    if (rv == 0) {
        rv = get(b, m->hdr, m->hdr_len, "a header block", errmsg);
    }
    if (rv == 0) {
        rv = get(b, m->data, m->data_len, "a message body", errmsg);
    }
    uint64_t want = XXH3_64bits_digest(b->rec_hash);
    if (rv == 0) {
        rv = get(b, sum, sizeof sum, "a record checksum", errmsg);
    }
    if (rv == 0 && get_u64(sum) != want) {
        rv = keel_err(
            KEEL_ECORRUPT, errmsg, "record %llu (seq %llu) fails its checksum",
            (unsigned long long)b->count + 1, (unsigned long long)m->seq);
    }
    if (rv == 0) {
        m->subject[m->subject_len] = '\0';
        b->count++;
    }
    return rv;
}

int cli_bak_read_msg(struct cli_bak *b, struct cli_bak_msg *m, bool *end,
                     char *errmsg)
{
    unsigned char h[29];
    *end = false;
    XXH3_64bits_reset(b->rec_hash);
    int rv = get(b, h, 1, "a record", errmsg);
    if (rv != 0) {
        return rv;
    }
    if (h[0] == CLI_BACKUP_KIND_END) {
        *end = true;
        return read_end(b, errmsg);
    }
    if (h[0] != CLI_BACKUP_KIND_MSG) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "record %llu has unknown kind %u: corrupt archive",
                        (unsigned long long)b->count + 1, h[0]);
    }
    rv = get(b, h + 1, sizeof h - 1, "a record header", errmsg);
    if (rv != 0) {
        return rv;
    }
    m->seq = get_u64(h + 1);
    m->time_ns = (int64_t)get_u64(h + 9);
    m->subject_len = get_u32(h + 17);
    m->hdr_len = get_u32(h + 21);
    m->data_len = get_u32(h + 25);
    if (m->subject_len > CLI_SUBJECT_BYTES_MAX ||
        m->hdr_len > CLI_BODY_BYTES_MAX || m->data_len > CLI_BODY_BYTES_MAX) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "record %llu has impossible lengths: corrupt archive",
                        (unsigned long long)b->count + 1);
    }
    return read_body(b, m, errmsg);
}

void cli_bak_msg_free(struct cli_bak_msg *m)
{
    free(m->subject);
    free(m->hdr);
    free(m->data);
    memset(m, 0, sizeof *m);
}

void cli_bak_close(struct cli_bak *b)
{
    XXH3_freeState(b->file_hash);
    XXH3_freeState(b->rec_hash);
    b->file_hash = NULL;
    b->rec_hash = NULL;
}
