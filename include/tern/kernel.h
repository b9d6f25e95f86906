/* The tracing kernel DSL.
 *
 * A kernel is a C function that, when run, records the kernel: every DSL call appends one
 * statement to the kernel being traced, so C is the metaprogramming layer (C loops unroll,
 * C constants specialise, C helpers compose). tern_kernel_build runs the function once and
 * returns an immutable kernel, which can be emitted as CUDA C, OpenCL C or Metal Shading
 * Language, or launched on a runtime (host interpreter, OpenCL, CUDA).
 *
 *     static void scale(tern_kb *kb, void *user) {
 *         float factor = *(const float *)user;          // a C constant, baked in
 *         tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
 *         tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
 *         tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
 *         tern_v i = tern_global_id(kb, 0);
 *         TERN_IF(kb, tern_lt(i, n)) {
 *             tern_store(y, i, tern_mul(tern_load(x, i), tern_f32(factor)));
 *         }
 *     }
 *     ...
 *     tern_kernel *k;
 *     tern_error *err = tern_kernel_build("scale", scale, &factor, &k);
 *
 * Values (tern_v) are immutable, like C `const` locals: an operation computes its result
 * where it is called. Mutable state lives in variables (tern_var / tern_assign). A value
 * may be used only inside the block it was made in (and blocks nested in it); carry
 * results out of an if or a loop with a variable.
 *
 * Errors: a DSL call never aborts. The first error (a type mismatch, a value used out of
 * its block, ...) is recorded with the C source line of the offending call, later calls
 * become no-ops, and tern_kernel_build returns it as "kernel 'name': message (file:line)".
 *
 * Every DSL operation is a macro over a function with the same name plus `_at`, which
 * takes the caller's source location first (tern_add(a, b) is tern_add_at(TERN_HERE, a, b)),
 * so errors and target-compiler messages point at the user's line. Call the `_at` forms
 * from helpers that want to report their caller's line instead.
 *
 * docs/kernels.md is the reference, with examples. */
#ifndef TERN_KERNEL_H
#define TERN_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/effect.h"
#include "tern/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types ---- */

/* Value types, and the element types of buffers. f16, bf16 and u16 are storage types: a
 * load from such a buffer gives an f32 (u32 for u16), a store takes one and rounds to
 * nearest even (u16: keeps the low 16 bits). A NaN stored stays a NaN, but its payload is
 * not kept the same on every target (CUDA writes the canonical NaN; a bf16 value stored as
 * it was loaded may keep its bits). */
typedef enum tern_type {
    TERN_T_VOID = 0,
    TERN_T_BOOL,
    TERN_T_I32,
    TERN_T_U32,
    TERN_T_I64,
    TERN_T_U64,
    TERN_T_F32,
    TERN_T_F16,
    TERN_T_BF16,
    TERN_T_U16,
} tern_type;
#define TERN_TYPE_COUNT 10

const char *tern_type_name(tern_type t); /* "f32", ... */
size_t tern_type_size(tern_type t);      /* bytes in memory (bool: 1) */
/* The value type a buffer of element type t loads as (f16 -> f32, u16 -> u32, ...). */
tern_type tern_type_value(tern_type t);
/* The DSL type of an effect dtype (TERN_BF16 -> TERN_T_BF16, ...). */
tern_type tern_type_of_dtype(tern_dtype dtype);

/* How a kernel uses a buffer parameter. A load needs READ, a store or atomic WRITE
 * (atomics need both). */
typedef enum tern_intent {
    TERN_READ = 1,
    TERN_WRITE = 2,
    TERN_READ_WRITE = 3,
} tern_intent;

/* The width of a SIMD group on every target: 32 (a CUDA warp, an Apple SIMD group; the
 * OpenCL emitter emulates groups of 32 with threadgroup memory). */
#define TERN_SIMD_WIDTH 32

typedef struct tern_kb tern_kb;         /* a kernel being traced */
typedef struct tern_kernel tern_kernel; /* a traced kernel, immutable */

/* A C source location, recorded with every statement. */
typedef struct tern_loc {
    const char *file;
    int line;
} tern_loc;
#define TERN_HERE ((tern_loc){__FILE__, __LINE__})

/* A DSL value: a result of an operation, a parameter, a variable, a buffer or a constant.
 * Constants (tern_f32(1.5f), ...) belong to no kernel yet (kb == NULL) and are folded at
 * trace time when every operand is one. Treat the fields as private. */
typedef struct tern_v {
    tern_kb *kb;
    int32_t id;
    uint8_t kind;  /* private: TERN_V_* in src/dsl/ir.h */
    uint8_t type;  /* tern_type */
    uint8_t weak;  /* a literal whose type adapts to the other operand */
    uint8_t op;    /* private: for a poisoned constant, the operation that failed */
    union {
        int64_t i;
        uint64_t u;
        double f;
    } c;
} tern_v;

/* ---- building kernels ---- */

/* The trace function: declares parameters and appends statements through kb. `user` is
 * passed through (specialisation constants, sizes, ...). */
typedef void (*tern_trace_fn)(tern_kb *kb, void *user);

/* Runs fn once to trace kernel `name` (a C identifier of at most 63 characters). On
 * success *out is a new kernel (tern_kernel_free); on failure *out is NULL and the error
 * names the kernel and the C line of the first offending DSL call. */
tern_error *tern_kernel_build(const char *name, tern_trace_fn fn, void *user,
                              tern_kernel **out) TERN_MUST_USE;
void tern_kernel_free(tern_kernel *k);

/* The builder of a value or variable (NULL for constants). */
tern_kb *tern_kb_of(tern_v v);

/* ---- parameters, in launch order ---- */

/* A buffer of `elem` elements (f32, f16, bf16, i32, u32, u16, i64, u64). */
tern_v tern_param_buf_at(tern_loc at, tern_kb *kb, const char *name, tern_type elem,
                         tern_intent intent);
/* A scalar passed by value (i32, u32, i64, u64, f32). */
tern_v tern_param_scalar_at(tern_loc at, tern_kb *kb, const char *name, tern_type type);
#define tern_param_buf(kb, name, elem, intent) tern_param_buf_at(TERN_HERE, kb, name, elem, intent)
#define tern_param_scalar(kb, name, type) tern_param_scalar_at(TERN_HERE, kb, name, type)

/* Threadgroup (CUDA: shared, OpenCL: local) memory of `count` elements, its size fixed at
 * trace time. Shared by the threads of a threadgroup; contents undefined at start. */
tern_v tern_shared_at(tern_loc at, tern_kb *kb, const char *name, tern_type elem, size_t count);
#define tern_shared(kb, name, elem, count) tern_shared_at(TERN_HERE, kb, name, elem, count)

/* ---- constants (no kernel needed) ---- */

tern_v tern_bool(bool b);
tern_v tern_i32(int32_t x);
tern_v tern_u32(uint32_t x);
tern_v tern_i64(int64_t x);
tern_v tern_u64(uint64_t x);
tern_v tern_f32(float x);
/* An integer literal that takes the type of the other operand (any integer type, or f32
 * when exactly representable); i32 when both operands are such literals. */
tern_v tern_int(int64_t x);

/* The most threads per threadgroup this kernel will be launched with (1..1024). Lets the
 * CUDA compiler budget registers for it (__launch_bounds__; Metal's
 * max_total_threads_per_threadgroup); a launch with more threads is then an error on
 * every runtime. Without it the cuda runtime recompiles with a register cap when a launch
 * needs one. */
void tern_max_threads_at(tern_loc at, tern_kb *kb, int threads);
#define tern_max_threads(kb, threads) tern_max_threads_at(TERN_HERE, kb, threads)

/* A hint, after tern_max_threads: at least `groups` threadgroups of that size should be
 * resident on one compute unit at once (1..32). The CUDA compiler then caps each thread's
 * registers to fit them (the second __launch_bounds__ argument), trading spills for
 * occupancy; the other targets have no such control and ignore it. */
void tern_min_groups_at(tern_loc at, tern_kb *kb, int groups);
#define tern_min_groups(kb, groups) tern_min_groups_at(TERN_HERE, kb, groups)

/* ---- thread attributes (all i32) ----
 * A launch is `grid` threadgroups of `group` threads in up to three dimensions. dim is 0
 * (x), 1 (y) or 2 (z). SIMD groups are formed from the linear thread index in the
 * threadgroup, x fastest: lane = index % 32, group = index / 32. */
