/* tern tokenize: text on stdin to GPT-2 token ids on stdout (one line, separated by
 * spaces), or with --decode the ids back to the exact bytes; --out writes the ids as an
 * llm.c token shard instead. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tern/tokenizer.h"

#ifndef TERN_DEFAULT_TOKENIZER_DIR
#define TERN_DEFAULT_TOKENIZER_DIR "data/gpt2-tokenizer"
#endif

static void usage(FILE *out) {
    fprintf(out,
            "usage: tern tokenize [--model DIR] [--decode] [--no-special] [--out FILE.bin]\n"
            "\n"
            "Reads stdin. Encoding prints the GPT-2 token ids on one line, separated by\n"
            "spaces; --decode reads ids separated by white space and writes their bytes.\n"
            "\n"
            "  --model DIR    use DIR/vocab.json and DIR/merges.txt when DIR has them\n"
            "                 (otherwise $TERN_TOKENIZER_DIR, else %s)\n"
            "  --decode       ids to text\n"
            "  --no-special   treat <|endoftext|> in the text as text, not as its id\n"
            "  --out FILE     write the ids as an llm.c token shard (written atomically)\n"
            "  --help         this message\n",
            TERN_DEFAULT_TOKENIZER_DIR);
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The tokenizer folder: --model DIR when it holds both files, else the default. */
static tern_error *load_tokenizer(const char *model, tern_tokenizer **tok) {
    if (model) {
        struct stat st;
        if (stat(model, &st) != 0) return tern_errorf("--model: %s: %s", model, strerror(errno));
        if (!S_ISDIR(st.st_mode)) return tern_errorf("--model: %s is not a directory", model);
        size_t n = strlen(model);
        char *vocab = malloc(n + sizeof "/vocab.json"), *merges = malloc(n + sizeof "/merges.txt");
        if (!vocab || !merges) {
            free(vocab);
            free(merges);
            return tern_errorf("out of memory");
        }
        snprintf(vocab, n + sizeof "/vocab.json", "%s/vocab.json", model);
        snprintf(merges, n + sizeof "/merges.txt", "%s/merges.txt", model);
        bool has_vocab = is_file(vocab), has_merges = is_file(merges);
        tern_error *err = NULL;
        if (has_vocab && has_merges)
            err = tern_tokenizer_load(vocab, merges, tok);
        else if (has_vocab || has_merges)
            err = tern_errorf("--model: %s has %s but no %s", model,
                              has_vocab ? "vocab.json" : "merges.txt",
                              has_vocab ? "merges.txt" : "vocab.json");
        free(vocab);
        free(merges);
        if (err || *tok) return err;
    }
    const char *dir = getenv("TERN_TOKENIZER_DIR");
    if (!dir || !*dir) dir = TERN_DEFAULT_TOKENIZER_DIR;
    return tern_tokenizer_load_dir(dir, tok);
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

static tern_error *write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return tern_errorf("%s", n < 0 ? strerror(errno) : "short write");
        p += n;
        len -= (size_t)n;
    }
    return NULL;
}

/* An llm.c token shard: 256 little-endian int32 (magic 20240520, version 1, the token count,
 * zeros), then the tokens as little-endian uint16. Written to a temporary file in the same
 * folder, flushed to disk, then renamed over `path`, so that a reader sees the old file or
 * the whole new one, never part of it.
 * TODO(lead): switch to tern_shard_write (include/tern/data.h) once src/core has landed. */
static tern_error *write_shard(const char *path, const int32_t *ids, size_t n,
                               size_t vocab_size) {
    if (vocab_size > 65536)
        return tern_errorf("--out: a shard holds 16-bit ids; the vocabulary has %zu", vocab_size);
    if (n > INT32_MAX) return tern_errorf("--out: %zu tokens do not fit a shard", n);
    size_t bytes = 1024 + 2 * n;
    unsigned char *data = calloc(1, bytes);
    if (!data) return tern_errorf("out of memory for the shard");
    uint32_t header[3] = {20240520, 1, (uint32_t)n};
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < 4; b++) data[4 * k + b] = (unsigned char)(header[k] >> (8 * b));
    for (size_t i = 0; i < n; i++) {
        data[1024 + 2 * i] = (unsigned char)(ids[i] & 0xFF);
        data[1024 + 2 * i + 1] = (unsigned char)((ids[i] >> 8) & 0xFF);
    }

    size_t path_len = strlen(path);
    char *temp = malloc(path_len + sizeof ".tmp-XXXXXX");
    if (!temp) {
        free(data);
        return tern_errorf("out of memory");
    }
    memcpy(temp, path, path_len);
    memcpy(temp + path_len, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    tern_error *err = NULL;
    int fd = mkstemp(temp);
    if (fd < 0) {
        err = tern_errorf("--out: cannot create %s: %s", temp, strerror(errno));
        goto done;
    }
    mode_t mask = umask(0); /* mkstemp makes the file 0600; give it the usual 0666 & ~umask */
    umask(mask);
    err = write_all(fd, data, bytes);
    if (!err && fchmod(fd, 0666 & ~mask) != 0) err = tern_errorf("%s", strerror(errno));
    if (!err && fsync(fd) != 0) err = tern_errorf("%s", strerror(errno));
    if (close(fd) != 0 && !err) err = tern_errorf("%s", strerror(errno));
    if (!err && rename(temp, path) != 0) err = tern_errorf("%s", strerror(errno));
    if (err) {
        unlink(temp);
        err = tern_error_wrap(err, "--out: writing %s", path);
        goto done;
    }
    /* Make the rename itself durable: fsync the folder (best effort). */
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    int dir_fd = dir ? open(dir, O_RDONLY) : -1;
    if (dir_fd >= 0) {
        (void)fsync(dir_fd);
        close(dir_fd);
    }
    free(dir);
done:
    free(temp);
    free(data);
    return err;
}

int tern_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *out_path = NULL;
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
                   cli_option(argc, argv, &i, "--out", &out_path, &err)) {
            if (err) return cli_fail(tern_error_wrap(err, "tokenize"));
        } else {
            return cli_fail(tern_errorf("tokenize: unknown option '%s' (try 'tern tokenize "
                                        "--help')", argv[i]));
        }
    }
    if (decode && out_path)
        return cli_fail(tern_errorf("tokenize: --out writes ids; it does not go with --decode"));

    tern_tokenizer *tok = NULL;
    char *input = NULL;
    size_t input_len = 0;
    int32_t *ids = NULL;
    size_t count = 0;
    char *text = NULL;
    size_t text_len = 0;
    tern_error *err = load_tokenizer(model, &tok);
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
            err = write_shard(out_path, ids, count, tern_tokenizer_vocab_size(tok));
            if (!err) printf("wrote %zu tokens to %s\n", count, out_path);
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
