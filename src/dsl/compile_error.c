#include "dsl/compile_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The number right before position `at` in [line, at), written as ":N:" or "(N)". */
static int number_before(const char *line, const char *at) {
    int found = 0;
    for (const char *p = line; p < at; p++) {
        if ((*p == ':' || *p == '(') && p[1] >= '0' && p[1] <= '9') {
            const char *q = p + 1;
            long n = 0;
            while (q < at && *q >= '0' && *q <= '9' && n < 100000000) n = n * 10 + (*q++ - '0');
            if (q < at && (*q == ':' || *q == ')')) {
                found = (int)n;
                break; /* the first one is the line; a second would be the column */
            }
        }
    }
    return found;
}

int compile_log_first_error(const char *log, char *msg, size_t size) {
    if (size) msg[0] = '\0';
    const char *line = log;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *err = NULL;
        for (const char *p = line; p + 6 <= line + len; p++)
            if (!strncmp(p, "error", 5) && (p[5] == ':' || p[5] == ' ')) {
                err = p;
                break;
            }
        if (err) {
            const char *text = err + 5;
            while (*text == ':' || *text == ' ') text++;
            size_t n = (size_t)(line + len - text);
            if (n >= size) n = size ? size - 1 : 0;
            if (size) {
                memcpy(msg, text, n);
                msg[n] = '\0';
            }
            return number_before(line, err);
        }
        line = end ? end + 1 : NULL;
    }
    /* no "error" line: the log's first non-empty line is the best we have */
    line = log;
    while (*line == '\n') line++;
    size_t n = strcspn(line, "\n");
    if (n >= size) n = size ? size - 1 : 0;
    if (size) {
        memcpy(msg, line, n);
        msg[n] = '\0';
    }
    return 0;
}

tern_error *compile_error(const tern_kernel *k, const char *target, const char *log,
                          const int32_t *lines, int32_t nlines) {
    char msg[256];
    int line = compile_log_first_error(log ? log : "", msg, sizeof msg);
    int32_t ins = -1;
    /* the nearest statement at or above the line */
    for (int32_t l = line; lines && l > 0 && l <= nlines && ins < 0; l--) ins = lines[l];
    if (ins < 0)
        return tern_errorf("kernel '%s': the %s compiler failed: %s", k->name, target,
                           msg[0] ? msg : "(no log)");
    char what[160], where[128];
    return tern_errorf("kernel '%s': the %s compiler failed on statement '%s' (%s): %s", k->name,
                       target, ir_describe(k, ins, what, sizeof what),
                       ir_where(k, ins, where, sizeof where), msg[0] ? msg : "(no log)");
}
