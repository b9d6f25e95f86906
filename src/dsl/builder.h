/* The trace state behind tern_kb, shared by the DSL's source files (dsl_*.c). */
#ifndef TERN_KERNEL_BUILDER_H
#define TERN_KERNEL_BUILDER_H

#include "dsl/eval.h"
#include "dsl/ir.h"

/* An open block: the instruction that opened it and whether a macro entered its body. */
typedef struct kb_frame {
    int32_t ins;  /* IF, ELSE, FOR or WHILE instruction */
    bool entered; /* for tern_once_at */
    bool in_cond; /* a WHILE whose condition is being traced */
    int32_t role; /* a warpgroup role's block (tern_role): its key, else 0 */
    int32_t pipe_p, pipe_c; /* a pipe's blocks opened before this frame (kb's counts then) */
} kb_frame;

/* An asynchronous warpgroup product in flight (tern_wgmma_bf16_async): the block depth it was
 * issued at, the role it was issued in (0: none) and its accumulator variables, which nothing
 * may read or assign until a tern_wgmma_wait completes it. */
typedef struct kb_wg_async {
    int32_t depth, role;
    int32_t nvars;
    int32_t vars[IR_WG_MAX_N / 2];
} kb_wg_async;

struct tern_kb {
    tern_kernel *k;
    tern_error *err; /* the first error; later DSL calls do nothing */
    kb_frame *frames;
    int32_t depth, cap_frames;
    int32_t loops;        /* open FOR / WHILE blocks */
    const char *last_file; /* cache of the last location's file string id */
    int32_t last_file_id;
    int32_t thread_vals[9][3]; /* value id + 1 of each thread attribute made so far */
    kb_wg_async wg_pending[IR_WG_MAX_PENDING]; /* oldest first */
    int32_t nwg_pending;
    int32_t role_depth, role; /* the open role block's depth and key (0, 0: none) */
    int32_t closed_role_if, closed_role; /* the last role block closed: its IF, its key */
    /* an open pipe: its region's depth (0: none), spec, step variable, and how many of its
     * produce and consume blocks have been traced */
    int32_t pipe_depth;
    ir_pipe_spec pipe;
    tern_v pipe_step;
    int32_t pipe_p, pipe_c;
    bool pipe_splitting; /* tern_pipe_sync is closing a block that goes on after it */
};

/* Records an error when `op` may not be traced where the builder is: inside a pipe's region
 * but outside its produce and consume blocks only values and plain control flow may be (each
 * role runs the region on its own on CUDA), and nothing may leave a pipe's blocks early. */
bool kb_refuse_in_pipe(tern_kb *kb, tern_loc at, ir_op op);
/* At the end of a block: a pipe's produce or consume block counts its step (and a consume
 * block leaves at most the lag's products in flight); any other block in a pipe, and the
 * region itself, has as many produce as consume blocks. False after an error. */
bool kb_pipe_end(tern_kb *kb, tern_loc at);
/* Whether the innermost role block open is a pipe's produce block (tern_copy_tile's place). */
bool kb_in_produce(const tern_kb *kb);
/* Opens a block frame for instruction ins (-1 after an error) with a role key (0: none). */
void kb_push(tern_kb *kb, tern_loc at, int32_t ins, int32_t role);
/* Opens the block of warpgroups first .. first + count - 1 (an IR_IF of aux and imm, on
 * whether local index / 128 is among them) as their role's: tern_role and a pipe's blocks. */
void kb_open_role(tern_kb *kb, tern_loc at, int first, int count, uint8_t aux, int64_t imm);

/* Records an error when a collective that needs the whole threadgroup (a barrier, a SIMD-group
 * operation as OpenCL emulates them) is traced inside a warpgroup role's block. */
bool kb_refuse_in_role(tern_kb *kb, tern_loc at, const char *what);

/* Whether variable `var` is an accumulator of an asynchronous product in flight; if so the
 * error (naming `what` done to it) is recorded. */
bool kb_wg_var_busy(tern_kb *kb, tern_loc at, int32_t var, const char *what);

/* Records the first error: "kernel 'name': <message> (file:line)". */
void kb_fail(tern_kb *kb, tern_loc at, const char *fmt, ...) TERN_PRINTF(3, 4);
/* Whether kb can take more statements (not NULL, no error so far). */
static inline bool kb_ok(const tern_kb *kb) { return kb && !kb->err; }

/* The innermost open block (its opening instruction), -1 at top level. */
int32_t kb_block(const tern_kb *kb);
/* Whether a value or variable defined in `block` is visible here. */
bool kb_visible(const tern_kb *kb, int32_t block);

/* Appends `in` at `at`; when `type` is not void it defines a new value (returned in
 * in->dst and as the result). Returns -1 after recording an error. */
int32_t kb_emit(tern_kb *kb, tern_loc at, ir_ins *in, int type);

/* The builder of the operands (the first that has one), checking they agree. NULL when
 * all are constants; *bad is set when two builders differ or an operand is poisoned. */
tern_kb *kb_of(const tern_v *vs, int n);

/* The type of an operand (a constant's own type, a variable's, a value's). TERN_T_VOID for
 * a buffer or an invalid operand. */
int kb_type_of(const tern_kb *kb, tern_v v);

/* A value id for operand v of type `type` (a weak literal takes it; others must already
 * have it), emitting a CONST or a variable read where needed. `what` names the operand
 * in errors. -1 after an error. */
int32_t kb_use(tern_kb *kb, tern_loc at, tern_v v, int type, const char *what);

/* A buffer operand's id, checking it is a buffer of this kernel. -1 after an error. */
int32_t kb_buf(tern_kb *kb, tern_loc at, tern_v v, const char *what);

/* A threadgroup array (tern_shared) whose offset is a multiple of `align` (a power of two
 * from 16). */
tern_v kb_shared(tern_kb *kb, tern_loc at, const char *name, tern_type elem, size_t count, size_t align);
/* Result handles. */
tern_v kb_value(tern_kb *kb, int32_t id);
tern_v kb_none(tern_kb *kb);
tern_v kb_const(int type, ev x, bool weak);
/* A constant that failed to fold (no builder to report to yet): reported when it is used
 * with one. */
tern_v kb_poison(tern_loc at, int op, int ta, int tb);

/* Checks a C identifier for a name (at most 63 characters). */
bool kb_name_ok(const char *name);

/* The unified type of two operands for a binary operation (weak literals adapt), or
 * TERN_T_VOID with *why set. */
int kb_unify(const tern_kb *kb, tern_v a, tern_v b);

/* Whether a weak integer literal's value is representable in type t. */
bool kb_literal_fits(int64_t x, int t);

#endif
