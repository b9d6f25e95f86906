/* 64-bit hashing for kernel identity and cache keys. */
#ifndef TERN_KERNEL_HASH_H
#define TERN_KERNEL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_SEED 0xcbf29ce484222325ull

/* Continues hash h over n bytes (FNV-1a, then a final avalanche in hash_finish). */
uint64_t hash_bytes(uint64_t h, const void *data, size_t n);
uint64_t hash_str(uint64_t h, const char *s); /* includes the terminator */
uint64_t hash_u64(uint64_t h, uint64_t x);
uint64_t hash_finish(uint64_t h);

#endif
