/* Opening a data file of either kind: token shards by their magic, anything else as UTF-8
 * text tokenized here. Kept apart from dataset.c because it is the one part of the data
 * code that needs the tokenizer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/utf8.h"
#include "tern/data.h"
#include "tern/file.h"

/* Reads up to 4 bytes to tell a shard from text. */
static tern_error *peek_magic(const char *path, bool *is_shard) {
    int fd;
    size_t size;
    TERN_TRY(tern_open_regular(path, &fd, &size));
    unsigned char head[4];
    size_t got = 0;
    while (got < sizeof head) {
        ssize_t r = read(fd, head + got, sizeof head - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            tern_error *e = tern_errorf("cannot read %s: %s", path, strerror(errno));
            close(fd);
            return e;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    *is_shard = tern_is_shard(head, got);
    return NULL;
}

tern_error *tern_dataset_open(const char *path, const tern_tokenizer *tok, size_t vocab_size,
                              tern_dataset **out) {
    *out = NULL;
    bool is_shard = false;
    TERN_TRY(peek_magic(path, &is_shard));
    if (is_shard) return tern_dataset_open_shard(path, vocab_size, out);

    if (!tok)
        return tern_errorf("%s: not a token shard, and no tokenizer was given to read it as text",
                           path);
    char *text;
    size_t len;
    TERN_TRY(tern_read_file(path, &text, &len));
    size_t bad;
    if (!tern_utf8_valid(text, len, &bad)) {
        free(text);
        return tern_errorf("%s: neither a token shard nor UTF-8 text (invalid byte at offset %zu)",
                           path, bad);
    }
    int32_t *ids = NULL;
    size_t count = 0;
    tern_error *e = tern_tokenizer_encode(tok, text, len, true, &ids, &count);
    free(text);
    if (e) return tern_error_wrap(e, "tokenizing %s", path);
    e = tern_dataset_from_ids(ids, count, vocab_size, out);
    free(ids);
    return tern_error_wrap(e, "%s", path);
}
