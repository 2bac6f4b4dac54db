/* Fuzz target for the segment reader: header, record and marker decoders
 * over arbitrary bytes, walked the way the recovery scan walks a segment
 * (8-byte resynchronisation). Nothing from the input may crash or assert. */
#include <stddef.h>
#include <stdint.h>

#include "format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct store_seg_header h;
    uint64_t salt = 0;
    size_t off = STORE_SEG_HEADER_BYTES;

    if (store_fmt_seg_header_decode(data, size, &h) == 0) {
        salt = h.salt;
    }
    while (off + 8 <= size) {
        struct store_fmt_rec r;
        struct store_fmt_marker m;
        if (store_fmt_rec_decode(data + off, size - off, salt, &r) == 0) {
            off += (size_t)store_fmt_rec_bytes(r.len);
        } else if (store_fmt_marker_decode(data + off, size - off, salt, &m) ==
                   0) {
            off += STORE_MARKER_BYTES;
        } else {
            off += 8;
        }
    }
    return 0;
}
