/* The kernel IR: what a trace records, private to src/dsl/.
 *
 * A kernel is a flat list of instructions with structured markers (IF ... ELSE ... END,
 * FOR ... END, WHILE ... WHILE_TEST ... END), appended in trace order. Each instruction
 * that produces a value defines one SSA value id (VLOAD defines `width` consecutive ids, MMA
 * four);
 * operands are value ids, except where an opcode says otherwise (buffer ids, variable
 * ids). A value is visible in the block that defines it and in blocks nested in it.
 * Constants are CONST instructions; emitters print them inline. */
#ifndef TERN_KERNEL_IR_H
#define TERN_KERNEL_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tern/kernel.h"

/* tern_v.kind */
enum {
    TERN_V_NONE = 0, /* a zero-initialised tern_v: an error to use */
    TERN_V_VALUE,    /* id: value id */
    TERN_V_VAR,      /* id: variable id */
    TERN_V_BUF,      /* id: buffer id (parameter or threadgroup array) */
    TERN_V_CONST,    /* no kernel; the constant in c */
    TERN_V_POISON,   /* a constant whose folding failed: op, type (a), c.i (b), id (line) */
};

typedef enum ir_op {
    IR_CONST,      /* dst = imm (type) */
    IR_PARAM,      /* dst = scalar parameter imm */
    IR_THREAD,     /* dst = thread attribute aux (tern_thread_attr), dimension imm */
    IR_UNARY,      /* dst = aux (tern_op1) a0 */
    IR_BINARY,     /* dst = a0 aux (tern_op2) a1 */
    IR_SELECT,     /* dst = a0 ? a1 : a2 */
    IR_FMA,        /* dst = a0 * a1 + a2 */
    IR_CAST,       /* dst = (type) a0 */
    IR_BITCAST,    /* dst = bits of a0 as type */
    IR_VAR_DECL,   /* variable a0 = a1 */
    IR_VAR_READ,   /* dst = variable a0 */
    IR_ASSIGN,     /* variable a0 = a1 */
    IR_LOAD,       /* dst = buffer a0 [a1] */
    IR_STORE,      /* buffer a0 [a1] = a2 */
    IR_VLOAD,      /* dst .. dst+aux-1 = buffer a0 [a1 .. a1+aux-1] */
    IR_VSTORE,     /* buffer a0 [a1 .. a1+aux-1] = extra[a2 .. a2+aux-1] */
    IR_ATOMIC,     /* dst = old buffer a0 [a1]; aux (tern_atomic_op) with a2 */
    IR_ATOMIC_CAS, /* dst = old buffer a0 [a1]; if old == a2: = a3 */
    IR_BARRIER,
    IR_SIMD,       /* dst = aux (tern_simd_op) of a0, with a1 */
    IR_MMA,        /* dst .. dst+3 = mma_bf16(a: extra[a0 .. a0+7], b: +8 .. +11, c: +12 .. +15) */
    IR_PRINT,      /* format: string imm; values extra[a0 .. a0+a1-1] */
    IR_IF,         /* if (a0) */
    IR_ELSE,
    IR_END,        /* closes IF, FOR, WHILE */
    IR_FOR,        /* for (dst = a0; dst < a1; dst += a2) */
    IR_WHILE,      /* while (true) { condition instructions ... */
    IR_WHILE_TEST, /* ... if (!a0) break; body ... } */
    IR_BREAK,
    IR_CONTINUE,
    IR_EXIT,       /* the thread ends */
    IR_RESULT,     /* a function's result: a0 */
    IR_WAIT_PREVIOUS, /* earlier kernels' results visible from here (tern_wait_previous) */
    IR_PREFETCH,   /* hint: buffer a0 [a1] into L2 */
    IR_LOAD_MATRIX, /* dst .. dst+7 = tern_load_matrix of threadgroup buffer a0, this lane's row
                     * at a1; aux 1: transposed */
    IR_FENCE,      /* device-scope memory fence (tern_fence_device) */
    IR_COPY_ASYNC, /* threadgroup buffer a0 [a1 .. a1+aux-1] = device buffer a2 [a3 .. a3+aux-1],
                    * asynchronously (tern_copy_async) */
    IR_COPY_COMMIT, /* closes this thread's batch of asynchronous copies */
    IR_COPY_WAIT,  /* waits until at most aux of this thread's batches are in flight */
    IR_WGMMA,      /* dst .. dst+n/2-1 = tern_wgmma_bf16 (ir_wg_* below): operands in extra from
                    * a0, a1 A's tile buffer or -1 (A in registers), a2 B's tile buffer; aux 1:
                    * tern_wgmma_bf16_async, the accumulators variables (no results) */
    IR_WGMMA_WAIT, /* tern_wgmma_wait: at most aux asynchronous products in flight; the
                    * accumulator variables it completes in extra[a0 .. a0+a1-1] */
    IR_COPY_TILE,  /* tern_copy_tile: threadgroup buffer a0's tile at a1 = the box of rows from
                    * a2, columns from a3 of a matrix (ir_tile_unpack(imm)); aux the pipe's
                    * producer_first (its producer is the threads from aux * 128 on) */
    IR_STORE_BULK, /* device buffer a0 [a1 .. a1+n-1] = threadgroup buffer a2 [a3 .. a3+n-1],
                    * asynchronously (tern_store_bulk); n the value imm */
    IR_STORE_BULK_COMMIT, /* closes this thread's batch of bulk stores */
    IR_STORE_BULK_WAIT,   /* waits until at most aux of this thread's batches still read their sources */
    IR_STORE_BULK_FENCE,  /* this thread's threadgroup writes ordered before later bulk stores */
    IR_OP_COUNT
} ir_op;

