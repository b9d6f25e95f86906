/* Byte-level BPE tokenizers: GPT-2's, loaded from Hugging Face's vocab.json and merges.txt,
 * and those of a Hugging Face tokenizer.json (Llama 3, Qwen2, SmolLM2, GPT-2 ...; what is
 * supported and what is refused: docs/tokenizer.md). */
#ifndef TERN_TOKENIZER_H
#define TERN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_tokenizer tern_tokenizer;

/* Loads vocab.json and merges.txt. Missing or garbled files give a one-line error. */
tern_error *tern_tokenizer_load(const char *vocab_json_path, const char *merges_txt_path,
                                tern_tokenizer **out);
/* Loads DIR/tokenizer.json when DIR has one, else DIR/vocab.json and DIR/merges.txt. */
tern_error *tern_tokenizer_load_dir(const char *dir, tern_tokenizer **out);
/* Loads a Hugging Face tokenizer.json. Anything tern does not implement exactly (another
 * model type, pre-tokenizer, normalizer, ...) is a one-line error naming the field. */
tern_error *tern_tokenizer_load_json(const char *path, tern_tokenizer **out);
/* The same from the file's contents (error messages then name it "tokenizer.json"). */
tern_error *tern_tokenizer_load_json_memory(const char *json, size_t len, tern_tokenizer **out);
/* Loads from the two files' contents, already in memory (error messages then name them
 * "vocab.json" and "merges.txt"). */
tern_error *tern_tokenizer_load_memory(const char *vocab_json, size_t vocab_len,
                                       const char *merges_txt, size_t merges_len,
                                       tern_tokenizer **out);
void tern_tokenizer_free(tern_tokenizer *tok);

/* Number of ids (50257 for GPT-2) and the id of <|endoftext|> (50256; -1 for a vocabulary
 * without it, where `special` below then has no effect). For a tokenizer.json: the special
 * added token <|endoftext|> or else <|end_of_text|>, or -1. */
size_t tern_tokenizer_vocab_size(const tern_tokenizer *tok);
int32_t tern_tokenizer_eot(const tern_tokenizer *tok);

/* Encodes len bytes of text (any bytes; invalid UTF-8 is encoded byte by byte) into a new
 * array *ids of *count ids, freed by the caller with free(). When `special` is set, each
 * "<|endoftext|>" in the text becomes the single id tern_tokenizer_eot(). */
tern_error *tern_tokenizer_encode(const tern_tokenizer *tok, const char *text, size_t len,
                                  bool special, int32_t **ids, size_t *count);

/* What encoding does with special tokens. tern_tokenizer_encode's `special` is both flags
 * (Hugging Face's default, `encode(text)`) or neither. Added tokens that are not special
 * are always matched in the text, as Hugging Face does. */
enum {
    TERN_ENCODE_SPECIAL_IN_TEXT = 1u, /* special tokens spelled in the text become their ids
                                       * (off: Hugging Face's split_special_tokens) */
    TERN_ENCODE_ADD_SPECIAL = 2u,     /* the post-processor's tokens (a BOS) around the ids
                                       * (Hugging Face's add_special_tokens) */
};
tern_error *tern_tokenizer_encode_flags(const tern_tokenizer *tok, const char *text,
                                        size_t len, unsigned flags, int32_t **ids,
                                        size_t *count);

/* Decodes ids into a new byte string *text of *len bytes (NUL-terminated too), freed by the
 * caller. An id outside the vocabulary is an error naming it. */
tern_error *tern_tokenizer_decode(const tern_tokenizer *tok, const int32_t *ids, size_t count,
                                  char **text, size_t *len);

/* The bytes of one id (for printing tokens as they are generated): valid until the
 * tokenizer is freed. An id outside the vocabulary is an error. */
tern_error *tern_tokenizer_token_bytes(const tern_tokenizer *tok, int32_t id,
                                       const char **bytes, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
