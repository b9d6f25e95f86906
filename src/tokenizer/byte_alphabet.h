/* GPT-2's byte alphabet: vocab.json and merges.txt spell each byte as a printable Unicode
 * character, so that tokens are readable and contain no spaces or control characters.
 * Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves (as the code points of
 * the same value); the 68 others (0x00-0x20, 0x7F-0xA0, 0xAD), in increasing order, are
 * U+0100 to U+0143. */
#ifndef TERN_TOKENIZER_BYTE_ALPHABET_H
#define TERN_TOKENIZER_BYTE_ALPHABET_H

#include <stdint.h>

/* The byte that code point cp spells, or -1 if cp is not in the alphabet. */
int tern_byte_of_char(uint32_t cp);

#endif
