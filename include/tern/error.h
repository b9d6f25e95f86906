/* Errors as values.
 *
 * Every operation that can fail returns a `tern_error *`: NULL on success, otherwise an
 * error that owns a one-line message. The caller either handles it (and frees it with
 * tern_error_free) or returns it to its own caller, usually with context prepended by
 * tern_error_wrap. Nothing in the library aborts or exits on a failure. */
#ifndef TERN_ERROR_H
#define TERN_ERROR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_error tern_error;

#if defined(__GNUC__)
#define TERN_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#define TERN_MUST_USE __attribute__((warn_unused_result))
#else
#define TERN_PRINTF(fmt_index, first_arg)
#define TERN_MUST_USE
#endif

/* Messages are one printable line: control characters (newlines included), bytes that are
 * not UTF-8 and non-printing Unicode controls in the formatted text are escaped (\n, \t,
 * \xNN), so a path or argument echoed in an error cannot break the line or drive the
 * terminal. Printable text is left as it is (so escaping twice changes nothing). */
char *tern_printable_copy(const char *text); /* the same escaping; free() it; NULL: no memory */

/* A new error with a printf-formatted message. Never returns NULL: if memory for the
 * message cannot be had, a static "out of memory" error is returned instead. */
tern_error *tern_errorf(const char *fmt, ...) TERN_PRINTF(1, 2) TERN_MUST_USE;
tern_error *tern_verrorf(const char *fmt, va_list ap) TERN_MUST_USE;

/* Prepends "context: " to err's message and returns it. Returns NULL when err is NULL, so
 * it can wrap a call directly: return tern_error_wrap(load(...), "loading %s", path); */
tern_error *tern_error_wrap(tern_error *err, const char *fmt, ...) TERN_PRINTF(2, 3);

const char *tern_error_message(const tern_error *err);
void tern_error_free(tern_error *err);

/* Returns from the enclosing function with the error of `expr`, if any. For functions that
 * own nothing that needs freeing; others use `goto` to a cleanup label. */
#define TERN_TRY(expr)                                                                 \
    do {                                                                               \
        tern_error *tern_try_err_ = (expr);                                            \
        if (tern_try_err_) return tern_try_err_;                                       \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
