/* The emitters' shared machinery, private to src/dsl/emit_*.c.
 *
 * emit_common.c walks the IR once and writes C-family source: every statement in trace
 * order, blocks as blocks, and each single-use pure value folded into the expression that
 * uses it (so `tern_store(y, i, tern_mul(tern_load(x, i), a))` reads `y[i] = x[i] * a;`).
 * A value stays a named declaration when the user named it, when it is used more than
 * once or in another block, or when folding it would move a memory read past a statement
 * with effects. Everything that differs between CUDA, OpenCL and Metal goes through the
 * dialect table. */
#ifndef TERN_KERNEL_EMIT_H
#define TERN_KERNEL_EMIT_H

#include "dsl/ir.h"
#include "dsl/strbuf.h"

typedef struct emitter emitter;

/* Prelude helpers a kernel needed (emitter.need), written before the kernel. */
enum {
    NEED_BF16 = 1 << 0,
    NEED_F16 = 1 << 1,
    NEED_F32_BITS = 1 << 2,
    NEED_LOCAL_INDEX = 1 << 3,
    NEED_ERF = 1 << 4,
    NEED_ATOMIC_F32 = 1 << 5,
    NEED_ATOMIC_CAS = 1 << 6,
    NEED_MMA = 1 << 7,
    NEED_WAIT_PREVIOUS = 1 << 8,
    NEED_PREFETCH = 1 << 9,
    NEED_COPY_ASYNC = 1 << 10,
    NEED_WGMMA = 1 << 11, /* tern_wg_at (and CUDA's tern_wg_desc) */
    NEED_PIPE = 1 << 12,  /* CUDA's mbarrier helpers (emit_pipe.c) */
    NEED_COPY_TILE = 1 << 13, /* CUDA's tensor maps and tile copies (emit_pipe.c) */
    NEED_STORE_BULK = 1 << 14, /* CUDA's bulk stores (emit_store_bulk.c) */
};

/* Sizes of the spelling tables (tern_op1 and tern_op2 end with TERN_ISINF and TERN_LOR). */
#define EMIT_OP1_COUNT (TERN_ISINF + 1)
#define EMIT_OP2_COUNT (TERN_LOR + 1)

/* One SIMD helper a kernel needs: operation and operand type (emitter.simd_need). */
#define EMIT_SIMD_TYPES TERN_TYPE_COUNT

typedef struct dialect {
    tern_target target;
    /* The spellings where the dialect differs from the C-family defaults (emit_common.c,
     * OpenCL C's); a NULL entry takes the default. Read through emit_type, emit_math1 and
     * emit_math2. */
    const char *types[TERN_TYPE_COUNT]; /* a value or storage type */
    const char *math1[EMIT_OP1_COUNT];  /* the function of a float math operation (exp, ...) */
    const char *math2[EMIT_OP2_COUNT];  /* float min, max, pow, rem */
    const char *u32_suffix, *i64_suffix, *u64_suffix;
    const char *fma_name;
    /* int min/max/abs (the name of an overloaded function) */
    const char *imin, *imax;
    /* writes a conversion of expression x (already parenthesised as needed) */
    void (*cast)(emitter *e, strbuf *out, int from, int to, const char *x);
    void (*bitcast)(emitter *e, strbuf *out, int from, int to, const char *x);
    /* a thread attribute's expression */
    void (*thread)(emitter *e, strbuf *out, tern_thread_attr attr, int dim);
    /* statements */
    void (*vload)(emitter *e, int32_t ins);
    void (*vstore)(emitter *e, int32_t ins);
    void (*atomic)(emitter *e, int32_t ins);
    void (*simd)(emitter *e, int32_t ins);
    void (*mma)(emitter *e, int32_t ins);
    void (*load_matrix)(emitter *e, int32_t ins);
    void (*wgmma)(emitter *e, int32_t ins);
    void (*wgmma_wait)(emitter *e, int32_t ins); /* NULL: products are made at once (a comment) */
    void (*print)(emitter *e, int32_t ins);
    const char *barrier;
    const char *fence; /* tern_fence_device: a device-scope memory fence */
    /* the kernel's head (through the opening brace), its prologue and its threadgroup
     * array declarations */
    void (*head)(emitter *e, strbuf *out);
    void (*shared)(emitter *e, strbuf *out, int32_t buf);
    /* the helpers named in e->need / e->simd_need */
    void (*prelude)(emitter *e, strbuf *out);
    /* tern_wait_previous and tern_prefetch statements; NULL where the target has nothing for
     * them (launches run in order; no prefetch): the statement becomes a comment */
    void (*wait_previous)(emitter *e, int32_t ins);
    void (*prefetch)(emitter *e, int32_t ins);
    /* tern_copy_async and its commit and wait; commit and wait NULL where the copy is made at
     * once (then they are comments) */
    void (*copy_async)(emitter *e, int32_t ins);
    void (*copy_commit)(emitter *e, int32_t ins);
    void (*copy_wait)(emitter *e, int32_t ins);
    /* tern_copy_tile (emit_copy_tile_loop where the target has no tensor copies) */
    void (*copy_tile)(emitter *e, int32_t ins);
    /* tern_store_bulk; its commit, wait and fence (NULL where the store is made at once:
     * then they are comments) */
    void (*store_bulk)(emitter *e, int32_t ins);
    void (*store_bulk_sync)(emitter *e, int32_t ins);
    /* a pipe's region (IR_IF_PIPE) as the target runs it on its own, returning the region's
     * END; NULL: the region is a block whose roles run in lockstep, barriers between */
    int32_t (*pipe)(emitter *e, int32_t ins);
} dialect;