typedef enum tern_thread_attr {
    TERN_GLOBAL_ID,    /* position in the grid, in threads: group_id * group_size + local_id */
    TERN_LOCAL_ID,     /* position in the threadgroup */
    TERN_GROUP_ID,     /* position of the threadgroup in the grid */
    TERN_GROUP_SIZE,   /* threads per threadgroup */
    TERN_GROUP_COUNT,  /* threadgroups in the grid */
    TERN_LOCAL_INDEX,  /* linear index in the threadgroup (dim ignored) */
    TERN_SIMD_LANE,    /* lane in the SIMD group, 0..31 (dim ignored) */
    TERN_SIMD_GROUP,   /* SIMD group in the threadgroup (dim ignored) */
    TERN_SIMD_GROUPS,  /* SIMD groups per threadgroup (dim ignored) */
} tern_thread_attr;
tern_v tern_thread_at(tern_loc at, tern_kb *kb, tern_thread_attr attr, int dim);
#define tern_global_id(kb, dim) tern_thread_at(TERN_HERE, kb, TERN_GLOBAL_ID, dim)
#define tern_local_id(kb, dim) tern_thread_at(TERN_HERE, kb, TERN_LOCAL_ID, dim)
#define tern_group_id(kb, dim) tern_thread_at(TERN_HERE, kb, TERN_GROUP_ID, dim)
#define tern_group_size(kb, dim) tern_thread_at(TERN_HERE, kb, TERN_GROUP_SIZE, dim)
#define tern_group_count(kb, dim) tern_thread_at(TERN_HERE, kb, TERN_GROUP_COUNT, dim)
#define tern_local_index(kb) tern_thread_at(TERN_HERE, kb, TERN_LOCAL_INDEX, 0)
#define tern_simd_lane(kb) tern_thread_at(TERN_HERE, kb, TERN_SIMD_LANE, 0)
#define tern_simd_group(kb) tern_thread_at(TERN_HERE, kb, TERN_SIMD_GROUP, 0)
#define tern_simd_groups(kb) tern_thread_at(TERN_HERE, kb, TERN_SIMD_GROUPS, 0)

/* ---- expressions ----
 * Operands of arithmetic and comparisons must have the same type (no implicit
 * conversions, except tern_int literals); use tern_cast. Integer arithmetic wraps; integer
 * division truncates (division by zero is an error on the host, undefined on GPUs); shift
 * counts are taken modulo the width. Float math is IEEE f32 without fast-math. */
typedef enum tern_op1 {
    TERN_NEG, TERN_NOT, TERN_LNOT, TERN_ABS,
    TERN_EXP, TERN_EXP2, TERN_LOG, TERN_LOG2, TERN_SQRT, TERN_RSQRT, TERN_TANH, TERN_TANH_APPROX, TERN_ERF,
    TERN_SIN, TERN_COS, TERN_FLOOR, TERN_CEIL, TERN_ROUND, TERN_TRUNC,
    TERN_ISNAN, TERN_ISINF,
} tern_op1;
typedef enum tern_op2 {
    TERN_ADD, TERN_SUB, TERN_MUL, TERN_DIV, TERN_REM, TERN_MIN, TERN_MAX, TERN_POW,
    TERN_AND, TERN_OR, TERN_XOR, TERN_SHL, TERN_SHR,
    TERN_LT, TERN_LE, TERN_GT, TERN_GE, TERN_EQ, TERN_NE, TERN_LAND, TERN_LOR,
} tern_op2;
tern_v tern_unary_at(tern_loc at, tern_op1 op, tern_v a);
tern_v tern_binary_at(tern_loc at, tern_op2 op, tern_v a, tern_v b);
tern_v tern_select_at(tern_loc at, tern_v cond, tern_v if_true, tern_v if_false);
tern_v tern_fma_at(tern_loc at, tern_v a, tern_v b, tern_v c); /* a * b + c, one rounding */
/* Value conversion (floats to integers truncate; bool <-> number is 0/1 and != 0). */
tern_v tern_cast_at(tern_loc at, tern_v a, tern_type to);
/* Reinterprets the bits between types of the same size (f32/i32/u32, i64/u64). */
tern_v tern_bitcast_at(tern_loc at, tern_v a, tern_type to);

#define tern_add(a, b) tern_binary_at(TERN_HERE, TERN_ADD, a, b)
#define tern_sub(a, b) tern_binary_at(TERN_HERE, TERN_SUB, a, b)
#define tern_mul(a, b) tern_binary_at(TERN_HERE, TERN_MUL, a, b)
#define tern_div(a, b) tern_binary_at(TERN_HERE, TERN_DIV, a, b)
#define tern_rem(a, b) tern_binary_at(TERN_HERE, TERN_REM, a, b) /* C %, fmodf for f32 */
#define tern_min(a, b) tern_binary_at(TERN_HERE, TERN_MIN, a, b)
#define tern_max(a, b) tern_binary_at(TERN_HERE, TERN_MAX, a, b)
#define tern_pow(a, b) tern_binary_at(TERN_HERE, TERN_POW, a, b)
#define tern_and(a, b) tern_binary_at(TERN_HERE, TERN_AND, a, b)
#define tern_or(a, b) tern_binary_at(TERN_HERE, TERN_OR, a, b)
#define tern_xor(a, b) tern_binary_at(TERN_HERE, TERN_XOR, a, b)
#define tern_shl(a, b) tern_binary_at(TERN_HERE, TERN_SHL, a, b)
#define tern_shr(a, b) tern_binary_at(TERN_HERE, TERN_SHR, a, b) /* arithmetic when signed */
#define tern_lt(a, b) tern_binary_at(TERN_HERE, TERN_LT, a, b)
#define tern_le(a, b) tern_binary_at(TERN_HERE, TERN_LE, a, b)
#define tern_gt(a, b) tern_binary_at(TERN_HERE, TERN_GT, a, b)
#define tern_ge(a, b) tern_binary_at(TERN_HERE, TERN_GE, a, b)
#define tern_eq(a, b) tern_binary_at(TERN_HERE, TERN_EQ, a, b)
#define tern_ne(a, b) tern_binary_at(TERN_HERE, TERN_NE, a, b)
#define tern_land(a, b) tern_binary_at(TERN_HERE, TERN_LAND, a, b) /* bools; both evaluated */
#define tern_lor(a, b) tern_binary_at(TERN_HERE, TERN_LOR, a, b)
#define tern_neg(a) tern_unary_at(TERN_HERE, TERN_NEG, a)
#define tern_not(a) tern_unary_at(TERN_HERE, TERN_NOT, a) /* bitwise */
#define tern_lnot(a) tern_unary_at(TERN_HERE, TERN_LNOT, a)
#define tern_abs(a) tern_unary_at(TERN_HERE, TERN_ABS, a)
#define tern_exp(a) tern_unary_at(TERN_HERE, TERN_EXP, a)
#define tern_exp2(a) tern_unary_at(TERN_HERE, TERN_EXP2, a)
#define tern_log(a) tern_unary_at(TERN_HERE, TERN_LOG, a)
#define tern_log2(a) tern_unary_at(TERN_HERE, TERN_LOG2, a)
#define tern_sqrt(a) tern_unary_at(TERN_HERE, TERN_SQRT, a)
#define tern_rsqrt(a) tern_unary_at(TERN_HERE, TERN_RSQRT, a)
#define tern_tanh(a) tern_unary_at(TERN_HERE, TERN_TANH, a)
/* tanh to about 2^-11 relative error where a target has it in one instruction (CUDA on sm_75+:
 * tanh.approx.f32), tanh elsewhere: for epilogues whose rate is the special-function unit's
 * (a GELU over a whole GEMM tile; docs/kernels.md, "Float math"). */
#define tern_tanh_approx(a) tern_unary_at(TERN_HERE, TERN_TANH_APPROX, a)
#define tern_erf(a) tern_unary_at(TERN_HERE, TERN_ERF, a)
#define tern_sin(a) tern_unary_at(TERN_HERE, TERN_SIN, a)
#define tern_cos(a) tern_unary_at(TERN_HERE, TERN_COS, a)
#define tern_floor(a) tern_unary_at(TERN_HERE, TERN_FLOOR, a)
#define tern_ceil(a) tern_unary_at(TERN_HERE, TERN_CEIL, a)
#define tern_round(a) tern_unary_at(TERN_HERE, TERN_ROUND, a) /* halves away from zero */
#define tern_trunc(a) tern_unary_at(TERN_HERE, TERN_TRUNC, a)
#define tern_isnan(a) tern_unary_at(TERN_HERE, TERN_ISNAN, a)
#define tern_isinf(a) tern_unary_at(TERN_HERE, TERN_ISINF, a)
#define tern_select(c, a, b) tern_select_at(TERN_HERE, c, a, b)
#define tern_fma(a, b, c) tern_fma_at(TERN_HERE, a, b, c)
#define tern_cast(a, to) tern_cast_at(TERN_HERE, a, to)
#define tern_bitcast(a, to) tern_bitcast_at(TERN_HERE, a, to)