typedef struct ir_ins {
    uint8_t op;
    uint8_t type; /* result type, TERN_T_VOID if none */
    uint8_t aux;
    uint8_t pad_;
    int32_t dst;  /* value defined, or -1 */
    int32_t a[4];
    int64_t imm;  /* CONST bits (i64 / u64, or a double's bits for f32), or an index */
    int32_t file; /* string id of the C source file, or -1 */
    int32_t line;
} ir_ins;

typedef struct ir_value {
    uint8_t type;
    int32_t def;   /* defining instruction */
    int32_t name;  /* string id, or -1 */
    int32_t block; /* the instruction opening the block that defines it; -1: top level */
} ir_value;

typedef struct ir_var {
    uint8_t type;
    int32_t name;
    int32_t block; /* as ir_value.block */
} ir_var;

/* A buffer: a parameter or a threadgroup array. */
typedef struct ir_buf {
    uint8_t elem;
    uint8_t intent;  /* tern_intent; threadgroup arrays are READ_WRITE */
    bool shared;
    int32_t name;
    int32_t param;   /* parameter index, or -1 */
    size_t count;    /* threadgroup arrays: elements */
    size_t offset;   /* threadgroup arrays: byte offset in the group's memory */
    uint32_t used;   /* IR_BUF_LOADED / STORED / ATOMIC / COPIED, for emitters' declarations */
} ir_buf;
/* IR_BUF_COPIED: the destination of an asynchronous copy, which needs the array aligned to
 * 16 bytes (emitters declare it so; a target only promises its element type's alignment) */
/* IR_BUF_TILES: a tern_shared_tiles array, aligned to 1,024 bytes (its offset, and emitters'
 * declarations) */
enum { IR_BUF_LOADED = 1, IR_BUF_STORED = 2, IR_BUF_ATOMIC = 4, IR_BUF_COPIED = 8, IR_BUF_TILES = 16 };

typedef struct ir_param {
    bool is_buf;
    uint8_t type;   /* scalar type, or the buffer's element type */
    uint8_t intent;
    int32_t name;
    int32_t id;     /* buffer id, or value id of the scalar */
} ir_param;

/* Features a kernel uses (tern_kernel.uses). */
enum {
    IR_USES_BARRIER = 1 << 0,
    IR_USES_SIMD = 1 << 1,
    IR_USES_ATOMIC = 1 << 2,
    IR_USES_PRINT = 1 << 3,
    IR_USES_SHARED = 1 << 4,
    IR_USES_F16 = 1 << 5,
    IR_USES_BF16 = 1 << 6,
    IR_USES_THREAD = 1 << 7,
    IR_USES_STORE = 1 << 8,
    IR_USES_EXIT = 1 << 9,
    IR_USES_F32_ATOMIC = 1 << 10,
    IR_USES_I64 = 1 << 11,
    IR_USES_WAIT_PREVIOUS = 1 << 12, /* the cuda runtime launches it to overlap the previous kernel */
    IR_USES_FENCE = 1 << 13,
    IR_USES_WGMMA = 1 << 14, /* CUDA on sm_90 compiles it as sm_90a */
    IR_USES_TILE_COPY = 1 << 15, /* tern_copy_tile: the cuda runtime makes tensor maps at launch */
};

