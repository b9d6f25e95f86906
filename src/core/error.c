#include "tern/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tern_error {
    char *message;
};

/* Returned when the message itself cannot be allocated; never freed. */
static char oom_message[] = "out of memory";
static tern_error out_of_memory = {oom_message};

tern_error *tern_verrorf(const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int len = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (len < 0) return &out_of_memory;
    tern_error *err = malloc(sizeof *err);
    char *message = malloc((size_t)len + 1);
    if (!err || !message) {
        free(err);
        free(message);
        return &out_of_memory;
    }
    vsnprintf(message, (size_t)len + 1, fmt, ap);
    err->message = message;
    return err;
}

tern_error *tern_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tern_error *err = tern_verrorf(fmt, ap);
    va_end(ap);
    return err;
}

tern_error *tern_error_wrap(tern_error *err, const char *fmt, ...) {
    if (!err || err == &out_of_memory) return err;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) return err;
    size_t old = strlen(err->message);
    char *message = malloc((size_t)len + 2 + old + 1);
    if (!message) return err; /* keep the inner message rather than lose it */
    va_start(ap, fmt);
    vsnprintf(message, (size_t)len + 1, fmt, ap);
    va_end(ap);
    memcpy(message + len, ": ", 2);
    memcpy(message + len + 2, err->message, old + 1);
    free(err->message);
    err->message = message;
    return err;
}

const char *tern_error_message(const tern_error *err) {
    return err ? err->message : "success";
}

void tern_error_free(tern_error *err) {
    if (!err || err == &out_of_memory) return;
    free(err->message);
    free(err);
}
