/* The regex of a tokenizer.json `Split` pre-tokenizer, run by PCRE2.
 *
 * The pattern is compiled once, at load, with its letter, number and white-space classes
 * (\p{L}, \p{N}, \s and their negations) spelled out as code point ranges from
 * unicode_classes.h: Hugging Face's engine (Oniguruma) has the same Unicode version as
 * those tables, while the installed PCRE2 may have an older one (docs/tokenizer.md). Other
 * classes (\p{Lu}, \w, \d, ...) are PCRE2's own, with Unicode semantics (PCRE2_UCP).
 *
 * Matching follows Hugging Face's find_matches: the text is tiled by spans, each a match of
 * the pattern or the text between two matches; an empty match right where the previous
 * match ended is skipped (the engine moves on one character). */
#ifndef TERN_TOKENIZER_SPLIT_REGEX_H
#define TERN_TOKENIZER_SPLIT_REGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"

typedef struct tern_split_regex tern_split_regex;

/* Compiles pattern (len bytes); `literal` matches it as plain text (a `String` pattern).
 * A pattern PCRE2 rejects is an error quoting PCRE2's message and the offset. */
tern_error *tern_split_regex_new(const char *pattern, size_t len, bool literal,
                                 tern_split_regex **out);
void tern_split_regex_free(tern_split_regex *re);

/* Per-call matching state (match data, JIT stack, a scratch copy), so that a const
 * tokenizer can be used from several threads. */
typedef struct tern_regex_scratch tern_regex_scratch;
tern_error *tern_regex_scratch_new(const tern_split_regex *re, tern_regex_scratch **out);
void tern_regex_scratch_free(tern_regex_scratch *scratch);

/* One span of s: [start, end), a match of the pattern or not. */
typedef tern_error *(*tern_span_fn)(void *ctx, size_t start, size_t end, bool is_match);

/* Calls emit for each span tiling s[0..n), in order (nothing for n == 0). Ill-formed UTF-8
 * bytes are matched as U+0001 (an "other" character, as the scanners treat them). A match
 * that runs past PCRE2's match limit is an error: a pathological pattern cannot hang. */
tern_error *tern_split_regex_spans(const tern_split_regex *re, tern_regex_scratch *scratch,
                                   const uint8_t *s, size_t n, tern_span_fn emit, void *ctx);

/* Writes pattern with \p{L}, \p{N}, \s, \S, \P{L}, \P{N} replaced by explicit code point
 * classes into a new NUL-terminated string *out (for the compiler; exposed for tests). */
tern_error *tern_regex_spell_classes(const char *pattern, size_t len, char **out,
                                     size_t *out_len);

#endif
