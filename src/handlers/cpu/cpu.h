/* The cpu handler's private pieces: its device, scratch memory, element access and the
 * dtype conversions every operation uses to load into f32 and store back. Only sources in
 * src/handlers/cpu/ include this. */
#ifndef TERN_HANDLERS_CPU_CPU_H
#define TERN_HANDLERS_CPU_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "handlers/cpu/kernels.h"
#include "handlers/handler.h"
#include "handlers/validate.h"
#include "tern/half.h"

/* A cpu device. Buffers are host memory; the device owns the OpenMP thread count its
 * operations use and one growable scratch area. A device is used by one host thread at a
 * time (operations are synchronous, so sync is a no-op). */
/* The cpu handler's options ("cpu:key=value"; no environment variable). */
typedef struct cpu_tune {
    int replay_steps; /* replay_steps: the replay_steps op's answer (1). cpu replays nothing,
                       * so more only hands a loop's results over in bursts: for tests of
                       * the models' sections on the fast handler */
} cpu_tune;

struct tern_dev {
    int threads;             /* OpenMP threads per operation (OMP_NUM_THREADS at open) */
    const cpu_kernels *kern; /* the matmul kernels: the process's choice (isa.c) */
    char model[96];          /* "AMD EPYC 9R14" */
    char name[192];          /* "AMD EPYC 9R14, 2 threads, avx2 kernels" */
    unsigned char *scratch; /* 64-byte aligned, grown on demand, never shrunk */
    size_t scratch_size;
    unsigned char *temp[2]; /* the same, for a composed matmul's temporaries (cpu_temp's slots) */
    size_t temp_size[2];
    bool download_pending;   /* a download_async (made at once) not yet waited for */
    cpu_tune tune;           /* the options given at open */
};

/* Writes d->name from its model, thread count and kernels (device.c). */
void cpu_device_name_update(tern_dev *d);

/* The bodies of the operations, cpu_<op>, declared from the op list: entries.c generates
 * the entry points tern_cpu_<op> around them (src/handlers/seam.h). */
#define CPU_DECLARE_BODY_(name, params, args) tern_error *cpu_##name params;
TERN_OPS_SEAM(CPU_DECLARE_BODY_)
#undef CPU_DECLARE_BODY_

/* Scratch memory of at least `bytes` bytes, 64-byte aligned, valid until the next call on
 * this device (an operation takes it once and carves it up with cpu_carve). */
tern_error *cpu_scratch(tern_dev *d, size_t bytes, void **out);

/* A buffer of len elements of dtype in memory apart from the scratch (so the operations run
 * on it may take scratch), valid until the next cpu_temp of the same slot (tern_temp_slot:
 * matmul's SWIGLU epilogue, its normalising prologue). */
tern_error *cpu_temp(tern_dev *d, int slot, tern_dtype dtype, size_t len, tern_buf *out);

/* Rounds up to a multiple of 64 bytes, the alignment of every carved piece. */
static inline size_t cpu_round64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Takes `bytes` from *cursor (64-byte aligned) and advances it. */
static inline void *cpu_carve(unsigned char **cursor, size_t bytes) {
    void *p = *cursor;
    *cursor += cpu_round64(bytes);
    return p;
}

/* The address of element 0 of a view (of a q8_0 view: of its first block). */
static inline void *cpu_ptr(tern_buf b) {
    return (unsigned char *)b.mem + tern_dtype_bytes(b.dtype, b.offset);
}

/* The address of element i of a view (q8_0: i at a block's start, the block's address). */
static inline void *cpu_at(tern_buf b, size_t i) {
    return (unsigned char *)b.mem + tern_dtype_bytes(b.dtype, b.offset + i);
}

/* ---- conversions (convert.c), vectorised ---- */

/* n floats of dtype `dtype` (f32, bf16, f16, or q8_0 from a block's start with n a multiple
 * of 32: dequantized) at src into f32 at dst. */
void cpu_to_f32(float *dst, const void *src, tern_dtype dtype, size_t n);

/* n f32 at src into dtype `dtype` (f32, bf16 or f16) at dst, rounding to nearest even; or
 * into q8_0 blocks (n a multiple of 32: quantized as effect.h says). */
void cpu_from_f32(void *dst, tern_dtype dtype, const float *src, size_t n);