/* Gives a value (or a variable) a name in the emitted source; a named value always gets
 * its own declaration. Returns v. */
tern_v tern_name_at(tern_loc at, tern_v v, const char *name);
#define tern_name(v, name) tern_name_at(TERN_HERE, v, name)

/* ---- variables ---- */

/* A mutable variable of init's type, initialised to init. Using it as an operand reads
 * its current value. */
tern_v tern_var_at(tern_loc at, tern_kb *kb, const char *name, tern_v init);
void tern_assign_at(tern_loc at, tern_v var, tern_v value);
#define tern_var(kb, name, init) tern_var_at(TERN_HERE, kb, name, init)
#define tern_assign(var, value) tern_assign_at(TERN_HERE, var, value)

/* ---- memory ----
 * index is any integer type, counted in elements of the buffer. */
tern_v tern_load_at(tern_loc at, tern_v buf, tern_v index);
void tern_store_at(tern_loc at, tern_v buf, tern_v index, tern_v value);
/* `width` consecutive elements starting at index, as one 8- or 16-byte access (or 4 for
 * two 16-bit elements): width 2 or 4 for 32-bit elements, 2, 4 or 8 for 16-bit ones.
 * index must be a multiple of width, and the buffer's start aligned to the access. */
void tern_load_vec_at(tern_loc at, tern_v buf, tern_v index, int width, tern_v *out);
void tern_store_vec_at(tern_loc at, tern_v buf, tern_v index, int width, const tern_v *values);
#define tern_load(buf, index) tern_load_at(TERN_HERE, buf, index)
#define tern_store(buf, index, value) tern_store_at(TERN_HERE, buf, index, value)
#define tern_load_vec(buf, index, width, out) tern_load_vec_at(TERN_HERE, buf, index, width, out)
#define tern_store_vec(buf, index, width, values) \
    tern_store_vec_at(TERN_HERE, buf, index, width, values)

/* Atomic read-modify-write of one element; returns the old value. f32 buffers: add and
 * exchange; i32/u32: all. Relaxed ordering (use a barrier to publish). */
typedef enum tern_atomic_op {
    TERN_ATOMIC_ADD, TERN_ATOMIC_MIN, TERN_ATOMIC_MAX, TERN_ATOMIC_AND, TERN_ATOMIC_OR,
    TERN_ATOMIC_XOR, TERN_ATOMIC_XCHG,
} tern_atomic_op;
tern_v tern_atomic_at(tern_loc at, tern_atomic_op op, tern_v buf, tern_v index, tern_v value);
/* If buf[index] == expected, stores desired. Returns the old value (i32/u32). */
tern_v tern_atomic_cas_at(tern_loc at, tern_v buf, tern_v index, tern_v expected, tern_v desired);
#define tern_atomic_add(buf, i, v) tern_atomic_at(TERN_HERE, TERN_ATOMIC_ADD, buf, i, v)
#define tern_atomic_min(buf, i, v) tern_atomic_at(TERN_HERE, TERN_ATOMIC_MIN, buf, i, v)
#define tern_atomic_max(buf, i, v) tern_atomic_at(TERN_HERE, TERN_ATOMIC_MAX, buf, i, v)
#define tern_atomic_and(buf, i, v) tern_atomic_at(TERN_HERE, TERN_ATOMIC_AND, buf, i, v)
#define tern_atomic_or(buf, i, v) tern_atomic_at(TERN_HERE, TERN_ATOMIC_OR, buf, i, v)
#define tern_atomic_xor(buf, i, v) tern_atomic_at(TERN_HERE, TERN_ATOMIC_XOR, buf, i, v)
#define tern_atomic_xchg(buf, i, v) tern_atomic_at(TERN_HERE, TERN_ATOMIC_XCHG, buf, i, v)
#define tern_atomic_cas(buf, i, e, d) tern_atomic_cas_at(TERN_HERE, buf, i, e, d)

/* ---- synchronisation and SIMD groups ----
 * A barrier, and every SIMD-group operation, must be reached by all threads of the
 * threadgroup together (threadgroup-uniform control flow); the host runtime checks this.
 * SIMD operations need a threadgroup size that is a multiple of 32. Reductions combine
 * lanes in a fixed butterfly order, so float results are the same on every target. */
void tern_barrier_at(tern_loc at, tern_kb *kb); /* orders threadgroup and device memory */
#define tern_barrier(kb) tern_barrier_at(TERN_HERE, kb)

/* A device-scope memory fence (sequentially consistent): this thread's device-memory
 * accesses before it are ordered before those after it, as seen by every thread of the
 * grid. It is what lets threadgroups hand results to one another within a launch: each
 * group stores, fences, then counts itself in with an atomic; the group that counts last
 * fences and reads what the others stored ("the last group finishes"). Unlike a barrier it
 * synchronises nobody, so it may be reached by any subset of threads. CUDA __threadfence(),
 * OpenCL 1.2 mem_fence(CLK_GLOBAL_MEM_FENCE) (1.2 has nothing stronger; PoCL's CPU devices
 * are coherent), Metal atomic_thread_fence(mem_device, seq_cst, thread_scope_device), the
 * host a seq_cst thread fence. Not allowed in pure kernels. */
void tern_fence_device_at(tern_loc at, tern_kb *kb);
#define tern_fence_device(kb) tern_fence_device_at(TERN_HERE, kb)

typedef enum tern_simd_op {
    TERN_SIMD_SUM,          /* every lane gets the sum over the group */
    TERN_SIMD_MIN,
    TERN_SIMD_MAX,
    TERN_SIMD_PREFIX_SUM,   /* exclusive: lane l gets the sum of lanes 0 .. l-1 */
    TERN_SIMD_SHUFFLE,      /* lane l gets v of lane (arg mod 32) */
    TERN_SIMD_SHUFFLE_XOR,  /* lane l gets v of lane l ^ (arg mod 32) */
    TERN_SIMD_SHUFFLE_DOWN, /* lane l gets v of lane l + arg, its own v past lane 31 */
    TERN_SIMD_SHUFFLE_UP,   /* lane l gets v of lane l - arg, its own v before lane 0 */
    TERN_SIMD_BALLOT,       /* u32: bit l set when lane l's bool is true */
    TERN_SIMD_ANY,
    TERN_SIMD_ALL,
} tern_simd_op;
/* arg: the lane or offset (i32/u32) for shuffles; ignored (pass tern_int(0)) otherwise. */
tern_v tern_simd_at(tern_loc at, tern_simd_op op, tern_v v, tern_v arg);
#define tern_simd_sum(v) tern_simd_at(TERN_HERE, TERN_SIMD_SUM, v, tern_int(0))
#define tern_simd_min(v) tern_simd_at(TERN_HERE, TERN_SIMD_MIN, v, tern_int(0))
#define tern_simd_max(v) tern_simd_at(TERN_HERE, TERN_SIMD_MAX, v, tern_int(0))
#define tern_simd_prefix_sum(v) tern_simd_at(TERN_HERE, TERN_SIMD_PREFIX_SUM, v, tern_int(0))
#define tern_simd_shuffle(v, lane) tern_simd_at(TERN_HERE, TERN_SIMD_SHUFFLE, v, lane)
#define tern_simd_shuffle_xor(v, m) tern_simd_at(TERN_HERE, TERN_SIMD_SHUFFLE_XOR, v, m)
#define tern_simd_shuffle_down(v, d) tern_simd_at(TERN_HERE, TERN_SIMD_SHUFFLE_DOWN, v, d)
#define tern_simd_shuffle_up(v, d) tern_simd_at(TERN_HERE, TERN_SIMD_SHUFFLE_UP, v, d)
#define tern_simd_ballot(c) tern_simd_at(TERN_HERE, TERN_SIMD_BALLOT, c, tern_int(0))
#define tern_simd_any(c) tern_simd_at(TERN_HERE, TERN_SIMD_ANY, c, tern_int(0))
#define tern_simd_all(c) tern_simd_at(TERN_HERE, TERN_SIMD_ALL, c, tern_int(0))

