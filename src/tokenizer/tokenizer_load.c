/* Loading a tokenizer: vocab.json (token text -> id) and merges.txt (the BPE rules, in
 * rank order), both spelled in GPT-2's byte alphabet (byte_alphabet.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern/file.h"
#include "tokenizer/byte_alphabet.h"
#include "tokenizer/hf_pipeline.h"
#include "tokenizer/load_util.h"
#include "tokenizer/token_index.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/utf8.h"

#define MAX_FILE_BYTES ((size_t)1 << 30)

const char *tern_tok_quote(const char *s, size_t n, char *buf, size_t cap) {
    size_t o = 0;
    buf[o++] = '\'';
    for (size_t i = 0; i < n && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02X", c);
        if (o > 40 && i + 1 < n) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}

size_t tern_tok_spelled_to_bytes(const char *text, size_t n, uint8_t *out) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0, len = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = tern_utf8_decode(s + i, n - i, &cp);
        int b = l ? tern_byte_of_char(cp) : -1;
        if (b < 0) return 0;
        out[len++] = (uint8_t)b;
        i += l;
    }
    return len;
}

/* Fills tok->vocab_size, bytes and offsets from vocab.json's text. */
static tern_error *parse_vocab(struct tern_tokenizer *tok, const char *text, size_t len) {
    char q[64];
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        /* cJSON keeps the error position in a global: with loads racing in several
         * threads, the offset in this message could be another's (the error is not). */
        const char *at = cJSON_GetErrorPtr();
        if (at && at >= text && at <= text + len)
            return tern_errorf("not valid JSON (near byte %zu)", (size_t)(at - text));
        return tern_errorf("not valid JSON");
    }
    tern_error *err = NULL;
    size_t *start = NULL, *count = NULL;
    uint8_t *scratch = NULL;
    if (!cJSON_IsObject(root)) {
        err = tern_errorf("expected a JSON object mapping tokens to ids");
        goto done;
    }
    size_t n = 0, key_bytes = 0;
    for (const cJSON *item = root->child; item; item = item->next) {
        n++;
        key_bytes += strlen(item->string);
    }
    if (n == 0) {
        err = tern_errorf("has no tokens");
        goto done;
    }
    if (n > INT32_MAX - 1) {
        err = tern_errorf("has too many tokens (%zu)", n);
        goto done;
    }
    /* Each character of a key is one byte of the token, so the keys' length bounds the
     * bytes. Tokens are collected in file order, then laid out in id order. */
    start = malloc(n * sizeof *start);
    count = malloc(n * sizeof *count);
    scratch = malloc(key_bytes + 1);
    if (!start || !count || !scratch) {
        err = tern_errorf("out of memory for %zu tokens", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) start[i] = SIZE_MAX;
    size_t used = 0;
    for (const cJSON *item = root->child; item; item = item->next) {
        const char *key = item->string;
        size_t key_len = strlen(key);
        if (!cJSON_IsNumber(item)) {
            err = tern_errorf("token %s: the id is not a number",
                              tern_tok_quote(key, key_len, q, sizeof q));
            goto done;
        }
        double v = item->valuedouble;
        if (!(v >= 0 && v < (double)n) || v != floor(v)) {
            err = tern_errorf("token %s: id %g is not a whole number from 0 to %zu",
                              tern_tok_quote(key, key_len, q, sizeof q), v, n - 1);
            goto done;
        }
        size_t id = (size_t)v;
        if (start[id] != SIZE_MAX) {
            err = tern_errorf("id %zu is given to two tokens (one is %s)", id,
                              tern_tok_quote(key, key_len, q, sizeof q));
            goto done;
        }
        size_t bytes = tern_tok_spelled_to_bytes(key, key_len, scratch + used);
        if (!bytes) {
            err = tern_errorf("token %s is empty or not spelled in GPT-2's byte alphabet",
                              tern_tok_quote(key, key_len, q, sizeof q));
            goto done;
        }
        start[id] = used;
        count[id] = bytes;
        used += bytes;
    }
    /* n distinct ids in [0, n): every id has its token. */
    tok->bytes = malloc(used ? used : 1);
    tok->offsets = malloc((n + 1) * sizeof *tok->offsets);
    if (!tok->bytes || !tok->offsets) {
        err = tern_errorf("out of memory for %zu tokens", n);
        goto done;
    }
    size_t at = 0;
    for (size_t id = 0; id < n; id++) {
        tok->offsets[id] = at;
        memcpy(tok->bytes + at, scratch + start[id], count[id]);
        at += count[id];
    }
    tok->offsets[n] = at;
    tok->vocab_size = n;
done:
    cJSON_Delete(root);
    free(start);
    free(count);
    free(scratch);
    return err;
}

