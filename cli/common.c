#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli.h"

const char *cli_default_backend(void) {
    const char *env = getenv("TERN_BACKEND");
    return env && *env ? env : "cpu";
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

const char *cli_tokenizer_dir(const char *model_dir) {
    if (model_dir) {
        char vocab[4096], merges[4096];
        snprintf(vocab, sizeof vocab, "%s/vocab.json", model_dir);
        snprintf(merges, sizeof merges, "%s/merges.txt", model_dir);
        if (is_file(vocab) && is_file(merges)) return model_dir;
    }
    const char *env = getenv("TERN_TOKENIZER_DIR");
    return env && *env ? env : TERN_DEFAULT_TOKENIZER_DIR;
}

tern_error *cli_open_tokenizer(const char *model_dir, tern_tokenizer **out) {
    return tern_tokenizer_load_dir(cli_tokenizer_dir(model_dir), out);
}