/* D = A B + C on a 16x8x16 tile, bf16 multiplicands, f32 accumulate: a collective of the
 * SIMD group (all 32 lanes must reach it, like the SIMD reductions). Lane l (g = l / 4,
 * t = l % 4) holds:
 *   a[0..7]: A[g][2t], A[g][2t+1], A[g+8][2t], A[g+8][2t+1], A[g][2t+8], A[g][2t+9], A[g+8][2t+8], A[g+8][2t+9]
 *   b[0..3]: B[2t][g], B[2t+1][g], B[2t+8][g], B[2t+9][g]
 *   c[0..3], d[0..3]: C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]
 * (A is 16 x 16, B 16 x 8, C and D 16 x 8; this is PTX mma.m16n8k16 .row.col's fragment layout).
 * a and b are f32 values, rounded to bf16 (to nearest even) by the operation; c is f32.
 * All 16 operands must be f32. The products are exact in f32; the sums are f32, in an order
 * that differs between targets (the host, OpenCL and Metal add k = 0..15 in turn; tensor
 * cores in their own order), so results agree to f32 rounding, not bit for bit. CUDA runs
 * the tensor-core instruction (sm_80 or newer); OpenCL (over the SIMD scratch) and Metal
 * (with shuffles) emulate it: correct, slow. d may be the
 * same array as c (it is written after every operand is read), so `tern_mma_bf16(kb, a, b,
 * acc, acc)` accumulates. */
void tern_mma_bf16_at(tern_loc at, tern_kb *kb, const tern_v a[8], const tern_v b[4], const tern_v c[4],
                      tern_v d[4]);
#define tern_mma_bf16(kb, a, b, c, d) tern_mma_bf16_at(TERN_HERE, kb, a, b, c, d)

/* Four 8 x 8 matrices of a threadgroup bf16 buffer, loaded by the SIMD group together (a
 * collective, like tern_mma_bf16): lane l gives in row_index the element index of row l % 8
 * of matrix l / 8 (eight contiguous elements, row_index a multiple of 8), and receives two
 * elements of each matrix M_i as f32 values:
 *   out[2i], out[2i + 1] = M_i[l / 4][2 (l % 4)], M_i[l / 4][2 (l % 4) + 1], or transposed
 *                          M_i[2 (l % 4)][l / 4], M_i[2 (l % 4) + 1][l / 4].
 * That is tern_mma_bf16's B fragment layout: b[0..1] from one matrix and b[2..3] from the
 * next are the 16 x 8 tile B whose rows k are the matrices' columns (B = M^T, rows of M are
 * the n), or with `transposed` their rows (B = M, rows of M are the k). CUDA runs PTX
 * ldmatrix (four 16-byte rows per lane in one instruction, sm_75 or newer); the host,
 * OpenCL and Metal gather the same elements with shuffles and loads. */
void tern_load_matrix_at(tern_loc at, tern_v buf, tern_v row_index, bool transposed, tern_v out[8]);
#define tern_load_matrix(buf, row_index, transposed, out) \
    tern_load_matrix_at(TERN_HERE, buf, row_index, transposed, out)

/* ---- warpgroup products (CUDA: Hopper's wgmma) ----
 * A warpgroup is four consecutive SIMD groups of a threadgroup: threads 128 w .. 128 w + 127
 * by local index. A warpgroup product is a collective of every thread of the threadgroup
 * (like tern_mma_bf16: all reach it), each warpgroup multiplying its own operands; a
 * threadgroup that uses one has a multiple of 128 threads.
 *
 * Tiles. Operands in threadgroup memory are bf16 tiles in one layout, the one the tensor
 * cores read without bank conflicts (CUDA's 128-byte swizzle): a tile of `rows` rows (a
 * multiple of 8) whose columns come in panels of 64 holds element (r, c) at
 *
 *     at + (c / 64) * rows * 64 + r * 64 + ((c % 64) / 8 ^ r % 8) * 8 + c % 8
 *
 * of a threadgroup array made by tern_shared_tiles, where `at` is a multiple of 512 (1,024
 * bytes: the array starts on such a boundary). Eight columns from a multiple of 8 stay
 * consecutive, so a row's 16 bytes are one tern_copy_async. A tile's rows are either its
 * matrix's rows (m or n, "K-major": each row runs along k) or its k (k_rows: each row runs
 * along m or n); the product reads its first 64, n or k rows from `at` (which may point at
 * any row that is a multiple of 8 of a taller tile: the panels stay `rows` apart).
 *
 * tern_wgmma_bf16: D[64 x n] = A[64 x k] B[k x n] + C, bf16 multiplicands, f32 accumulate.
 *   A: either registers, a (k / 2 values: for each step s of 16 along k, a[8 s .. 8 s + 7]
 *      in tern_mma_bf16's a layout for the 16 rows of the thread's SIMD group: SIMD group
 *      j = (local index / 32) % 4 of the warpgroup holds rows 16 j .. 16 j + 15; f32 values,
 *      rounded to bf16 by the operation), or a tile, a_tile (64 rows of k, or k_rows: k rows
 *      of 64); exactly one of a and a_tile is given.
 *   B: a tile, b_tile: n rows of k, or (k_rows) k rows of n.
 *   c, d: n / 2 f32 values each, tern_mma_bf16's c layout for each block of 8 columns:
 *      d[4 b + r] = D[16 j + g + 8 (r / 2)][8 b + 2 t + r % 2], g = lane / 4, t = lane % 4;
 *      d may be c.
 *   n: a multiple of 8 from 8 to 256 (a multiple of 64 where B's tile has k_rows); k: a
 *   multiple of 16 from 16 to 256. The tiles' `at` is uniform across the warpgroup.
 * The tiles are read after a tern_barrier that follows their writes (and the wait of any
 * asynchronous copy into them). Results agree with the other targets to f32 rounding: the
 * host adds k in order, tensor cores in their own. CUDA on sm_90 (compiled as sm_90a) issues
 * wgmma.mma_async for each step of 16 along k and waits for them; other GPUs, OpenCL and
 * Metal run the same product as tern_mma_bf16 tiles per SIMD group (correct, slower). */
typedef struct tern_wg_tile {
    tern_v buf;   /* a tern_shared_tiles array */
    tern_v at;    /* the element index of the tile's row 0 in it, a multiple of 512 */
    int rows;     /* rows a panel of 64 columns has (the panels' distance / 64), multiple of 8 */
    bool k_rows;  /* the tile's rows are k (it is A^T or B), else A's rows m or B's columns n */
} tern_wg_tile;

/* A bf16 threadgroup array for tiles: as tern_shared, aligned to 1,024 bytes. */
tern_v tern_shared_tiles_at(tern_loc at, tern_kb *kb, const char *name, size_t count);
/* The element index of (row, col) of a tile of `rows` rows at `at` (the layout above). */
tern_v tern_wg_tile_index_at(tern_loc loc, tern_v at, int rows, tern_v row, tern_v col);
void tern_wgmma_bf16_at(tern_loc loc, tern_kb *kb, int n, int k, const tern_v *a, const tern_wg_tile *a_tile,
                        const tern_wg_tile *b_tile, const tern_v *c, tern_v *d);
/* The asynchronous form: starts the product and returns at once. acc: n / 2 f32 variables
 * (tern_var), C on entry and D once a tern_wgmma_wait covers the product; until then nothing
 * may read or assign them (the tracer refuses it), so other work (a softmax, another
 * product) overlaps the tensor cores. The one exception is a chain: another asynchronous
 * product whose acc is exactly the newest in-flight product's (the same variables in the
 * same order, issued in the same block) adds onto it, acc = A B + acc in issue order, as a
 * GEMM's k slices do. tern_wgmma_wait(kb, pending): at most `pending` (0..7)
 * of the warpgroup's asynchronous products still in flight, the older ones complete (PTX
 * wgmma.wait_group). A product is waited for in the block that issued it, and a wait inside
 * a block may not cover products issued outside it. Everywhere but CUDA on sm_90 the product
 * is made at once and the wait does nothing: the host cannot see an early read (the tracer
 * does). */