/* Finds the single-byte tokens and <|endoftext|>. */
static tern_error *find_base_tokens(struct tern_tokenizer *tok, const tern_token_index *index) {
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        tok->byte_token[b] = tern_token_index_find(index, &byte, 1);
        if (tok->byte_token[b] < 0) return tern_errorf("no token for the byte 0x%02X", b);
    }
    static const char eot[] = "<|endoftext|>";
    tok->eot = tern_token_index_find(index, (const uint8_t *)eot, sizeof eot - 1);
    return NULL;
}

/* Reads merges.txt's rules into tok->merges: line k (after an optional "#version" first
 * line) is the rule of rank k, two tokens separated by one space. */
static tern_error *parse_merges(struct tern_tokenizer *tok, const tern_token_index *index,
                                const char *text, size_t len) {
    char q1[64], q2[64];
    size_t lines = 1;
    for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + len - p))); p++) lines++;
    if (lines > INT32_MAX) return tern_errorf("too many lines (%zu)", lines);
    TERN_TRY(tern_merge_table_init(&tok->merges, lines));
    uint8_t *scratch = malloc(len + 1); /* a rule's bytes are fewer than its line's */
    if (!scratch) return tern_errorf("out of memory");
    tern_error *err = NULL;
    int32_t rank = 0;
    size_t line_no = 0;
    for (size_t pos = 0; pos < len;) {
        const char *line = text + pos;
        const char *newline = memchr(line, '\n', len - pos);
        size_t n = newline ? (size_t)(newline - line) : len - pos;
        pos += n + 1;
        line_no++;
        if (n && line[n - 1] == '\r') n--;
        if (n == 0) continue;
        if (line_no == 1 && n >= 8 && !memcmp(line, "#version", 8)) continue;
        const char *space = memchr(line, ' ', n);
        size_t left_len = space ? (size_t)(space - line) : 0;
        if (!space || left_len == 0 || left_len + 1 == n ||
            memchr(space + 1, ' ', n - left_len - 1)) {
            err = tern_errorf("line %zu: expected two tokens separated by one space, got %s",
                              line_no, tern_tok_quote(line, n, q1, sizeof q1));
            break;
        }
        const char *right = space + 1;
        size_t right_len = n - left_len - 1;
        size_t lb = tern_tok_spelled_to_bytes(line, left_len, scratch);
        size_t rb = lb ? tern_tok_spelled_to_bytes(right, right_len, scratch + lb) : 0;
        if (!lb || !rb) {
            err = tern_errorf("line %zu: %s is not spelled in GPT-2's byte alphabet", line_no,
                              tern_tok_quote(line, n, q1, sizeof q1));
            break;
        }
        int32_t a = tern_token_index_find(index, scratch, lb);
        int32_t b = tern_token_index_find(index, scratch + lb, rb);
        int32_t merged = tern_token_index_find(index, scratch, lb + rb);
        if (a < 0 || b < 0) {
            const char *missing = a < 0 ? line : right;
            size_t missing_len = a < 0 ? left_len : right_len;
            err = tern_errorf("line %zu: the token %s is not in the vocabulary", line_no,
                              tern_tok_quote(missing, missing_len, q1, sizeof q1));
            break;
        }
        if (merged < 0) {
            err = tern_errorf("line %zu: %s merges into a token that is not in the vocabulary",
                              line_no, tern_tok_quote(line, n, q1, sizeof q1));
            break;
        }
        if (!tern_merge_table_add(&tok->merges, a, b, rank, merged)) {
            err = tern_errorf("line %zu: the rule %s appears twice", line_no,
                              tern_tok_quote(line, n, q2, sizeof q2));
            break;
        }
        rank++;
    }
    free(scratch);
    return err;
}

/* Loads from the two files' contents; vocab_name and merges_name prefix error messages. */
static tern_error *load_buffers(const char *vocab, size_t vocab_len, const char *vocab_name,
                                const char *merges, size_t merges_len, const char *merges_name,
                                tern_tokenizer **out) {
    struct tern_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return tern_errorf("out of memory");
    tern_token_index index = {0};
    tern_error *err = parse_vocab(tok, vocab, vocab_len);
    if (!err) err = tern_token_index_build(&index, tok);
    if (!err) err = find_base_tokens(tok, &index);
    if (err) {
        err = tern_error_wrap(err, "%s", vocab_name);
    } else {
        err = tern_error_wrap(parse_merges(tok, &index, merges, merges_len), "%s", merges_name);
    }
    tern_token_index_free(&index);
    if (err) {
        tern_tokenizer_free(tok);
        return err;
    }
    *out = tok;
    return NULL;
}

