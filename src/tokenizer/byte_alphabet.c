#include "tokenizer/byte_alphabet.h"

int tern_byte_of_char(uint32_t cp) {
    if (cp <= 0xFF) {
        int self = (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || cp >= 0xAE;
        return self ? (int)cp : -1;
    }
    /* U+0100 + k is the k-th byte that does not stand for itself: 0x00-0x20 (k = 0..32),
     * 0x7F-0xA0 (k = 33..66), 0xAD (k = 67). */
    uint32_t k = cp - 0x100;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7F + (k - 33));
    if (k == 67) return 0xAD;
    return -1;
}
