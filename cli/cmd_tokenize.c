/* tern tokenize: text on stdin to token ids (GPT-2's, or a tokenizer.json's) on stdout (one line, separated by
 * spaces), or with --decode the ids back to the exact bytes; --out writes the ids as an
 * llm.c token shard instead. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tern/data.h"
#include "tern/tokenizer.h"

#ifndef TERN_DEFAULT_TOKENIZER_DIR
#define TERN_DEFAULT_TOKENIZER_DIR "data/gpt2-tokenizer"
#endif

static void usage(FILE *out) {
    fprintf(out,
            "usage: tern tokenize [--model DIR] [--decode] [--no-special]\n"
            "                     [--out FILE.bin [--val VAL.bin] [--val-fraction F]]\n"
            "\n"
            "Reads stdin. Encoding prints the token ids on one line, separated by\n"
            "spaces; --decode reads ids separated by white space and writes their bytes.\n"
            "\n"
            "  --model DIR    use DIR/tokenizer.json, or DIR/vocab.json and DIR/merges.txt,\n"
            "                 when DIR has them (otherwise $TERN_TOKENIZER_DIR, else %s)\n"
            "  --decode       ids to text\n"
            "  --no-special   treat special tokens in the text as text, and add none (BOS)\n"
            "  --out FILE     write the ids as an llm.c token shard (written atomically)\n"
            "  --val FILE     with --out: the last part of the ids goes to this shard instead\n"
            "  --val-fraction F  that part's share (default 0.1)\n"
            "  --help         this message\n",
            TERN_DEFAULT_TOKENIZER_DIR);
}

static tern_error *read_stdin(char **data, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return tern_errorf("out of memory reading stdin");
    for (;;) {
        if (n == cap) {
            char *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!grown) {
                free(buf);
                return tern_errorf("out of memory reading stdin");
            }
            buf = grown;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) break;
    }
    if (ferror(stdin)) {
        free(buf);
        return tern_errorf("reading stdin: %s", strerror(errno));
    }
    *data = buf;
    *len = n;
    return NULL;
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Ids separated by white space: optional '-', then decimal digits, fitting an int32
 * (whether an id is in the vocabulary is the tokenizer's to say). */
static tern_error *parse_ids(const char *text, size_t len, int32_t **ids, size_t *count) {
    /* k ids take at least 2k - 1 characters (digits and separators), so len / 2 + 1 is
     * room enough. */
    size_t n = 0;
    int32_t *out = malloc((len / 2 + 1) * sizeof *out);
    if (!out) return tern_errorf("out of memory");
    for (size_t i = 0; i < len;) {
        if (is_space(text[i])) {
            i++;
            continue;
        }
        size_t start = i;
        while (i < len && !is_space(text[i])) i++;
        const char *word = text + start;
        size_t word_len = i - start;
        size_t d = word[0] == '-';
        long long value = 0;
        bool ok = word_len > d && word_len - d <= 11;
        for (size_t k = d; ok && k < word_len; k++) {
            ok = word[k] >= '0' && word[k] <= '9';
            value = value * 10 + (word[k] - '0');
        }
        if (d) value = -value;
        if (!ok || value < INT32_MIN || value > INT32_MAX) {
            free(out);
            return tern_errorf("'%.*s' is not a token id (ids are whole numbers separated by "
                               "white space)", word_len > 24 ? 24 : (int)word_len, word);
        }
        out[n++] = (int32_t)value;
    }
    *ids = out;
    *count = n;
    return NULL;
}

static tern_error *flush_stdout(void) {
    if (fflush(stdout) != 0 || ferror(stdout))
        return tern_errorf("writing stdout: %s", strerror(errno));
    return NULL;
}

/* The ids on one line, separated by spaces. */
static tern_error *print_ids(const int32_t *ids, size_t n) {
    char buf[1 << 16];
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (used > sizeof buf - 16) {
            if (fwrite(buf, 1, used, stdout) != used) break;
            used = 0;
        }
        used += (size_t)snprintf(buf + used, sizeof buf - used, i ? " %d" : "%d", (int)ids[i]);
    }
    buf[used++] = '\n';
    fwrite(buf, 1, used, stdout);
    return flush_stdout();
}

int tern_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *out_path = NULL, *val_path = NULL, *value = NULL;
    double val_fraction = 0.1;
    bool decode = false, special = true;
    for (int i = 1; i < argc; i++) {
        tern_error *err = NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--decode")) {
            decode = true;
        } else if (!strcmp(argv[i], "--no-special")) {
            special = false;
        } else if (cli_option(argc, argv, &i, "--model", &model, &err) ||
                   cli_option(argc, argv, &i, "--out", &out_path, &err) ||
                   cli_option(argc, argv, &i, "--val", &val_path, &err)) {
            if (err) return cli_fail(tern_error_wrap(err, "tokenize"));
        } else if (cli_option(argc, argv, &i, "--val-fraction", &value, &err)) {
            float f = 0;
            if (!err) err = cli_parse_float("--val-fraction", value, 1e-6, 0.999999, &f);
            if (err) return cli_fail(tern_error_wrap(err, "tokenize"));
            val_fraction = f;
        } else {
            return cli_fail(tern_errorf("tokenize: unknown option '%s' (try 'tern tokenize "
                                        "--help')", argv[i]));
        }
    }
    if (decode && out_path)
        return cli_fail(tern_errorf("tokenize: --out writes ids; it does not go with --decode"));
    if (val_path && !out_path) return cli_fail(tern_errorf("tokenize: --val goes with --out"));

    tern_tokenizer *tok = NULL;
    char *input = NULL;
    size_t input_len = 0;
    int32_t *ids = NULL;
    size_t count = 0;
    char *text = NULL;
    size_t text_len = 0;
    tern_error *err = cli_open_tokenizer(model, &tok);
    if (!err) err = read_stdin(&input, &input_len);
    if (!err && decode) {
        err = parse_ids(input, input_len, &ids, &count);
        /* Decode everything before writing anything: a bad id leaves stdout empty. */
        if (!err) err = tern_tokenizer_decode(tok, ids, count, &text, &text_len);
        if (!err && fwrite(text, 1, text_len, stdout) != text_len)
            err = tern_errorf("writing stdout: %s", strerror(errno));
        if (!err) err = flush_stdout();
    } else if (!err) {
        err = tern_tokenizer_encode(tok, input, input_len, special, &ids, &count);
        if (!err && out_path) {
            if (tern_tokenizer_vocab_size(tok) > 65536) {
                err = tern_errorf("--out: a shard holds 16-bit ids; the vocabulary has %zu",
                                  tern_tokenizer_vocab_size(tok));
            } else if (val_path) {
                size_t n_train = 0, n_val = 0;
                err = tern_split_sizes(count, val_fraction, &n_train, &n_val);
                if (!err) err = tern_shard_write_split(out_path, val_path, ids, count, val_fraction);
                if (!err) printf("wrote %zu tokens to %s and %zu to %s\n", n_train, out_path, n_val, val_path);
            } else {
                err = tern_shard_write(out_path, ids, count);
                if (!err) printf("wrote %zu tokens to %s\n", count, out_path);
            }
            if (!err) err = flush_stdout();
        } else if (!err) {
            err = print_ids(ids, count);
        }
    }
    free(text);
    free(ids);
    free(input);
    tern_tokenizer_free(tok);
    return err ? cli_fail(tern_error_wrap(err, "tokenize")) : 0;
}
