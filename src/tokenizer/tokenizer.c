/* Encoding and decoding. Encoding splits the text at each <|endoftext|> (when asked),
 * pre-tokenizes each part (pretokenize.h) and runs BPE on each piece (bpe.h), through a
 * cache of pieces already seen (piece_cache.h). A tokenizer.json's pipeline (added tokens,
 * normalizer, its pre-tokenizers) is hf_encode.c, which comes back here for each piece. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bpe.h"
#include "tokenizer/bytes_hash.h"
#include "tokenizer/hf_pipeline.h"
#include "tokenizer/piece_cache.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_internal.h"

/* Texts shorter than this are encoded without a cache: setting it up costs more than it
 * saves. */
#define CACHE_FROM_BYTES 2048

size_t tern_tokenizer_vocab_size(const tern_tokenizer *tok) {
    return tok ? tok->vocab_size : 0;
}

int32_t tern_tokenizer_eot(const tern_tokenizer *tok) {
    return tok ? tok->eot : -1;
}

/* The id of the whole piece when the tokenizer has ignore_merges and the piece is a token
 * of its vocabulary, else -1. */
static int32_t whole_piece_token(const tern_tokenizer *tok, const uint8_t *piece, size_t len) {
    if (!tok->hf || !tok->hf->ignore_merges) return -1;
    return tern_token_index_find(&tok->hf->vocab_index, piece, len);
}

/* BPE of one short piece (2..TERN_BPE_SMALL_MAX bytes), through the cache if there is one. */
static tern_error *encode_short_piece(const tern_tokenizer *tok, tern_piece_cache *cache,
                                      const uint8_t *piece, size_t len, tern_id_vec *out) {
    TERN_TRY(tern_id_vec_reserve(out, len));
    int32_t *ids = out->data + out->count;
    uint32_t h = 0;
    tern_piece_slot *slot = NULL;
    if (cache) {
        h = (uint32_t)tern_bytes_hash(piece, len);
        slot = tern_piece_cache_find(cache, piece, len, h);
        if (slot->bytes) {
            const int32_t *cached = cache->ids.data + slot->at;
            if (slot->count == 1) /* the usual case: a word that is one token */
                ids[0] = cached[0];
            else
                memcpy(ids, cached, slot->count * sizeof *ids);
            out->count += slot->count;
            return NULL;
        }
    }
    size_t count;
    int32_t whole = whole_piece_token(tok, piece, len);
    if (whole >= 0) {
        ids[0] = whole;
        count = 1;
    } else {
        count = tern_bpe_small(&tok->merges, tok->byte_token, piece, len, ids);
    }
    out->count += count;
    if (!cache) return NULL;
    return tern_piece_cache_put(cache, slot, piece, len, h, ids, count);
}

tern_error *tern_encode_piece(const tern_tokenizer *tok, tern_piece_cache *cache,
                              const uint8_t *s, size_t len, tern_id_vec *out) {
    if (len == 1) return tern_id_vec_push(out, tok->byte_token[s[0]]);
    if (len <= TERN_BPE_SMALL_MAX) return encode_short_piece(tok, cache, s, len, out);
    if (len == 0) return NULL;
    int32_t whole = whole_piece_token(tok, s, len);
    if (whole >= 0) return tern_id_vec_push(out, whole);
    return tern_bpe_large(&tok->merges, tok->byte_token, s, len, out);
}

tern_error *tern_encode_gpt2_pieces(const tern_tokenizer *tok, tern_piece_cache *cache,
                                    const uint8_t *s, size_t n, tern_id_vec *out) {
    size_t p = 0;
    while (p < n) {
        size_t q = tern_pretokenize_next(s, n, p);
        size_t len = q - p;
        if (len == 1) {
            TERN_TRY(tern_id_vec_push(out, tok->byte_token[s[p]]));
        } else if (len <= TERN_BPE_SMALL_MAX) {
            TERN_TRY(encode_short_piece(tok, cache, s + p, len, out));
        } else {
            TERN_TRY(tern_encode_piece(tok, cache, s + p, len, out));
        }
        p = q;
    }
    return NULL;
}