/* IR_COPY_WAIT: the largest pending count (PTX wants an immediate, and no pipeline needs more
 * batches in flight than this). */
#define IR_COPY_WAIT_MAX 7

/* IR_MMA: its operands (a, b, c) in extra, its results (the f32 fragment d). */
enum { IR_MMA_OPERANDS = 16, IR_MMA_RESULTS = 4 };

/* IR_WGMMA's shape in imm: n, k, the tiles' rows (A's 0 when A is in registers) and which
 * tiles have k rows. Its operands in extra from a0: A's k/2 registers, or A's tile index
 * (one value); B's tile index; C's n/2 values. Results: D's n/2 values. */
typedef struct ir_wg_shape {
    int n, k, a_rows, b_rows;
    bool a_k_rows, b_k_rows;
} ir_wg_shape;
static inline int64_t ir_wg_pack(ir_wg_shape s) {
    return (int64_t)s.n | (int64_t)s.k << 9 | (int64_t)s.a_rows << 18 | (int64_t)s.b_rows << 30 |
           (int64_t)s.a_k_rows << 42 | (int64_t)s.b_k_rows << 43;
}
static inline ir_wg_shape ir_wg_unpack(int64_t imm) {
    ir_wg_shape s = {(int)(imm & 511), (int)(imm >> 9 & 511), (int)(imm >> 18 & 4095),
                     (int)(imm >> 30 & 4095), (imm >> 42 & 1) != 0, (imm >> 43 & 1) != 0};
    return s;
}
/* How many entries of extra an IR_WGMMA of this shape and A's place has: its value operands
 * (A's registers or tile index, B's tile index, C), then, when asynchronous, instead of C
 * the accumulators' variable ids. ir_wg_values: the value operands alone. */
static inline int ir_wg_operands(ir_wg_shape s, bool a_tile) { return (a_tile ? 1 : s.k / 2) + 1 + s.n / 2; }
static inline int ir_wg_values(ir_wg_shape s, bool a_tile, bool async) {
    return (a_tile ? 1 : s.k / 2) + 1 + (async ? 0 : s.n / 2);
}
/* IR_IF's aux for a warpgroup role's block (tern_role), its warpgroups in imm: first << 16 |
 * count. The condition value says the same; CUDA tests a warp-uniform warpgroup index
 * instead, so that ptxas keeps the role's products in their pipeline. */
#define IR_IF_ROLE 1
/* A pipe (tern_pipe, TERN_PIPE): IR_IF_PIPE opens its region (its condition true; imm the
 * spec, ir_pipe_pack), IR_IF_PRODUCE and IR_IF_CONSUME its producer's and consumers' blocks
 * (conditions as a role's; imm the id of the region's step variable). Each block is preceded
 * by an IR_BARRIER of aux IR_BARRIER_PIPE, and the region ends with one: the targets that
 * run the roles in lockstep need them; CUDA drops them and runs each role on its own, the
 * ring's slots handed over through mbarriers. */
#define IR_IF_PIPE 2
#define IR_IF_PRODUCE 3
#define IR_IF_CONSUME 4
#define IR_BARRIER_PIPE 1
/* tern_pipe_sync: a barrier of one role's threads (imm IR_PIPE_PRODUCER or IR_PIPE_CONSUMERS)
 * between a produce or consume block and its continuation, an IR_IF of the same aux whose imm
 * has IR_PIPE_MORE set: the block split in two (its step counted once, at the end). CUDA runs
 * it as a named barrier over the role's threads; the lockstep targets as a whole barrier, which
 * every thread reaches between the two halves. */