/* q8_0 blocks (q8.c): n / 32 blocks at dst from n floats (n a multiple of 32). */
void cpu_q8_quantize(void *dst, const float *src, size_t n);

/* A view of a float row as f32: elements [start, start + n) of b. When b is f32 this is the
 * row itself (no copy); otherwise the row is converted into tmp, which is returned. */
static inline const float *cpu_row_in(tern_buf b, size_t start, size_t n, float *tmp) {
    if (b.dtype == TERN_F32) return (const float *)cpu_ptr(b) + start;
    cpu_to_f32(tmp, cpu_at(b, start), b.dtype, n);
    return tmp;
}

/* Where to compute a row that will be stored into elements [start, start + n) of b: the row
 * itself when b is f32, else tmp (then call cpu_row_out_done). */
static inline float *cpu_row_out(tern_buf b, size_t start, float *tmp) {
    return b.dtype == TERN_F32 ? (float *)cpu_ptr(b) + start : tmp;
}

/* Stores a row computed into the pointer cpu_row_out gave (a no-op when b is f32). */
static inline void cpu_row_out_done(tern_buf b, size_t start, size_t n, const float *row) {
    if (b.dtype != TERN_F32) cpu_from_f32(cpu_at(b, start), b.dtype, row, n);
}

/* One element of any dtype as a double; one element from a double (floats round to nearest
 * even, integers truncate and saturate, NaN gives 0). memory.c. */
double cpu_get_element(tern_buf a, size_t i);
void cpu_set_element(tern_buf a, size_t i, double v);

/* ---- fast f32 math (fastmath.h) ---- */
#include "fastmath.h"

/* ---- attention over a KV cache, a block of a prompt's queries at a time (attention_block.c,
 * where kern has gemm_f32): q [qb, hs] f32, the queries at positions first .. first + qb - 1,
 * query r seeing keys 0 .. first + r; keys, values [first + qb, hs] f32; o [qb, hs] gets
 * softmax(scale q keys^T, causal) values. s: [qb, first + qb] floats of scratch; pack:
 * CPU_GEMM_F32_SCRATCH(qb) bytes. */
void cpu_attention_block(const cpu_kernels *kern, const float *q, size_t qb, size_t first, const float *keys,
                         const float *values, size_t hs, float scale, float *s, float *o, void *pack);

/* ---- matmul pieces shared by matmul.c and matmul_small.c ---- */

/* Everything a matmul needs once validated. */
typedef struct cpu_mm {
    tern_matmul_dims dims;
    float alpha, beta;
    tern_epilogue epilogue;
    tern_buf c, bias, aux;
    tern_buf a_in, b; /* A and B as given */
    /* A as f32 in its stored layout (transposed when dims.trans_a): entry e starts at
     * a32 + e * a32_stride, rows a32_ld floats apart. NULL until the sgemm path sets it. */
    const float *a32;
    size_t a32_ld, a32_stride;
} cpu_mm;

/* Finishes rows [i0, i1) and columns [j0, j1) of batch entry e whose values are in t (row
 * stride ldt; t holds row i0, column j0 first). When raw, t holds op(A) op(B) only and alpha
 * and beta * C are applied here; otherwise they already are. Then bias, aux, GELU, and the
 * store into C when t is not C itself. */
void cpu_mm_finish(const cpu_mm *mm, int e, int i0, int i1, int j0, int j1, float *t,
                   size_t ldt, bool raw);

/* A of every batch entry as dense f32 in its stored layout (rows a_cols floats apart, entries
 * a_rows * a_cols apart), converted from its dtype: a worksharing loop over the rows, to be
 * called by every thread of a parallel region (matmul.c). */
void cpu_mm_a_to_f32(const cpu_mm *mm, float *a32);

/* The small-m products (m <= CPU_SMALL_M, matmul_small.c): B streamed once. */
tern_error *cpu_matmul_small(tern_dev *d, const cpu_mm *mm);

/* The large-m products on d's own GEMM kernels (matmul_gemm.c): whether they take A and B of
 * these dtypes, and the product. */
bool cpu_matmul_gemm_takes(const tern_dev *d, tern_dtype a, tern_dtype b);
tern_error *cpu_matmul_gemm(tern_dev *d, const cpu_mm *mm);

#endif
