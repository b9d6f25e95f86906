/* A minimal test harness: each test program calls CHECK* and ends with check_summary(). A
 * failed check prints its location and the test continues, so one run reports every
 * failure; the program exits 1 if any check failed. */
#ifndef TERN_TESTS_CHECK_H
#define TERN_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/error.h"

static int check_failures_;
static int check_count_;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        check_count_++;                                                                  \
        if (!(cond)) {                                                                   \
            check_failures_++;                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
        }                                                                                \
    } while (0)

#define CHECKF(cond, ...)                                                                \
    do {                                                                                 \
        check_count_++;                                                                  \
        if (!(cond)) {                                                                   \
            check_failures_++;                                                           \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

/* Checks that an operation succeeded; on failure prints its message and frees it. */
#define CHECK_OK(expr)                                                                   \
    do {                                                                                 \
        tern_error *check_err_ = (expr);                                                 \
        check_count_++;                                                                  \
        if (check_err_) {                                                                \
            check_failures_++;                                                           \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,         \
                    tern_error_message(check_err_));                                     \
            tern_error_free(check_err_);                                                 \
        }                                                                                \
    } while (0)

/* Checks that an operation failed with a message containing `needle`. */
#define CHECK_ERR(expr, needle)                                                          \
    do {                                                                                 \
        tern_error *check_err_ = (expr);                                                 \
        check_count_++;                                                                  \
        if (!check_err_) {                                                               \
            check_failures_++;                                                           \
            fprintf(stderr, "%s:%d: %s succeeded; expected an error containing '%s'\n",  \
                    __FILE__, __LINE__, #expr, (needle));                                \
        } else {                                                                         \
            if (!strstr(tern_error_message(check_err_), (needle))) {                     \
                check_failures_++;                                                       \
                fprintf(stderr, "%s:%d: %s: error '%s' lacks '%s'\n", __FILE__,          \
                        __LINE__, #expr, tern_error_message(check_err_), (needle));      \
            }                                                                            \
            tern_error_free(check_err_);                                                 \
        }                                                                                \
    } while (0)

/* ||got - want|| / ||want|| over n floats (want's norm floored at 1e-30). */
static inline double check_rel_error(const float *got, const float *want, size_t n) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        if (isnan(got[i])) return INFINITY;
        diff += d * d;
        norm += (double)want[i] * (double)want[i];
    }
    return sqrt(diff) / (norm > 1e-60 ? sqrt(norm) : 1e-30);
}

/* max |got - want| / max(|want|, floor) elementwise. */
static inline double check_max_rel(const float *got, const float *want, size_t n, double floor) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i])) return INFINITY;
        double scale = fabs((double)want[i]);
        if (scale < floor) scale = floor;
        double e = fabs((double)got[i] - (double)want[i]) / scale;
        if (e > worst) worst = e;
    }
    return worst;
}

static inline int check_summary(const char *name) {
    if (check_failures_) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures_, check_count_);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, check_count_);
    return 0;
}

#endif
