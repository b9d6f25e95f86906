#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tern/gpt2.h"

tern_error *cli_check_stdout(void) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout))
        return tern_errorf("writing the output (stdout): %s", errno ? strerror(errno) : "write error");
    return NULL;
}

int cli_fail(tern_error *err) {
    fprintf(stderr, "tern: error: %s\n", tern_error_message(err));
    tern_error_free(err);
    return 1;
}

tern_error *cli_parse_long(const char *option, const char *text, long min, long max, long *out) {
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (!*text || *end || errno == ERANGE)
        return tern_errorf("%s: '%s' is not an integer", option, text);
    if (value < min || value > max)
        return tern_errorf("%s: %ld is out of range [%ld, %ld]", option, value, min, max);
    *out = value;
    return NULL;
}

tern_error *cli_parse_int(const char *option, const char *text, int min, int max, int *out) {
    long value = 0;
    TERN_TRY(cli_parse_long(option, text, min, max, &value));
    *out = (int)value;
    return NULL;
}

tern_error *cli_parse_u64(const char *option, const char *text, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    if (!*text || *text == '-') return tern_errorf("%s: '%s' is not a non-negative integer", option, text);
    unsigned long long value = strtoull(text, &end, 10);
    if (*end || errno == ERANGE) return tern_errorf("%s: '%s' is not a non-negative integer", option, text);
    *out = (uint64_t)value;
    return NULL;
}

tern_error *cli_parse_float(const char *option, const char *text, double min, double max,
                            float *out) {
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (!*text || *end || errno == ERANGE || !isfinite(value))
        return tern_errorf("%s: '%s' is not a number", option, text);
    if (value < min || value > max)
        return tern_errorf("%s: %g is out of range [%g, %g]", option, value, min, max);
    *out = (float)value;
    return NULL;
}

bool cli_option(int argc, char **argv, int *i, const char *name, const char **value,
                tern_error **err) {
    if (strcmp(argv[*i], name) != 0) return false;
    if (*i + 1 >= argc) {
        *err = tern_errorf("%s needs a value", name);
        return true;
    }
    *value = argv[++*i];
    return true;
}

tern_error *cli_parse_recompute(const char *text, tern_gpt2_memory *memory) {
    bool gelu = false, layernorm = false;
    if (strcmp(text, "none")) {
        for (const char *p = text;;) {
            size_t n = strcspn(p, ",");
            if (n == 4 && !strncmp(p, "gelu", 4)) gelu = true;
            else if (n == 9 && !strncmp(p, "layernorm", 9)) layernorm = true;
            else return tern_errorf("--recompute '%s': none, or gelu and/or layernorm (comma-separated)", text);
            if (!p[n]) break;
            p += n + 1;
        }
    }
    memory->recompute_gelu = gelu;
    memory->recompute_layernorm = layernorm;
    return NULL;
}
