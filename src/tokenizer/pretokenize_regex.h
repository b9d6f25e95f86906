/* GPT-2's pre-tokenization regex run by PCRE2: the reference that the hand-written scanner
 * (pretokenize.h) is checked against, in the tests and by the fuzzer. Slower; not used for
 * encoding. */
#ifndef TERN_TOKENIZER_PRETOKENIZE_REGEX_H
#define TERN_TOKENIZER_PRETOKENIZE_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"

typedef struct tern_regex_pretokenizer tern_regex_pretokenizer;

/* Compiles the regex (JIT-compiled where PCRE2 can). Its letter, number and white-space
 * classes are spelled out as code point ranges read from unicode_classes.h, so that this
 * checks the scanner's logic; the tables are checked against PCRE2's own Unicode
 * properties separately (tests/tokenizer/test_unicode_classes.c). */
tern_error *tern_regex_pretokenizer_new(tern_regex_pretokenizer **out);
void tern_regex_pretokenizer_free(tern_regex_pretokenizer *re);

/* Splits text into pieces: (*ends)[i] is where piece i ends (malloc'd, *count of them).
 * Each ill-formed UTF-8 byte is matched as an "other" character, as the scanner does:
 * PCRE2's own UTF check finds them and they are replaced by '!' (also "other", one byte)
 * in a copy before matching. */
tern_error *tern_regex_pretokenize(const tern_regex_pretokenizer *re, const uint8_t *text,
                                   size_t len, size_t **ends, size_t *count);

#endif