void tern_wgmma_bf16_async_at(tern_loc loc, tern_kb *kb, int n, int k, const tern_v *a, const tern_wg_tile *a_tile,
                              const tern_wg_tile *b_tile, const tern_v *acc);
void tern_wgmma_wait_at(tern_loc loc, tern_kb *kb, int pending);
#define tern_wgmma_bf16_async(kb, n, k, a, a_tile, b_tile, acc) \
    tern_wgmma_bf16_async_at(TERN_HERE, kb, n, k, a, a_tile, b_tile, acc)
#define tern_wgmma_wait(kb, pending) tern_wgmma_wait_at(TERN_HERE, kb, pending)
#define tern_shared_tiles(kb, name, count) tern_shared_tiles_at(TERN_HERE, kb, name, count)
#define tern_wg_tile_index(at, rows, row, col) tern_wg_tile_index_at(TERN_HERE, at, rows, row, col)
#define tern_wgmma_bf16(kb, n, k, a, a_tile, b_tile, c, d) \
    tern_wgmma_bf16_at(TERN_HERE, kb, n, k, a, a_tile, b_tile, c, d)

/* The same index on the host (for tests and for data laid out in advance). */
static inline size_t tern_wg_tile_offset(size_t rows, size_t row, size_t col) {
    return (col / 64) * rows * 64 + row * 64 + (((col % 64) / 8) ^ (row % 8)) * 8 + col % 8;
}

/* ---- asynchronous copies from device to threadgroup memory ----
 * What lets a kernel stage the next tile of its input in threadgroup memory while it
 * computes on the current one, without the data passing through registers (CUDA: PTX
 * cp.async, sm_80 or newer). Each thread issues its own copies, commits them as a batch and
 * later waits for its batches; none of the three is a collective (control flow may differ
 * between threads), but the usual pattern is uniform:
 *
 *     tern_copy_async(tile, dst_i, x, src_i, 8);    // this thread's 16 bytes of the tile
 *     tern_copy_async_commit(kb);                   // closes the batch
 *     ... compute on the other tile ...
 *     tern_copy_async_wait(kb, 0);                  // this thread's copies have landed
 *     tern_barrier(kb);                             // ... and every thread's, for all
 *
 * Contract: from the copy until the wait that covers it, dst's elements must not be read or
 * written and src's not written, by any thread. A kernel that reads dst before its wait is
 * wrong on CUDA (it may see old data) and right everywhere else: the host interpreter,
 * OpenCL and Metal copy at once (commit and wait do nothing there), so the interpreter
 * cannot detect the mistake; only a GPU run can. */

/* Starts copying n elements of device buffer src (a buffer parameter, readable) from
 * src_index to threadgroup array dst at dst_index. Both have the same element type; the n
 * elements are 4, 8 or 16 bytes in all (f32/i32/u32: n = 1, 2, 4; f16/bf16/u16: 2, 4, 8;
 * i64/u64: 1, 2), and both indices are multiples of n, with the buffers' starts aligned to
 * the copy, as for tern_load_vec (the host checks bounds and alignment). The builder is
 * dst's. The bytes are copied as they are (no conversion: a bf16 NaN keeps its bits). CUDA
 * cp.async.cg (16 bytes, bypassing L1) or cp.async.ca (4 and 8); below sm_80, and on the
 * other targets, a plain vector load and store. */
void tern_copy_async_at(tern_loc at, tern_v dst, tern_v dst_index, tern_v src, tern_v src_index,
                        int n);
/* Closes the batch of this thread's copies started since its last commit (CUDA
 * cp.async.commit_group). A batch may be empty. */
void tern_copy_async_commit_at(tern_loc at, tern_kb *kb);
/* Waits until at most `pending` (0..7) of this thread's committed batches are still in
 * flight; 0: all of them are done (CUDA cp.async.wait_group pending). Copies not yet
 * committed are not waited for. After the wait the copied data is visible to this thread;
 * to the rest of the threadgroup after a tern_barrier that follows it. */
void tern_copy_async_wait_at(tern_loc at, tern_kb *kb, int pending);
#define tern_copy_async(dst, dst_index, src, src_index, n) \
    tern_copy_async_at(TERN_HERE, dst, dst_index, src, src_index, n)
#define tern_copy_async_commit(kb) tern_copy_async_commit_at(TERN_HERE, kb)
#define tern_copy_async_wait(kb, pending) tern_copy_async_wait_at(TERN_HERE, kb, pending)

/* ---- bulk stores from threadgroup to device memory ----
 * The other direction: one thread hands a contiguous run of a threadgroup array to the copy
 * engine, which writes it to device memory while the threads go on, instead of every
 * thread loading and storing 16 bytes of it (CUDA sm_90: PTX cp.async.bulk from shared to
 * global memory, up to ~4 GB a copy, tracked in this thread's bulk groups). The pattern:
 *
 *     ... every thread writes its part of the tile ...
 *     tern_store_bulk_fence(kb);                     // its writes visible to the copy engine
 *     tern_barrier(kb);                              // ... and every thread's
 *     TERN_IF(kb, row_thread) { tern_store_bulk(x, xi, tile, ti, n); }
 *     tern_store_bulk_commit(kb);
 *     ... other work ...
 *     tern_store_bulk_wait(kb, 0);                   // this thread's copies have read the tile
 *     tern_barrier(kb);                              // ... every thread's: the tile may be written
 *
 * Contract: from the store until the wait that covers it, src's elements are not written by
 * any thread, and dst's are not read or written by this kernel; every thread that stores
 * waits (pending 0) before it ends (its group's threadgroup memory must outlive the reads).
 * The stored data is visible to later kernels, not to this one. CUDA below sm_90, OpenCL,
 * Metal and the host interpreter copy at once (the fence, commit and wait do nothing), so
 * only a GPU run can show a broken contract. */

/* Starts writing n elements (a runtime count, n * element size a multiple of 16 bytes) of
 * threadgroup array src from src_index to device buffer dst (a buffer parameter, writable)
 * at dst_index. Both have the same element type; both starts lie on 16 bytes (the indices
 * multiples of 16 bytes' elements, the buffers' starts aligned as for tern_load_vec; the
 * host checks bounds and alignment). The bytes are copied as they are. */
void tern_store_bulk_at(tern_loc at, tern_v dst, tern_v dst_index, tern_v src, tern_v src_index, tern_v n);
/* Closes the batch of this thread's bulk stores started since its last commit (CUDA
 * cp.async.bulk.commit_group). */
void tern_store_bulk_commit_at(tern_loc at, tern_kb *kb);
/* Waits until at most `pending` (0..7) of this thread's committed batches may still be
 * reading their sources (CUDA cp.async.bulk.wait_group.read): the sources of the older
 * ones may be written again after a barrier that follows. */
void tern_store_bulk_wait_at(tern_loc at, tern_kb *kb, int pending);
/* Orders this thread's earlier threadgroup-memory writes before the bulk stores issued after
 * a following barrier (CUDA sm_90: fence.proxy.async.shared::cta; the copy engine reads
 * threadgroup memory through another path than loads do). */
void tern_store_bulk_fence_at(tern_loc at, tern_kb *kb);
#define tern_store_bulk(dst, dst_index, src, src_index, n) \
    tern_store_bulk_at(TERN_HERE, dst, dst_index, src, src_index, n)
#define tern_store_bulk_commit(kb) tern_store_bulk_commit_at(TERN_HERE, kb)
#define tern_store_bulk_wait(kb, pending) tern_store_bulk_wait_at(TERN_HERE, kb, pending)
#define tern_store_bulk_fence(kb) tern_store_bulk_fence_at(TERN_HERE, kb)

/* ---- control flow ----
 * Structured blocks: tern_if / tern_else / tern_for / tern_while ... tern_end, or the
 * macros below, whose C body is the block:
 *
 *     TERN_FOR(kb, i, lane, n, tern_int(32)) { ... i ... }   // for (i = lane; i < n; i += 32)
 *     TERN_IF(kb, tern_lt(i, n)) { ... } TERN_ELSE(kb) { ... }
 *     TERN_WHILE(kb, tern_gt(tern_load(flag, z), z)) { ... }
 *
 * Do not leave a macro's body with C break/continue/return/goto (the block would not be
 * closed; tern_kernel_build reports it); use tern_break / tern_continue. A for loop runs
 * while index < end, its bounds and step (> 0) evaluated once, before the first iteration.
 * A while loop's condition is traced inside the macro, so it is re-evaluated each time. */
