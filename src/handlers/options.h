/* Handler options: a handler's tuning is one record (its defaults today's measured choices),
 * filled once when it opens from "key=value,key=value" text: first its one environment
 * variable (TERN_<H>_TUNE, for measurements without rebuilding), then the options open is
 * given (tern_gpt2's "cuda:device=1", the CLI's --device). The record lives in the device;
 * no operation reads the environment. */
#ifndef TERN_HANDLERS_OPTIONS_H
#define TERN_HANDLERS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/error.h"

typedef enum tern_option_kind {
    TERN_OPTION_INT,  /* int in [min, max] */
    TERN_OPTION_BOOL, /* bool: 0 or 1 */
    TERN_OPTION_INT3, /* int[3], written a/b/c, each in [min, max] */
    TERN_OPTION_TEXT, /* char[TERN_OPTION_TEXT_MAX] */
} tern_option_kind;

#define TERN_OPTION_TEXT_MAX 64

/* One key: where its value goes in the record (offsetof), and what it means. */
typedef struct tern_option {
    const char *key;
    tern_option_kind kind;
    size_t offset;
    int min, max;
} tern_option;

/* A record and its keys. */
typedef struct tern_option_set {
    const tern_option *keys;
    size_t count;
    void *record;
} tern_option_set;

/* Applies the text of environment variable `env` (when set) and then `options` (NULL or "":
 * none) to the sets; a key that no set has, or a bad value, is an error naming the handler,
 * the source and the key, e.g. "cuda: TERN_CUDA_TUNE: unknown option 'gemvv' (known: ...)". */
tern_error *tern_options_apply(const char *handler, const char *env, const char *options,
                               const tern_option_set *sets, size_t count) TERN_MUST_USE;

#endif
