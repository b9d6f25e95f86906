#include "tokenizer/pretokenize.h"

size_t tern_pretokenize_next_piece(const uint8_t *s, size_t n, size_t p) {
    return tern_pretokenize_next(s, n, p);
}