void tern_if_at(tern_loc at, tern_kb *kb, tern_v cond);
void tern_else_at(tern_loc at, tern_kb *kb); /* right after an if's tern_end */
tern_v tern_for_at(tern_loc at, tern_kb *kb, const char *index_name, tern_v start, tern_v end,
                   tern_v step);
void tern_while_at(tern_loc at, tern_kb *kb);             /* then trace the condition ... */
void tern_while_test_at(tern_loc at, tern_kb *kb, tern_v cond); /* ... then the body */
void tern_end_at(tern_loc at, tern_kb *kb);
void tern_break_at(tern_loc at, tern_kb *kb);
void tern_continue_at(tern_loc at, tern_kb *kb);
/* Ends the calling thread (CUDA's `return`): it skips the rest of the kernel. */
void tern_exit_at(tern_loc at, tern_kb *kb);
#define tern_if(kb, cond) tern_if_at(TERN_HERE, kb, cond)
#define tern_else(kb) tern_else_at(TERN_HERE, kb)
#define tern_for(kb, name, start, end, step) tern_for_at(TERN_HERE, kb, name, start, end, step)
#define tern_while(kb) tern_while_at(TERN_HERE, kb)
#define tern_while_test(kb, cond) tern_while_test_at(TERN_HERE, kb, cond)
#define tern_end(kb) tern_end_at(TERN_HERE, kb)
#define tern_break(kb) tern_break_at(TERN_HERE, kb)
#define tern_continue(kb) tern_continue_at(TERN_HERE, kb)
#define tern_exit(kb) tern_exit_at(TERN_HERE, kb)

/* ---- warpgroup roles ----
 * A block run by warpgroups first .. first + count - 1 of the threadgroup (128 threads each,
 * by local index) while the others skip it or run its else: how a kernel gives its
 * warpgroups different work between two barriers, e.g. a GEMM whose warpgroups 0 and 1
 * multiply one tile while warpgroup 2 stores the tile before it:
 *
 *     tern_barrier(kb);                        // outside any role
 *     TERN_ROLE(kb, 0, 2) { ...copies, tern_wgmma_bf16_async, tern_wgmma_wait(kb, 1)... }
 *     TERN_ELSE(kb) { ...the previous tile's epilogue... }
 *
 * Inside a role's block (or its else, the other warpgroups' role) no barrier, SIMD-group
 * operation, tern_mma_bf16, tern_load_matrix or warpgroup product with A in registers may be
 * traced: they need the whole threadgroup (OpenCL emulates SIMD groups over threadgroup
 * memory and barriers). Warpgroup products from tiles may: an asynchronous one issued
 * directly in a role's block (not its else) may stay in flight past the block's end, and a
 * later block of the same role at the same depth waits for it or chains onto it (nothing
 * outside that role may wait for it or touch its accumulators). Roles do not nest. On the targets that emulate
 * the product (tern_wgmma_bf16 above) a role's product is made by each thread for its own
 * accumulators, k in order from C: what the interpreter computes, bit for bit. */
void tern_role_at(tern_loc at, tern_kb *kb, int first, int count);
#define TERN_ROLE(kb, first, count) for (tern_role_at(TERN_HERE, kb, first, count); tern_once_at(TERN_HERE, kb);)

/* ---- pipes: a producer's warpgroups feeding the others through a ring ----
 * A region in which warpgroups producer_first .. producer_first + producer_count - 1 (the
 * producer) fill the slots of a ring of `stages` in threadgroup memory, one step at a time,
 * and warpgroups 0 .. producer_first - 1 (the consumers) use them in the same order, e.g. a
 * GEMM's k loop whose copies are a third warpgroup's:
 *
 *     tern_pipe p = {.producer_first = 2, .producer_count = 1, .stages = 4, .lag = 1};
 *     TERN_PIPE(kb, &p) {
 *         for (int kt = 0; kt < KT + 2; kt++) {        // traced unrolled, or a TERN_FOR
 *             if (kt < KT) TERN_PRODUCE(kb) { ...tern_copy_async into slot kt % 4... }
 *             if (kt >= 2) TERN_CONSUME(kb) { ...tern_wgmma_bf16_async from slot (kt - 2) % 4,
 *                                               tern_wgmma_wait(kb, 1)... }
 *         }
 *     }
 *
 * The n-th produce block a thread runs is step n (tern_pipe_step: 0, 1, ...) and fills slot
 * n % stages; the n-th consume block uses it. Each role runs its own blocks: on CUDA the
 * producer and the consumers are separate branches, each waiting only for what it needs (a
 * slot filled: the producer's asynchronous copies arrive on the slot's mbarrier; a slot
 * free: the consume block `lag` steps later has ended, so a consume block may leave up to
 * `lag` asynchronous products in flight, the last reading its own slot), with the registers
 * moved by setmaxnreg when producer_regs and consumer_regs are set (multiples of 8 in 24 ..
 * 256). The other targets run the blocks in lockstep in the order traced, a barrier before
 * each, and so the tracer keeps that order one that CUDA's would give: a produce block
 * comes after the consume block that frees its slot (so the producer runs at most stages -
 * lag - 1 steps ahead in the trace: 2 above), a consume block after the produce block that
 * fills it, and every block of the region (and of each block in it) has as many produce
 * as consume blocks. Outside its produce and consume blocks the region holds only values and
 * control flow, no stores, copies, products, barriers or exits; the blocks are warpgroup roles
 * (see above), and nothing in the region breaks, continues or exits. The threadgroup has
 * exactly (producer_first + producer_count) * 128 threads, or, for a producer of one
 * warpgroup's first warps (without setmaxnreg), producer_first * 128 + 32 times the warps
 * (tern_max_threads; CUDA faults on another size). A variable declared before the pipe and
 * used in only one role's blocks has no defined value in the other role's threads after it
 * (the interpreter poisons it there). Pipes do not nest.
 *
 * Threadgroup memory outside the ring passes between the roles in the same order, with no
 * barrier of its own: what consume block c stores, produce blocks from step c - lag + stages
 * on (the first that waits for the slot c frees) see; what produce block n reads or stores
 * is done before consume block n begins (CUDA: every producer thread arrives on the slot's
 * `full` at its block's end). E.g. a GEMM's epilogue staged by the consumers and stored by
 * the producer while they multiply the next tile (src/kernels/gemm_wg.c until commit 704b53c). */
typedef struct tern_pipe {
    int producer_first, producer_count; /* the producer's warpgroups; the consumers are those before */
    int stages;                         /* the ring's slots, 1 .. 32 */
    int lag;                            /* a consume block frees the slot of `lag` steps before, 0 .. stages - 1 */
    int producer_regs, consumer_regs;   /* setmaxnreg on CUDA (0, 0: as launched) */
} tern_pipe;
void tern_pipe_at(tern_loc at, tern_kb *kb, const tern_pipe *pipe);
void tern_produce_at(tern_loc at, tern_kb *kb);
void tern_consume_at(tern_loc at, tern_kb *kb);
/* The step of the produce or consume block being traced (an i32, 0 for a role's first). */
tern_v tern_pipe_step_at(tern_loc at, tern_kb *kb);
#define TERN_PIPE(kb, pipe) for (tern_pipe_at(TERN_HERE, kb, pipe); tern_once_at(TERN_HERE, kb);)
#define TERN_PRODUCE(kb) for (tern_produce_at(TERN_HERE, kb); tern_once_at(TERN_HERE, kb);)
#define TERN_CONSUME(kb) for (tern_consume_at(TERN_HERE, kb); tern_once_at(TERN_HERE, kb);)
#define tern_pipe_step(kb) tern_pipe_step_at(TERN_HERE, kb)
/* A barrier of the threads of the role whose produce or consume block it is in, e.g. the
 * consumers' epilogue staging a tile in threadgroup memory and storing it in other threads'
 * pieces while the producer copies on. Only at the top level of the block (no if or loop of
 * the block's own around it). The block is split there: the values made before the barrier are
 * not visible after it (variables declared outside the block are), and it still counts one
 * step. CUDA: bar.sync of a named barrier over the role's threads (id 1 the consumers', 2 the
 * producer's); the lockstep targets: a whole-threadgroup barrier between the two halves. */
void tern_pipe_sync_at(tern_loc at, tern_kb *kb);
#define tern_pipe_sync(kb) tern_pipe_sync_at(TERN_HERE, kb)