#define IR_BARRIER_SYNC 2
#define IR_PIPE_MORE ((int64_t)1 << 40)
/* A pipe's variables: which role's blocks use each variable declared before the region (a
 * set of bits; shared: used outside the blocks too). A variable only one role uses has no
 * defined value in the other role's threads after the region: CUDA lets the other branch
 * forget it (its registers would otherwise hold it through that branch, spilling where
 * setmaxnreg took them away) and the interpreter poisons it there. */
enum { IR_PIPE_PRODUCER = 1, IR_PIPE_CONSUMERS = 2, IR_PIPE_SHARED = 3 };
void ir_pipe_owners(const tern_kernel *k, int32_t region, uint8_t *owner);
typedef struct ir_pipe_spec {
    int producer_first, producer_count, stages, lag, producer_regs, consumer_regs;
} ir_pipe_spec;
static inline int64_t ir_pipe_pack(ir_pipe_spec s) {
    return (int64_t)s.producer_first | (int64_t)s.producer_count << 10 | (int64_t)s.stages << 20 |
           (int64_t)s.lag << 26 | (int64_t)s.producer_regs << 32 | (int64_t)s.consumer_regs << 41;
}
static inline ir_pipe_spec ir_pipe_unpack(int64_t v) {
    ir_pipe_spec s = {(int)(v & 1023), (int)(v >> 10 & 1023), (int)(v >> 20 & 63),
                      (int)(v >> 26 & 63), (int)(v >> 32 & 511), (int)(v >> 41 & 511)};
    return s;
}
/* IR_COPY_TILE's matrix and box: the source buffer, its columns, the box's rows (the tile's)
 * and its panels of 64 columns. */
typedef struct ir_tile_box {
    int32_t buf;
    int64_t cols;
    int rows, panels;
} ir_tile_box;
#define IR_TILE_MAX_COLS ((int64_t)1 << 32)
#define IR_TILE_MAX_ROWS 256
#define IR_TILE_MAX_PANELS 4
static inline int64_t ir_tile_pack(ir_tile_box b) {
    return (int64_t)b.buf | (b.cols - 1) << 16 | (int64_t)(b.rows - 1) << 48 | (int64_t)(b.panels - 1) << 56;
}
static inline ir_tile_box ir_tile_unpack(int64_t v) {
    ir_tile_box b = {(int32_t)(v & 0xffff), (v >> 16 & 0xffffffff) + 1, (int)(v >> 48 & 255) + 1,
                     (int)(v >> 56 & 7) + 1};
    return b;
}
/* The tensor maps a kernel's tile copies need, one per distinct (matrix, columns, box rows),
 * in the order of their first copy: what the CUDA kernel takes after its parameters, and
 * what the runtime makes at launch. Returns how many (at most IR_TILE_MAX_MAPS) into out
 * (may be NULL). ir_tile_map_of: the index of instruction `ins`'s map. */
#define IR_TILE_MAX_MAPS 8
int ir_tile_maps(const tern_kernel *k, ir_tile_box *out);
int ir_tile_map_of(const tern_kernel *k, int32_t ins);
/* IR_WGMMA's aux: asynchronous (its accumulators are variables), and traced in a warpgroup
 * role's block (the emulating targets make it per thread, without barriers). */
#define IR_WG_ASYNC 1
#define IR_WG_ROLE 2
/* The most asynchronous products in flight at once (PTX wgmma.wait_group takes 0..7). */
#define IR_WG_MAX_PENDING 8
#define IR_WG_MAX_N 256
#define IR_WG_MAX_K 256
#define IR_WG_MAX_ROWS 4095

struct interp_prog;

struct tern_kernel {
    char *name;
    ir_ins *ins;
    int32_t nins, cap_ins;
    ir_value *vals;
    int32_t nvals, cap_vals;
    ir_var *vars;
    int32_t nvars, cap_vars;
    ir_buf *bufs;
    int32_t nbufs, cap_bufs;
    ir_param *params;
    int32_t nparams, cap_params;
    int32_t *extra;
    int32_t nextra, cap_extra;
    char **strings;
    int32_t nstrings, cap_strings;
    uint32_t uses;
    size_t shared_bytes;
    int32_t result; /* value id of tern_result, or -1 */
    int32_t max_threads; /* tern_max_threads, 0 when not given */
    int32_t min_groups;  /* tern_min_groups, 0 when not given */
    uint64_t hash;
    struct interp_prog *prog; /* the interpreter's form, made at build */
};

