/* Times tern's tokenizer on a text file: encoding (what `tern tokenize` does, with special
 * tokens off, as tiktoken's encode_ordinary), and its parts for comparison: encoding
 * without the piece cache, the hand-written pre-tokenizer alone, GPT-2's regex run by PCRE2
 * alone, and decoding. Each figure is the median MB/s (of the input text's bytes) over
 * several runs, after a warm-up run.
 *
 * usage: bench_tokenizer [--tokenizer DIR] [--runs N] [--encode-only] FILE */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/tokenizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/pretokenize_regex.h"
#include "tokenizer/tokenizer_internal.h"

typedef struct {
    const tern_tokenizer *tok;
    const tern_regex_pretokenizer *re;
    const char *text;
    size_t len;
    size_t result; /* ids or pieces, to print and to keep the work from being optimised out */
} bench_input;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static tern_error *run_encode(bench_input *in) {
    int32_t *ids = NULL;
    TERN_TRY(tern_tokenizer_encode(in->tok, in->text, in->len, false, &ids, &in->result));
    free(ids);
    return NULL;
}

static tern_error *run_encode_uncached(bench_input *in) {
    const uint8_t *s = (const uint8_t *)in->text;
    tern_id_vec out = {0};
    tern_error *err = NULL;
    for (size_t p = 0; p < in->len && !err;) {
        size_t q = tern_pretokenize_next(s, in->len, p);
        err = tern_bpe_piece(&in->tok->merges, in->tok->byte_token, s + p, q - p, &out);
        p = q;
    }
    in->result = out.count;
    free(out.data);
    return err;
}

static tern_error *run_pretokenize(bench_input *in) {
    const uint8_t *s = (const uint8_t *)in->text;
    size_t pieces = 0;
    for (size_t p = 0; p < in->len; pieces++) p = tern_pretokenize_next(s, in->len, p);
    in->result = pieces;
    return NULL;
}

static tern_error *run_regex(bench_input *in) {
    size_t *ends = NULL;
    TERN_TRY(tern_regex_pretokenize(in->re, (const uint8_t *)in->text, in->len, &ends,
                                    &in->result));
    free(ends);
    return NULL;
}

static int32_t *decode_ids;
static size_t decode_count;

static tern_error *run_decode(bench_input *in) {
    char *text = NULL;
    TERN_TRY(tern_tokenizer_decode(in->tok, decode_ids, decode_count, &text, &in->result));
    free(text);
    return NULL;
}

static tern_error *bench(const char *name, const char *unit, tern_error *(*fn)(bench_input *),
                         bench_input *in, int runs) {
    double *rates = malloc((size_t)runs * sizeof *rates);
    if (!rates) return tern_errorf("out of memory");
    tern_error *err = fn(in); /* warm-up */
    for (int r = 0; r < runs && !err; r++) {
        double start = now();
        err = fn(in);
        rates[r] = (double)in->len / (now() - start) / 1e6;
    }
    if (!err) {
        qsort(rates, (size_t)runs, sizeof *rates, compare_doubles);
        printf("%-34s %zu bytes -> %zu %s, median %.2f MB/s over %d runs (min %.2f, max %.2f)\n",
               name, in->len, in->result, unit, rates[runs / 2], runs, rates[0],
               rates[runs - 1]);
    }
    free(rates);
    return err;
}

int main(int argc, char **argv) {
    const char *dir = "data/gpt2-tokenizer", *path = NULL;
    int runs = 7;
    bool encode_only = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--encode-only"))
            encode_only = true;
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            path = NULL, argc = 0;
    }
    if (!path || runs < 1) {
        fprintf(stderr, "usage: bench_tokenizer [--tokenizer DIR] [--runs N] [--encode-only] FILE\n");
        return 1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_tokenizer: cannot open %s\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(size > 0 ? (size_t)size : 1);
    size_t len = text && size > 0 ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);

    tern_tokenizer *tok = NULL;
    tern_regex_pretokenizer *re = NULL;
    bench_input in = {0};
    tern_error *err = tern_tokenizer_load_dir(dir, &tok);
    if (!err) err = tern_regex_pretokenizer_new(&re);
    if (!err) err = tern_tokenizer_encode(tok, text, len, false, &decode_ids, &decode_count);
    in = (bench_input){tok, re, text, len, 0};
    if (!err) err = bench("tern encode:", "ids", run_encode, &in, runs);
    if (encode_only) goto done;
    if (!err) err = bench("tern encode, no piece cache:", "ids", run_encode_uncached, &in, runs);
    if (!err) err = bench("tern pre-tokenizer alone:", "pieces", run_pretokenize, &in, runs);
    if (!err) err = bench("PCRE2 regex pre-tokenizer alone:", "pieces", run_regex, &in, runs);
    if (!err) err = bench("tern decode (MB/s of text out):", "bytes", run_decode, &in, runs);
done:
    if (err) fprintf(stderr, "bench_tokenizer: %s\n", tern_error_message(err));
    tern_error_free(err);
    free(decode_ids);
    tern_regex_pretokenizer_free(re);
    tern_tokenizer_free(tok);
    free(text);
    return err ? 1 : 0;
}