struct emitter {
    const tern_kernel *k;
    const dialect *d;
    strbuf body;           /* the statements, written first */
    int indent;
    int body_line;         /* lines written to body so far */
    int32_t *line_ins;     /* body line -> instruction (-1 none) */
    int32_t cap_lines;
    char **val_name;       /* a declared value's name (NULL: folded or unnamed yet) */
    char **var_name;
    char **buf_name;
    int32_t *use_count;
    int32_t *use_ins;      /* the (last) instruction using each value */
    int32_t *block_of;     /* per instruction: the block it is in (opening instruction) */
    bool *fold;            /* value is folded into its use */
    bool *reads_state;     /* value (with what is folded into it) reads memory or a variable */
    char **names;          /* every name taken, for uniqueness */
    int32_t nnames, cap_names;
    uint32_t need;
    uint32_t simd_need[TERN_SIMD_ALL + 1]; /* bit t: helper for type t */
    tern_error *err;
    /* CUDA: for a value read as one half of a 32-bit word of a bf16 vector load, that word's
     * expression (NULL for other values) and the half (0 low, 1 high). A pair of such values
     * stored to bf16 or multiplied on the tensor cores moves as bits instead of through f32
     * and back (emit_cuda.c). */
    char **bf16_word;
    unsigned char *bf16_half;
    /* CUDA: f32 pairs rounded to bf16 for the tensor cores, declared once and reused by the
     * products that follow in the same block: indexed by the pair's first value, the name
     * (NULL: none), the second value and the block. */
    const char **bf16_pack;
    int32_t *bf16_pack_hi, *bf16_pack_block;
    bool *simple_while; /* per WHILE: its header is written at its test */
};

/* Writes one line of the body from a format, attributed to instruction i (a line too long
 * for its buffer fails the emission). */
void emit_linef(emitter *e, int32_t i, const char *fmt, ...) TERN_PRINTF(3, 4);

/* Writes instruction i's statement (a block's opening or closing line for one that opens or
 * closes one). */
void emit_statement(emitter *e, int32_t i);

/* CUDA's pipes (emit_pipe.c): the region opened at instruction `region`, returning its END,
 * and the helpers it needs (NEED_PIPE). */
int32_t emit_cuda_pipe(emitter *e, int32_t region);
void emit_cuda_pipe_helpers(const emitter *e, strbuf *out);
/* CUDA's tern_copy_tile (emit_pipe.c): on sm_90 the tensor copies of the producer's first
 * thread onto the produce block's mbarrier, below it the producer's cp.async loop. */
void emit_cuda_copy_tile(emitter *e, int32_t i);

/* Dialect d's spelling of type t, math operation op (one operand) and op (two). */
const char *emit_type(const dialect *d, int t);
const char *emit_math1(const dialect *d, tern_op1 op);
const char *emit_math2(const dialect *d, tern_op2 op);

/* Emits k for dialect d: the whole source in *out; *line_ins / *nlines (may be NULL) map
 * each output line (1-based index) to the instruction it came from, or -1. */
tern_error *emit_source(const tern_kernel *k, const dialect *d, char **out, int32_t **line_ins,
                        int32_t *nlines);

extern const dialect emit_cuda_dialect;
extern const dialect emit_opencl_dialect;
extern const dialect emit_metal_dialect;
const dialect *emit_dialect(tern_target t);

/* ---- helpers for the dialects (emit_common.c) ---- */

/* An expression for value v (its name, a literal, or the folded expression). */
void emit_expr(emitter *e, strbuf *out, int32_t v);
/* The same, parenthesised unless it is a name, a literal or a call. */
void emit_operand(emitter *e, strbuf *out, int32_t v);
/* A new line at the current indentation, mapped to instruction `ins`. */
void emit_line_start(emitter *e, int32_t ins);
/* Ends the current line. */
void emit_line_end(emitter *e);
/* Starts "type name = " for the value defined by ins (declares its name). */
void emit_decl(emitter *e, int32_t v);
/* The same when v is used; nothing when the statement's result is thrown away. */
void emit_decl_if_used(emitter *e, int32_t v);
/* The declared name of value v (made on first call). */
const char *emit_val_name(emitter *e, int32_t v);
/* A buffer's expression for element index (expression idx): name[idx]. */
void emit_elem(emitter *e, strbuf *out, int32_t buf, int32_t idx);
/* Storage to value conversion of expression x for element type elem, and back. */
void emit_from_storage(emitter *e, strbuf *out, int elem, const char *x);
void emit_to_storage(emitter *e, strbuf *out, int elem, const char *x);
/* A new unique name based on `base`. */
const char *emit_unique(emitter *e, const char *base);
/* The helpers every target shares (f16/bf16 conversions, float bits), written in C that
 * CUDA, OpenCL and Metal all accept given the target's TERN_FN, TERN_AS_FLOAT and
 * TERN_AS_UINT macros, which the dialect's prelude defines first. */