/* ---- kernel storage (ir.c) ---- */

tern_kernel *ir_kernel_new(const char *name);
void ir_kernel_free(tern_kernel *k);
/* Each returns the new index, or -1 when out of memory. */
int32_t ir_add_ins(tern_kernel *k, const ir_ins *ins);
int32_t ir_add_value(tern_kernel *k, uint8_t type, int32_t def, int32_t block);
int32_t ir_add_var(tern_kernel *k, uint8_t type, int32_t name, int32_t block);
int32_t ir_add_buf(tern_kernel *k, const ir_buf *buf);
int32_t ir_add_param(tern_kernel *k, const ir_param *p);
int32_t ir_add_extra(tern_kernel *k, const int32_t *ids, int32_t count);
int32_t ir_add_string(tern_kernel *k, const char *s); /* interned */
const char *ir_string(const tern_kernel *k, int32_t id); /* "" for -1 */

/* ---- facts about opcodes and types (ir.c) ---- */

const char *ir_op_name(ir_op op);
const char *ir_op1_name(tern_op1 op);
const char *ir_op2_name(tern_op2 op);
const char *ir_atomic_name(tern_atomic_op op);
const char *ir_simd_name(tern_simd_op op);
const char *ir_thread_name(tern_thread_attr a);
static inline bool ir_type_is_int(int t) { /* i32 u32 i64 u64 */
    return t == TERN_T_I32 || t == TERN_T_U32 || t == TERN_T_I64 || t == TERN_T_U64;
}
static inline bool ir_type_is_signed(int t) { return t == TERN_T_I32 || t == TERN_T_I64; }
static inline bool ir_type_is_numeric(int t) { return ir_type_is_int(t) || t == TERN_T_F32; }
static inline bool ir_type_is_value(int t) { return t == TERN_T_BOOL || ir_type_is_numeric(t); }
static inline bool ir_type_is_storage(int t) { /* a buffer element type */
    return ir_type_is_numeric(t) || t == TERN_T_F16 || t == TERN_T_BF16 || t == TERN_T_U16;
}
/* Width of a type in bits (bool: 1). */
static inline int ir_type_bits(int t) {
    switch (t) {
    case TERN_T_BOOL: return 1;
    case TERN_T_I64:
    case TERN_T_U64: return 64;
    case TERN_T_F16:
    case TERN_T_BF16:
    case TERN_T_U16: return 16;
    default: return 32;
    }
}
/* Whether instruction `op` has effects beyond its result (stores, atomics, control...). */
bool ir_op_has_effect(ir_op op);
/* Whether `op` opens a block (IF, FOR, WHILE). */
bool ir_op_opens(ir_op op);
/* The value operands of instruction `in` into out (at most IR_MAX_OPERANDS), their count returned. */
int ir_operands(const tern_kernel *k, const ir_ins *in, int32_t *out);
#define IR_MAX_OPERANDS (IR_WG_MAX_K / 2 + 1 + IR_WG_MAX_N / 2) /* IR_WGMMA's most */

/* The constant of a CONST instruction as int64 (ints, bool), or as a double (f32). */
static inline double ir_const_f(const ir_ins *in) {
    double d;
    uint64_t u = (uint64_t)in->imm;
    memcpy(&d, &u, sizeof d);
    return d;
}
static inline int64_t ir_f_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return (int64_t)u;
}

/* ---- whole-kernel passes ---- */

/* Checks every invariant of a finished kernel (typecheck.c): operands defined before use
 * and in scope, types, block structure. Errors name the kernel and the statement. */
tern_error *ir_verify(const tern_kernel *k);
/* The kernel's 64-bit content hash (hash.c). */
uint64_t ir_hash_kernel(const tern_kernel *k);
/* "file.c:12" for an instruction, into buf (basename of the file). */
const char *ir_where(const tern_kernel *k, int32_t ins, char *buf, size_t size);
/* One instruction as text, e.g. "t5 = add t3, t4", into buf. */
const char *ir_describe(const tern_kernel *k, int32_t ins, char *buf, size_t size);

#endif
