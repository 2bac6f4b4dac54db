/* cli_backup: the stream archive of `keel stream backup|restore`
 * (docs/backup.md). Little-endian, every record checksummed with XXH3-64
 * and the whole file too:
 *
 *   header   "KEELBAK\0" u32 version=1 u32 flags=0
 *   config   u32 len, len bytes of stream config JSON, u64 xxh3(json)
 *   message  u8 1, u64 seq, i64 time_ns, u32 subject_len, u32 hdr_len,
 *            u32 data_len, subject, hdr (NATS/1.0 block or empty), data,
 *            u64 xxh3(of the record from its kind byte to data)
 *   end      u8 0xFF, u64 count, u64 xxh3(every byte of the file before
 *            this last field)
 */
#ifndef KEEL_CLI_BACKUP_H
#define KEEL_CLI_BACKUP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <xxhash.h>

#define CLI_BACKUP_MAGIC "KEELBAK"
#define CLI_BACKUP_VERSION 1u
#define CLI_BACKUP_KIND_MSG 1u
#define CLI_BACKUP_KIND_END 0xFFu

/* A streaming reader or writer: every byte goes through the file hash. */
struct cli_bak {
    FILE *f;
    XXH3_state_t *file_hash;
    XXH3_state_t *rec_hash;
    uint64_t count;
    bool failed;
};

struct cli_bak_msg {
    uint64_t seq;
    int64_t time_ns;
    char *subject; /* NUL-terminated; owned by the reader's buffers */
    uint32_t subject_len;
    unsigned char *hdr;
    uint32_t hdr_len;
    unsigned char *data;
    uint32_t data_len;
};

/* Writer: open f (owned by the caller), write header and config. */
int cli_bak_write_start(struct cli_bak *b, FILE *f, const char *config_json,
                        char *errmsg);
int cli_bak_write_msg(struct cli_bak *b, const struct cli_bak_msg *m,
                      char *errmsg);
/* Write the end record; the file is complete after a successful fflush. */
int cli_bak_write_end(struct cli_bak *b, char *errmsg);

/* Reader: check the header, read the config (malloc'ed, NUL-terminated,
 * *config). */
int cli_bak_read_start(struct cli_bak *b, FILE *f, char **config, char *errmsg);
/* The next message into m (buffers reused across calls: m owns them until
 * cli_bak_msg_free), or *end = true at the end record (whose count and
 * file hash are verified). Returns 0 or KEEL_ECORRUPT / KEEL_ETRUNCATED
 * with errmsg naming the record. */
int cli_bak_read_msg(struct cli_bak *b, struct cli_bak_msg *m, bool *end,
                     char *errmsg);
void cli_bak_msg_free(struct cli_bak_msg *m);

void cli_bak_close(struct cli_bak *b);

#endif