void emit_common_prelude(emitter *e, strbuf *out);
/* Whether any of those helpers is needed (else the macros are left out too). */
bool emit_needs_common(const emitter *e);
/* The suffix naming a SIMD helper's type: "f32", "i32", ... */
const char *emit_type_suffix(int t);
/* A printf statement for print instruction i (CUDA and OpenCL): 64-bit conversions as
 * given; floats passed as double when promote_float. */
void emit_print_call(emitter *e, int32_t i, const char *i64_conv, const char *u64_conv,
                     bool promote_float);
/* An MMA statement: "const float4 v<dst> = tern_mma_bf16(a0, .., c3[, extra_arg]);", its
 * four results named as the vector's fields; sets NEED_MMA (the dialect writes the helper).
 * With `pair`, the twelve multiplicands are written as six pairs (a0 a1, .., b2 b3) by it. */
typedef void (*emit_pair_fn)(emitter *e, strbuf *out, int32_t lo, int32_t hi);
void emit_mma_call(emitter *e, int32_t i, const char *extra_arg, emit_pair_fn pair);
/* tern_load_matrix as shuffles and loads (OpenCL, Metal): lane is the lane's expression,
 * shuffle a printf format of the value and the lane (ints) giving that lane's value. */
void emit_load_matrix_gather(emitter *e, int32_t i, const char *lane, const char *shuffle);
/* tern_wgmma_bf16 (emit_wgmma.c). CUDA: wgmma.mma_async where compiled for sm_90a, else the
 * fallback; OpenCL and Metal: the fallback, tern_mma_bf16 tiles per SIMD group, whose helper
 * takes mma_extra last. emit_wgmma_fallback writes the fallback's block for accumulators
 * `acc` (packed: the helper takes bf16 pairs as words, as CUDA's does). */
void emit_cuda_wgmma(emitter *e, int32_t i);
/* CUDA: a bf16 pair (lo in the low half) as a 32-bit word, moved as bits where it can be. */
void emit_cuda_bf16_pair(emitter *e, strbuf *out, int32_t lo, int32_t hi);
void emit_cuda_wgmma_wait(emitter *e, int32_t i);
void emit_wgmma_emulated(emitter *e, int32_t i, const char *mma_extra);
void emit_wgmma_fallback(emitter *e, int32_t i, const char *acc, bool packed, const char *mma_extra);
/* A statement that does nothing on this target, as the comment "/<star> what: why <star>/". */
void emit_comment_statement(emitter *e, int32_t i, const char *what, const char *why);
/* "&buf[index]" of a prefetch statement, into out. */
void emit_prefetch_address(emitter *e, strbuf *out, int32_t i);
/* tern_copy_async as an immediate copy (OpenCL, Metal): one 4-, 8- or 16-byte load and store
 * through uint / uint2 / uint4 pointers in the given address spaces ("__local", ...). */
void emit_copy_at_once(emitter *e, int32_t i, const char *dst_space, const char *src_space);
/* tern_copy_tile as the producer's threads' own copies (OpenCL, Metal, CUDA below sm_90): a
 * loop over the box's 16-byte pieces, each written by `move` from the addresses of its two
 * ends ("&tile[...]", "&src[...]"). */
typedef void (*emit_move_fn)(strbuf *out, const char *dst, const char *src);
void emit_copy_tile_loop(emitter *e, int32_t i, emit_move_fn move);
/* tern_store_bulk as an immediate copy (OpenCL, Metal): a loop of 16-byte loads and stores
 * through uint4 pointers in the given address spaces ("__global", "__local", ...). */
void emit_store_bulk_at_once(emitter *e, int32_t i, const char *dst_space, const char *src_space);
/* CUDA's bulk store statements and their helpers (emit_store_bulk.c). */
void emit_cuda_store_bulk(emitter *e, int32_t i);
void emit_cuda_store_bulk_sync(emitter *e, int32_t i);
void emit_cuda_store_bulk_helpers(const emitter *e, strbuf *out);
/* The number of bytes copy instruction i moves. */
int emit_copy_bytes(const emitter *e, int32_t i);
/* Whether a user name must be renamed (a keyword or builtin of some target). */
bool emit_reserved(const char *name);
/* Whether a kernel name clashes with a keyword, builtin or tern's own helpers. */
bool emit_reserved_kernel_name(const char *name);

#endif
