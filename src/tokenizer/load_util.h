/* Helpers shared by the two loaders (tokenizer_load.c: vocab.json + merges.txt; hf_load.c:
 * tokenizer.json). */
#ifndef TERN_TOKENIZER_LOAD_UTIL_H
#define TERN_TOKENIZER_LOAD_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"

/* A short printable rendering of s for error messages: quoted, at most ~40 characters,
 * bytes outside printable ASCII as \xNN. Returns buf. */
const char *tern_tok_quote(const char *s, size_t n, char *buf, size_t cap);

/* Decodes token text spelled in the byte alphabet into bytes at out (room for n bytes);
 * returns the byte count, or 0 if the text is empty or not in the alphabet. */
size_t tern_tok_spelled_to_bytes(const char *text, size_t n, uint8_t *out);

/* Reads a whole regular file into a new buffer (NUL-terminated). */
tern_error *tern_tok_read_file(const char *path, char **data, size_t *len);

#endif