/* A whole tile copied into a pipe's slot by one instruction (CUDA: Hopper's tensor memory
 * accelerator, TMA), for producers whose 16-byte copies would cost more than the consumers'
 * own (bench/h200/NOTES.md, runs 157-158):
 *
 *     TERN_PRODUCE(kb) {
 *         tern_wg_tile a = {tiles, slot_a, 128, false};        // 128 rows of one panel
 *         tern_copy_tile(kb, &a, A, K, m0, k0, 64);            // A [M, K]: rows m0.., k0..
 *     }
 *
 * Copies rows row .. row + dst->rows - 1, columns col .. col + width - 1 of src, a readable
 * bf16 buffer parameter seen as a row-major matrix of `cols` columns (a multiple of 8) and as
 * many whole rows as its length holds, into the tile dst (tern_wg_tile's layout: width / 64
 * panels of dst->rows rows from dst->at; dst->k_rows does not matter). width is 64, 128, 192
 * or 256, dst->rows a multiple of 8 up to 256, col a multiple of 8, and the box lies inside
 * the matrix (the host checks; CUDA reads zeros outside it). Only in a pipe's produce block,
 * reached by all of the producer's threads with the same operands (the host checks): the
 * consume block of the same step sees the tile. CUDA on sm_90: the producer's first thread
 * issues cp.async.bulk.tensor (one a panel, from a tensor map the runtime makes at launch for
 * each matrix and box) and the slot's mbarrier waits for its bytes (threadgroup stores made
 * before the pipe and in consume blocks are fenced against later copies). Elsewhere the
 * producer's threads copy the box 16 bytes at a time (cp.async on sm_80). */
void tern_copy_tile_at(tern_loc at, tern_kb *kb, const tern_wg_tile *dst, tern_v src, int cols, tern_v row,
                       tern_v col, int width);
#define tern_copy_tile(kb, dst, src, cols, row, col, width) \
    tern_copy_tile_at(TERN_HERE, kb, dst, src, cols, row, col, width)

