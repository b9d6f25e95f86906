/* The Unicode data for NFC (nfc.c), generated into nfc_tables.c by gen/gen_nfc_tables.py.
 * Each table is sorted by its first column. */
#ifndef TERN_TOKENIZER_NFC_TABLES_H
#define TERN_TOKENIZER_NFC_TABLES_H

#include <stddef.h>
#include <stdint.h>

/* Full canonical decompositions (Hangul excluded): {code point, offset, length} into the
 * pool. */
extern const uint32_t tern_nfc_decomp[][3];
extern const size_t tern_nfc_decomp_count;
extern const uint32_t tern_nfc_pool[];
/* Non-zero canonical combining classes: {first, last, class} ranges. */
extern const uint32_t tern_nfc_ccc[][3];
extern const size_t tern_nfc_ccc_count;
/* Primary composites (Hangul excluded): {first, second, composite}, sorted by the pair. */
extern const uint32_t tern_nfc_compose[][3];
extern const size_t tern_nfc_compose_count;

#endif