/* The first occurrence of needle (n >= 1 bytes) in s[0..len), or NULL. */
static const uint8_t *find_bytes(const uint8_t *s, size_t len, const uint8_t *needle,
                                 size_t n) {
    const uint8_t *end = s + len;
    while ((size_t)(end - s) >= n) {
        const uint8_t *hit = memchr(s, needle[0], (size_t)(end - s) - n + 1);
        if (!hit) return NULL;
        if (!memcmp(hit, needle, n)) return hit;
        s = hit + 1;
    }
    return NULL;
}

tern_error *tern_tokenizer_encode(const tern_tokenizer *tok, const char *text, size_t len,
                                  bool special, int32_t **ids, size_t *count) {
    unsigned flags = special ? TERN_ENCODE_SPECIAL_IN_TEXT | TERN_ENCODE_ADD_SPECIAL : 0;
    return tern_tokenizer_encode_flags(tok, text, len, flags, ids, count);
}

tern_error *tern_tokenizer_encode_flags(const tern_tokenizer *tok, const char *text,
                                        size_t len, unsigned flags, int32_t **ids,
                                        size_t *count) {
    if (!tok || !ids || !count) return tern_errorf("tern_tokenizer_encode: missing argument");
    *ids = NULL;
    *count = 0;
    if (!text && len) return tern_errorf("tern_tokenizer_encode: no text");
    const uint8_t *s = (const uint8_t *)text;
    bool special = flags & TERN_ENCODE_SPECIAL_IN_TEXT;
    tern_id_vec out = {0};
    tern_piece_cache cache_store, *cache = NULL;
    tern_error *err = tern_id_vec_reserve(&out, len / 4 + 16); /* about 4.5 bytes a token */
    if (!err && len >= CACHE_FROM_BYTES) {
        err = tern_piece_cache_init(&cache_store);
        if (!err) cache = &cache_store;
    }
    if (!err && tok->hf) {
        err = tern_hf_encode(tok, s, len, flags, cache, &out);
    } else if (!err && special && tok->eot >= 0) {
        const uint8_t *eot = tok->bytes + tok->offsets[tok->eot];
        size_t eot_len = tok->offsets[tok->eot + 1] - tok->offsets[tok->eot];
        size_t p = 0;
        while (!err) {
            const uint8_t *hit = find_bytes(s + p, len - p, eot, eot_len);
            size_t end = hit ? (size_t)(hit - s) : len;
            err = tern_encode_gpt2_pieces(tok, cache, s + p, end - p, &out);
            if (err || !hit) break;
            err = tern_id_vec_push(&out, tok->eot);
            p = end + eot_len;
        }
    } else if (!err && len) {
        err = tern_encode_gpt2_pieces(tok, cache, s, len, &out);
    }
    if (cache) tern_piece_cache_free(cache);
    if (err) {
        free(out.data);
        return err;
    }
    *ids = out.data;
    *count = out.count;
    return NULL;
}

tern_error *tern_tokenizer_decode(const tern_tokenizer *tok, const int32_t *ids, size_t count,
                                  char **text, size_t *len) {
    if (!tok || !text || !len) return tern_errorf("tern_tokenizer_decode: missing argument");
    *text = NULL;
    *len = 0;
    if (!ids && count) return tern_errorf("tern_tokenizer_decode: no ids");
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t id = ids[i];
        if (id < 0 || (size_t)id >= tok->vocab_size)
            return tern_errorf("token id %d (at position %zu) is outside the vocabulary "
                               "(ids 0 to %zu)", (int)id, i, tok->vocab_size - 1);
        total += tok->offsets[id + 1] - tok->offsets[id];
    }
    char *out = malloc(total + 1);
    if (!out) return tern_errorf("out of memory decoding %zu tokens", count);
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        size_t start = tok->offsets[ids[i]], n = tok->offsets[ids[i] + 1] - start;
        memcpy(out + at, tok->bytes + start, n);
        at += n;
    }
    out[at] = '\0';
    *text = out;
    *len = at;
    return NULL;
}

tern_error *tern_tokenizer_token_bytes(const tern_tokenizer *tok, int32_t id,
                                       const char **bytes, size_t *len) {
    if (!tok || !bytes || !len) return tern_errorf("tern_tokenizer_token_bytes: missing argument");
    if (id < 0 || (size_t)id >= tok->vocab_size)
        return tern_errorf("token id %d is outside the vocabulary (ids 0 to %zu)", (int)id,
                           tok->vocab_size - 1);
    *bytes = (const char *)tok->bytes + tok->offsets[id];
    *len = tok->offsets[id + 1] - tok->offsets[id];
    return NULL;
}