/* For the macros: 1 the first time (enter the body), then closes the block and gives 0. */
int tern_once_at(tern_loc at, tern_kb *kb);
#define TERN_IF(kb, cond) for (tern_if_at(TERN_HERE, kb, cond); tern_once_at(TERN_HERE, kb);)
#define TERN_ELSE(kb) for (tern_else_at(TERN_HERE, kb); tern_once_at(TERN_HERE, kb);)
#define TERN_FOR(kb, i, start, end, step)                                                  \
    for (tern_v i = tern_for_at(TERN_HERE, kb, #i, start, end, step);                      \
         ((void)i, tern_once_at(TERN_HERE, kb));)
#define TERN_WHILE(kb, cond)                                                               \
    for (tern_while_at(TERN_HERE, kb), tern_while_test_at(TERN_HERE, kb, cond);            \
         tern_once_at(TERN_HERE, kb);)

/* ---- overlapping a kernel with the previous one ----
 * tern_wait_previous marks the point from which the results of the kernels launched before
 * this one (on the same stream or queue) are visible. What is traced before it may only read
 * memory that no earlier kernel writes (weights, scalar parameters) and may not write device
 * memory at all (an earlier kernel may still be reading it); threadgroup memory is fine. The
 * cuda runtime launches a kernel that has the wait so that it may start while the previous
 * kernel still runs (programmatic dependent launch, sm_90 and newer; TERN_CUDA_PDL=0 turns it
 * off for a runtime opened by name, tern_rt_no_overlap for any), and the wait is PTX griddepcontrol.wait. Kernels run one after the other on the other
 * runtimes, so there it does nothing. It must be traced at top level (every thread reaches
 * it), after no store, atomic or exit to device memory; later waits do nothing. A function
 * (tern_result) may contain it, but tern_call leaves it out: the caller's own statements come
 * before it, so only the caller can place its kernel's wait. */
void tern_wait_previous_at(tern_loc at, tern_kb *kb);
#define tern_wait_previous(kb) tern_wait_previous_at(TERN_HERE, kb)

/* A hint to fetch element `index` of buffer parameter `buf` (declared readable) into the
 * device's L2 cache: CUDA prefetch.global.L2, OpenCL prefetch(); nothing on Metal and the
 * host. It changes nothing a kernel can observe, so it may come before tern_wait_previous even
 * for memory an earlier kernel writes. index must be in bounds (the host checks). */
void tern_prefetch_at(tern_loc at, tern_v buf, tern_v index);
#define tern_prefetch(buf, index) tern_prefetch_at(TERN_HERE, buf, index)

/* ---- debugging ---- */

/* Prints from every thread that runs it: fmt with one `{}` per value, e.g.
 * tern_print(kb, "i={} x={}", i, x). Not allowed in pure kernels; a no-op in Metal. */
void tern_print_at(tern_loc at, tern_kb *kb, const char *fmt, int count, const tern_v *values);
#define tern_print(kb, fmt, ...)                                                           \
    tern_print_at(TERN_HERE, kb, fmt,                                                      \
                  (int)(sizeof((tern_v[]){__VA_ARGS__}) / sizeof(tern_v)),                 \
                  (tern_v[]){__VA_ARGS__})

/* ---- pure functions ----
 * A kernel whose scalar parameters are its inputs and that ends with tern_result is a pure
 * function, as taken by the generic operations (build, zip_with, reduce) and by tern_call.
 * It may not print, store, use atomics, barriers, asynchronous copies, SIMD operations,
 * threadgroup memory or thread attributes. */
void tern_result_at(tern_loc at, tern_kb *kb, tern_v value);
#define tern_result(kb, value) tern_result_at(TERN_HERE, kb, value)

/* Inlines pure function fn (its statements become the caller's) with the given
 * arguments, one per parameter; returns its result. */
tern_v tern_call_at(tern_loc at, tern_kb *kb, const tern_kernel *fn, int count, const tern_v *args);
#define tern_call(kb, fn, ...)                                                             \
    tern_call_at(TERN_HERE, kb, fn, (int)(sizeof((tern_v[]){__VA_ARGS__}) / sizeof(tern_v)), \
                 (tern_v[]){__VA_ARGS__})

/* NULL when k is pure; otherwise an error "<op>: kernel 'name' is not pure: it <does
 * what> (file:line)". op names the operation that asked (e.g. "zip_with"). */
tern_error *tern_kernel_check_pure(const tern_kernel *k, const char *op) TERN_MUST_USE;

/* ---- a kernel's description ---- */

const char *tern_kernel_name(const tern_kernel *k);
int tern_kernel_param_count(const tern_kernel *k);
typedef struct tern_param_info {
    const char *name;
    bool is_buffer;
    tern_type type; /* element type of a buffer, or the scalar's type */
    tern_intent intent;
} tern_param_info;
tern_param_info tern_kernel_param(const tern_kernel *k, int index);
bool tern_kernel_is_function(const tern_kernel *k); /* ends with tern_result */
tern_type tern_kernel_result_type(const tern_kernel *k);
size_t tern_kernel_shared_bytes(const tern_kernel *k);
/* A 64-bit hash of the kernel's statements, types, names and constants. */
uint64_t tern_kernel_hash(const tern_kernel *k);
/* The kernel's statements as text, one per line (malloc'd; free()). NULL when out of memory. */
char *tern_kernel_dump(const tern_kernel *k);

/* ---- emitters ---- */

typedef enum tern_target {
    TERN_TARGET_CUDA,
    TERN_TARGET_OPENCL,
    TERN_TARGET_METAL,
} tern_target;
const char *tern_target_name(tern_target t); /* "cuda", "opencl", "metal" */

/* The kernel as source for target t, in *out (malloc'd; free()). Names and structure
 * follow the trace. A function kernel is emitted as a device function. */
tern_error *tern_kernel_emit(const tern_kernel *k, tern_target t, char **out) TERN_MUST_USE;

/* Compiles k with NVRTC for `arch` (e.g. "sm_90"; needs no GPU): *image is the cubin
 * (malloc'd, size in *size; both may be NULL to only compile). A compile error names the
 * kernel and the DSL statement. Fails when tern was built without the CUDA toolkit. */
tern_error *tern_nvrtc_compile(const tern_kernel *k, const char *arch, void **image,
                               size_t *size) TERN_MUST_USE;

/* ---- runtimes ---- */

typedef struct tern_rt tern_rt;

/* Opens runtime `name`: "host" (the interpreter), "opencl" or "cuda". NULL or "" means the
 * environment variable TERN_GPU, and "host" when that is unset. The opencl runtime takes
 * the first GPU (else the first device); TERN_OPENCL_DEVICE=<index or name part> picks
 * another. The cuda runtime takes device 0 (TERN_CUDA_DEVICE=<index> picks another) and
 * fails with an error naming the cause when there is no driver or device. */
tern_error *tern_rt_open(const char *name, tern_rt **out) TERN_MUST_USE;
/* A runtime over a caller's OpenCL context, device and in-order queue (cl_context,
 * cl_device_id, cl_command_queue), which stay the caller's. */
tern_error *tern_rt_wrap_opencl(void *context, void *device, void *queue,
                                tern_rt **out) TERN_MUST_USE;
/* A runtime over a caller's CUDA context and stream (CUcontext, CUstream; NULL stream is
 * the default stream), which stay the caller's. The context is made current around each
 * call. tern_rt_set_stream changes the stream later launches go to. */
tern_error *tern_rt_wrap_cuda(void *context, void *stream, tern_rt **out) TERN_MUST_USE;
tern_error *tern_rt_set_stream(tern_rt *rt, void *stream) TERN_MUST_USE;
/* Kernels with tern_wait_previous launch after the previous kernel has completed from now on,
 * not overlapping it (programmatic dependent launch off: for measurements; cuda only, a no-op
 * on the other runtimes). */
void tern_rt_no_overlap(tern_rt *rt);
/* The next kernel launched starts after every kernel before it has finished, even one with
 * tern_wait_previous (its code before the wait included; the kernels after it may overlap
 * it as usual): a point where nothing launched earlier is still in flight. cuda only, a
 * no-op on the other runtimes (their launches never overlap). */
void tern_rt_fence(tern_rt *rt);
void tern_rt_close(tern_rt *rt);

const char *tern_rt_name(const tern_rt *rt);   /* "host", "opencl", "cuda" */
const char *tern_rt_device(const tern_rt *rt); /* e.g. "NVIDIA H200" */

/* Device memory of a runtime: `mem` is a host pointer (host), a cl_mem (opencl) or a
 * CUdeviceptr (cuda), and the view covers elements [offset, offset + len). */
typedef struct tern_dbuf {
    void *mem;
    size_t offset;
    size_t len;
    tern_type type;
} tern_dbuf;

tern_error *tern_rt_alloc(tern_rt *rt, tern_type type, size_t len, tern_dbuf *out) TERN_MUST_USE;
void tern_rt_free(tern_rt *rt, tern_dbuf *buf); /* a whole allocation; absent: no-op */
/* upload copies src after the work queued before it and before any queued after; on cuda
 * it returns without waiting for that work, once the driver has staged src (ordinary,
 * pageable memory: src may be reused at once; a page-locked src is read later, so it must
 * stay as it is until the next synchronising call). download waits for the work queued
 * before it. */
tern_error *tern_rt_upload(tern_rt *rt, tern_dbuf dst, const void *src) TERN_MUST_USE;
tern_error *tern_rt_download(tern_rt *rt, void *dst, tern_dbuf src) TERN_MUST_USE;
/* Waits for queued launches; reports an asynchronous fault as an error. */
tern_error *tern_rt_sync(tern_rt *rt) TERN_MUST_USE;
/* A download that does not wait: src as the work queued before this call leaves it, in dst
 * once tern_rt_download_wait returns, which waits for that copy only (not for work queued
 * after it: a host can queue the next work before it reads the result of the last). dst
 * stays the caller's and must not be read or freed until then; one download may be pending
 * at a time (another is an error). Where a runtime cannot copy in the background (host,
 * opencl), the copy is made at once. */
tern_error *tern_rt_download_async(tern_rt *rt, void *dst, tern_dbuf src) TERN_MUST_USE;
tern_error *tern_rt_download_wait(tern_rt *rt) TERN_MUST_USE;

/* Launch arguments, one per kernel parameter, in order. */
typedef enum tern_arg_kind {
    TERN_ARG_DEVICE, /* a tern_dbuf of the runtime */
    TERN_ARG_HOST,   /* a host array, copied in before and (when written) out after */
    TERN_ARG_SCALAR,
} tern_arg_kind;
typedef struct tern_arg {
    tern_arg_kind kind;
    tern_type type;      /* element type of a buffer, or the scalar's type */
    bool read_only;      /* a host array the kernel may not write */
    void *mem;           /* DEVICE: as tern_dbuf.mem; HOST: the array */
    size_t offset, len;  /* in elements */
    union {
        int64_t i;
        uint64_t u;
        double f;
    } value;             /* SCALAR */
} tern_arg;

tern_arg tern_arg_dev(tern_dbuf b);
/* An effect buffer of the handler whose device memory this runtime shares. */
tern_arg tern_arg_buf(tern_buf b);
tern_arg tern_arg_host(tern_type type, void *data, size_t len);
tern_arg tern_arg_host_in(tern_type type, const void *data, size_t len);
tern_arg tern_arg_i32(int32_t x);
tern_arg tern_arg_u32(uint32_t x);
tern_arg tern_arg_i64(int64_t x);
tern_arg tern_arg_u64(uint64_t x);
tern_arg tern_arg_f32(float x);

typedef struct tern_dims {
    uint32_t x, y, z;
} tern_dims;
static inline tern_dims tern_dims1(uint32_t x) {
    tern_dims d = {x, 1, 1};
    return d;
}
static inline tern_dims tern_dims2(uint32_t x, uint32_t y) {
    tern_dims d = {x, y, 1};
    return d;
}
static inline tern_dims tern_dims3(uint32_t x, uint32_t y, uint32_t z) {
    tern_dims d = {x, y, z};
    return d;
}

/* Runs k over `grid` threadgroups of `group` threads (at most 1024 per group). Wrong
 * argument counts or types are errors naming the kernel and the parameter. Launches with
 * device arguments only are asynchronous on GPU runtimes; with host arrays the call
 * waits and copies them back. */
tern_error *tern_launch(tern_rt *rt, const tern_kernel *k, tern_dims grid, tern_dims group,
                        const tern_arg *args, size_t count) TERN_MUST_USE;

/* Compiles k for rt now (launch does it on first use); the result is cached. */
tern_error *tern_rt_prepare(tern_rt *rt, const tern_kernel *k) TERN_MUST_USE;

/* ---- the generic operations on a runtime ----
 * fn is a pure function (see tern_result); buffers may be any numeric element type, and
 * values pass through their value type (bf16 -> f32, ...).
 *   build     out[i] = fn(i), i an i32 or i64 (fn's one parameter); the result is
 *             converted to out's value type as tern_cast does.
 *   zip_with  out[i] = fn(a[i], b[i]); a, b and out of one length; fn's parameters have
 *             a's and b's value types; the result is converted to out's.
 *   reduce    *out = fn(... fn(fn(init, a[0]), a[1]) ..., a[n-1]), combined in an
 *             unspecified order (fn must be associative and commutative); init for n = 0.
 *   reduce's fn takes and returns a's value type; init is converted to it.
 *   index_of  *out = the first i with a[i] == value (value rounded to a's element type,
 *             so 0.1 finds a bf16 0.1), or -1 (also when no element can equal it). */
tern_error *tern_rt_build(tern_rt *rt, tern_arg out, const tern_kernel *fn) TERN_MUST_USE;
tern_error *tern_rt_zip_with(tern_rt *rt, tern_arg out, tern_arg a, tern_arg b,
                             const tern_kernel *fn) TERN_MUST_USE;
tern_error *tern_rt_reduce(tern_rt *rt, tern_arg a, double init, const tern_kernel *fn,
                           double *out) TERN_MUST_USE;
tern_error *tern_rt_index_of(tern_rt *rt, tern_arg a, double value, int64_t *out) TERN_MUST_USE;

/* The same over host memory, for handlers whose buffers are host pointers (the cpu
 * handler): run by the host interpreter on one process-wide host runtime. */
tern_error *tern_host_build(tern_buf out, const tern_kernel *fn) TERN_MUST_USE;
tern_error *tern_host_zip_with(tern_buf out, tern_buf a, tern_buf b, const tern_kernel *fn) TERN_MUST_USE;
tern_error *tern_host_reduce(tern_buf a, double init, const tern_kernel *fn, double *out) TERN_MUST_USE;
tern_error *tern_host_index_of(tern_buf a, double value, int64_t *out) TERN_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
