#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli.h"

const char *cli_default_backend(void) {
    const char *env = getenv("TERN_BACKEND");
    return env && *env ? env : "cpu";
}

const char *cli_backend_on_device(const char *backend, const char *device, char *buf, size_t cap) {
    if (!device) return backend;
    snprintf(buf, cap, "%s%sdevice=%s", backend, strchr(backend, ':') ? "," : ":", device);
    return buf;
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

const char *cli_tokenizer_dir(const char *model_dir) {
    if (model_dir) {
        char vocab[4096], merges[4096], json[4096];
        snprintf(vocab, sizeof vocab, "%s/vocab.json", model_dir);
        snprintf(merges, sizeof merges, "%s/merges.txt", model_dir);
        snprintf(json, sizeof json, "%s/tokenizer.json", model_dir);
        if (is_file(json) || (is_file(vocab) && is_file(merges))) return model_dir;
    }
    const char *env = getenv("TERN_TOKENIZER_DIR");
    if (env && *env) return env;
    /* the source tree's copy, else the installed one (cmake --install) */
    if (is_file(TERN_DEFAULT_TOKENIZER_DIR "/vocab.json")) return TERN_DEFAULT_TOKENIZER_DIR;
    return TERN_INSTALLED_TOKENIZER_DIR;
}

tern_error *cli_open_tokenizer(const char *model_dir, tern_tokenizer **out) {
    if (model_dir) {
        struct stat st;
        if (stat(model_dir, &st) != 0) return tern_errorf("model directory %s: %s", model_dir, strerror(errno));
        if (!S_ISDIR(st.st_mode)) return tern_errorf("model directory %s is not a directory", model_dir);
        char vocab[4096], merges[4096], json[4096];
        snprintf(vocab, sizeof vocab, "%s/vocab.json", model_dir);
        snprintf(merges, sizeof merges, "%s/merges.txt", model_dir);
        snprintf(json, sizeof json, "%s/tokenizer.json", model_dir);
        /* One that is there but no regular file (a FIFO, a folder) is an error, not a reason
         * to take the default tokenizer instead. */
        const char *odd = exists(json) && !is_file(json)       ? json
                          : exists(vocab) && !is_file(vocab)   ? vocab
                          : exists(merges) && !is_file(merges) ? merges : NULL;
        if (odd) return tern_errorf("cannot read %s: not a regular file", odd);
        if (!is_file(json) && is_file(vocab) != is_file(merges))
            return tern_errorf("%s has %s but no %s", model_dir,
                               is_file(vocab) ? "vocab.json" : "merges.txt",
                               is_file(vocab) ? "merges.txt" : "vocab.json");
    }
    return tern_tokenizer_load_dir(cli_tokenizer_dir(model_dir), out);
}