tern_error *tern_tokenizer_load_memory(const char *vocab_json, size_t vocab_len,
                                       const char *merges_txt, size_t merges_len,
                                       tern_tokenizer **out) {
    if (!out) return tern_errorf("tern_tokenizer_load_memory: no output pointer");
    *out = NULL;
    if ((!vocab_json && vocab_len) || (!merges_txt && merges_len))
        return tern_errorf("tern_tokenizer_load_memory: no data");
    return load_buffers(vocab_json ? vocab_json : "", vocab_len, "vocab.json",
                        merges_txt ? merges_txt : "", merges_len, "merges.txt", out);
}

tern_error *tern_tok_read_file(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd;
    size_t size;
    TERN_TRY(tern_open_regular(path, &fd, &size)); /* a FIFO or a device is refused, not read */
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return tern_errorf("cannot open %s: %s", path, strerror(errno));
    }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    tern_error *err = NULL;
    for (;;) {
        if (cap - n < 2) { /* room for a byte and the NUL */
            size_t grown_cap = cap ? cap * 2 : (size_t)1 << 16;
            if (grown_cap > MAX_FILE_BYTES) {
                err = tern_errorf("%s: larger than %zu bytes", path, MAX_FILE_BYTES / 2);
                break;
            }
            char *grown = realloc(buf, grown_cap);
            if (!grown) {
                err = tern_errorf("out of memory reading %s", path);
                break;
            }
            buf = grown;
            cap = grown_cap;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) err = tern_errorf("cannot read %s: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (err) {
        free(buf);
        return err;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return NULL;
}

tern_error *tern_tokenizer_load(const char *vocab_json_path, const char *merges_txt_path,
                                tern_tokenizer **out) {
    if (!out) return tern_errorf("tern_tokenizer_load: no output pointer");
    *out = NULL;
    if (!vocab_json_path || !merges_txt_path) return tern_errorf("tern_tokenizer_load: no path");
    char *vocab = NULL, *merges = NULL;
    size_t vocab_len, merges_len;
    tern_error *err = tern_tok_read_file(vocab_json_path, &vocab, &vocab_len);
    if (!err) err = tern_tok_read_file(merges_txt_path, &merges, &merges_len);
    if (!err)
        err = load_buffers(vocab, vocab_len, vocab_json_path, merges, merges_len,
                           merges_txt_path, out);
    free(vocab);
    free(merges);
    return err;
}

static bool is_regular_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

tern_error *tern_tokenizer_load_dir(const char *dir, tern_tokenizer **out) {
    if (!out) return tern_errorf("tern_tokenizer_load_dir: no output pointer");
    *out = NULL;
    if (!dir) return tern_errorf("tern_tokenizer_load_dir: no directory");
    size_t n = strlen(dir);
    char *json = malloc(n + sizeof "/tokenizer.json");
    char *vocab = malloc(n + sizeof "/vocab.json");
    char *merges = malloc(n + sizeof "/merges.txt");
    tern_error *err;
    if (!json || !vocab || !merges) {
        err = tern_errorf("out of memory");
    } else {
        memcpy(json, dir, n);
        memcpy(json + n, "/tokenizer.json", sizeof "/tokenizer.json");
        memcpy(vocab, dir, n);
        memcpy(vocab + n, "/vocab.json", sizeof "/vocab.json");
        memcpy(merges, dir, n);
        memcpy(merges + n, "/merges.txt", sizeof "/merges.txt");
        /* tokenizer.json says everything (Qwen2 also ships vocab.json and merges.txt, with
         * another pre-tokenizer than GPT-2's); a GPT-2 one gives the same ids. */
        if (is_regular_file(json))
            err = tern_tokenizer_load_json(json, out);
        else
            err = tern_tokenizer_load(vocab, merges, out);
    }
    free(json);
    free(vocab);
    free(merges);
    return err;
}

void tern_tokenizer_free(tern_tokenizer *tok) {
    if (!tok) return;
    free(tok->bytes);
    free(tok->offsets);
    tern_merge_table_free(&tok->merges);
    tern_hf_pipeline_free(tok->hf);
    free(tok);
}
