/* The Tensor effect: the one list of tensor operations that every handler answers.
 *
 * A model is written against these operations only. A handler `h` (cpu, cuda, opencl, host)
 * answers each with a function tern_<h>_<op> of the signature given by the op list below.
 * The list is an X-macro: each handler's build expands it into its entry points (generated:
 * the device check, the shared validation, then the handler's body <h>_<op>; see
 * src/handlers/seam.h), the bodies' declarations (a wrong signature is a compile error:
 * "conflicting types for 'cpu_matmul'") and a table of references (a missing body is a link
 * error: "undefined reference to `cpu_matmul'"). See docs/effects.md for each operation's
 * contract and errors.
 *
 * Conventions shared by every operation:
 *  - the first parameter is the handler's device, the result is NULL or an error;
 *  - buffers are passed by value as views (tern_buf); the handler validates their dtype and
 *    length against the shape arguments and returns an error, never touching memory
 *    outside a view;
 *  - matrices are row-major; a shape comment [a, b] means a rows of b elements;
 *  - operations may be asynchronous: their effects are visible to download, get and sync,
 *    and device faults surface as an error from the next synchronising operation.
 */
#ifndef TERN_EFFECT_H
#define TERN_EFFECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tern_dtype {
    TERN_F32,
    TERN_BF16,
    TERN_F16,
    TERN_I32,
    TERN_U16,
    /* 8-bit weights in blocks, as llama.cpp's q8_0: every TERN_Q8_BLOCK consecutive weights
     * share one scale d (an f16), weight i of a block = d * q[i], q int8 in [-127, 127].
     * Stored as blocks of TERN_Q8_BLOCK_BYTES: d first (2 bytes, little-endian f16), then
     * the 32 q. A buffer's len and a view's offset count weights (elements), as for every
     * dtype, but only whole blocks exist: alloc's len and a view's offset and len are
     * multiples of TERN_Q8_BLOCK. Only memory operations (alloc, free, upload, download of
     * the blocks as stored, copy: to q8 quantizes, from q8 dequantizes, length) and matmul's B
     * (stored [n, k], trans_b, k a multiple of 32: the blocks run along k) take it; cpu
     * answers, the GPU handlers refuse it ("not supported"). See docs/effects.md. */
    TERN_Q8,
} tern_dtype;

#define TERN_DTYPE_COUNT 6
/* The element dtypes (f32 .. u16), one element of tern_dtype_size bytes each; TERN_Q8
 * comes after them. */
#define TERN_DTYPE_ELEMENT_COUNT 5
#define TERN_Q8_BLOCK 32
#define TERN_Q8_BLOCK_BYTES 34

/* Bytes of one element; 0 for TERN_Q8, which has no whole bytes per element: use
 * tern_dtype_bytes. */
size_t tern_dtype_size(tern_dtype dtype);
/* Bytes that elements [0, n) take as stored: n * tern_dtype_size, or for TERN_Q8 the
 * blocks that hold them (n / 32 * 34, n rounded up to whole blocks). */
size_t tern_dtype_bytes(tern_dtype dtype, size_t n);
const char *tern_dtype_name(tern_dtype dtype); /* "f32", "bf16", ..., "q8_0" */
bool tern_dtype_is_float(tern_dtype dtype);     /* f32, bf16, f16 (not q8_0) */

/* A typed view of device memory owned by a handler.
 * `mem` is the handler's handle of the whole allocation (a host pointer for cpu, a device
 * address for cuda, a cl_mem for opencl); the view covers elements [offset, offset + len).
 * A buffer with len 0 is "absent" (optional arguments). A view made out of range has
 * mem == NULL and len > 0; every operation rejects it. */
typedef struct tern_buf {
    void *mem;
    size_t offset;
    size_t len;
    tern_dtype dtype;
} tern_buf;

/* The absent buffer, for optional arguments. */
static inline tern_buf tern_none(void) {
    tern_buf none = {NULL, 0, 0, TERN_F32};
    return none;
}

/* Elements [offset, offset + len) of b. Out of range gives an invalid view (see above). */
static inline tern_buf tern_view(tern_buf b, size_t offset, size_t len) {
    tern_buf v = b;
    if (offset > b.len || len > b.len - offset || (!b.mem && b.len > 0)) {
        v.mem = NULL;
    } else {
        v.offset = b.offset + offset;
    }
    v.len = len;
    return v;
}

/* A handler's device: its context, queues, library handles and scratch space. Each handler
 * defines the structure privately; models only pass it along. */
typedef struct tern_dev tern_dev;

/* A traced DSL kernel (tern/kernel.h); the generic operations take pure ones. */
typedef struct tern_kernel tern_kernel;

/* A communicator across processes (tern/dist.h), for allreduce and allgather. */
typedef struct tern_dist tern_dist;

/* C[m, n] = alpha * op(A)[m, k] @ op(B)[k, n] + beta * addend + bias[n], then the epilogue.
 * op(X) is X, or X transposed when trans_x is set (A is then stored [k, m], B [n, k]).
 * lda, ldb, ldc are row strides in elements (0: dense). With batch > 1, entry i uses
 * A + i * stride_a, B + i * stride_b, C + i * stride_c (0: dense). A, B and C may each be
 * f32 or bf16 (f16 or q8_0 for B; a q8_0 B is stored [n, k]: trans_b, k, ldb and stride_b
 * multiples of 32); accumulation is in f32.
 * addend is what beta multiplies: C itself when absent (or the very same view as C), else a
 * buffer laid out exactly as C (same dtype, length, ldc, stride_c and batch) that must not
 * overlap C; it lets a residual update y = x + x_in @ W + b write y without first copying x
 * into it. With beta == 0 neither C nor addend is read.
 * bias_grad, when present, receives beta * bias_grad + the sums of op(B)'s k rows ([n]): a
 * layer's bias gradient when B is its output gradient, so that the weight gradient's product
 * (dW = X^T dY) yields it too (cuBLASLt's BGRAD epilogue) instead of a pass of its own over
 * dY. B not transposed and dense (ldb == n), one batch, no epilogue, no bias, no separate
 * addend; bias_grad f32 or bf16, disjoint from A, B and C.
 * col_sums, when present, receives col_sums_beta * col_sums + the sums of C's m rows as
 * written ([n]): the bias gradient of the layer whose output gradient C is, in the product
 * that makes it (GPT-2's dfch = gelu'(fch) (dres W^T) and d(b_fc)), so that a GPU's
 * product may sum C's tiles as it stores them. C dense (ldc == n), one batch, no SWIGLU or
 * ROPE epilogue; col_sums f32 or bf16, disjoint from A, B, C, bias, aux and addend. */
typedef enum tern_epilogue {
    TERN_EPILOGUE_NONE,
    TERN_EPILOGUE_GELU, /* C = gelu(result); aux, when present, receives the pre-activation */
    /* C = gelu'(aux) * (alpha op(A) op(B)): the product followed by gelu_backward(C, C, aux),
     * the backward pass of a GELU whose pre-activation is aux (required, [m, n] dense, C's
     * dtype). No bias, beta == 0, no addend, one batch. */
    TERN_EPILOGUE_GELU_BACKWARD,
    /* C [m, n/2] = silu(P[:, :n/2]) * P[:, n/2:], P = alpha op(A) op(B) + bias [n]: the
     * SwiGLU of a fused gate|up product (gate rows of B first, then up), silu(g) = g / (1 +
     * exp(-g)). aux, when present [m, n] (dense), receives P (the backward's input); P may
     * be rounded to aux's dtype, or C's when aux is absent, before the activation (composed
     * paths do). n even, ldc >= n/2 (0: n/2), beta == 0, no addend, one batch. */
    TERN_EPILOGUE_SWIGLU,
    /* C [m, n] = P = alpha op(A) op(B) + bias [n] with rope's rotation (below) applied to the
     * first rope.heads heads of rope.head_dim columns of each row: the rotary embedding of a
     * fused q|k|v product (q and k heads first, v after them, untouched), row i at position
     * rope.pos[i] (i32 [m]) with rope.inv_freq (f32 [head_dim / 2]). P may be rounded to C's
     * dtype before the rotation (composed paths do). head_dim even and dividing n, heads *
     * head_dim <= n, beta == 0, no addend, no aux, one batch. */
    TERN_EPILOGUE_ROPE,
} tern_epilogue;

/* The ROPE epilogue's positions [m], frequencies [head_dim / 2] and rotated heads. */
typedef struct tern_matmul_rope {
    tern_buf pos, inv_freq;
    int heads, head_dim;
} tern_matmul_rope;

/* What A's rows are before the product. LAYERNORM: op(A) = layernorm's output for A's rows
 * (mean and biased variance over each row's k values, (a - mean) / sqrt(var + eps) *
 * norm.w + norm.b); RMSNORM: rmsnorm's (a / sqrt(mean(a^2) + eps) * norm.w). The normalised
 * values may be rounded to A's dtype (composed paths do: layernorm or rmsnorm into a
 * temporary, then the product). It lets a decoding step's norm happen where a GEMV stages A
 * anyway, instead of a kernel of its own. A not transposed, one batch; norm.w [k], norm.b [k]
 * or absent (LAYERNORM only; absent means 0), eps finite and >= 0.
 * ATTENTION: A is first written as attention_cached's out with att's arguments (the caches
 * extended as that operation does), then the product reads it: a decoding step's attention
 * and the projection after it in one call, so that a GPU's GEMV may merge the attention's
 * split parts where it stages A, instead of the attention merging them first. A dense
 * [B T, NH hs] (m = att.B att.T, k = att.NH att.hs), one batch; C, aux and B must not touch
 * A, the caches, qkv or pos. Where att.product is given, qkv is first written as
 * matmul(qkv, att.x, att.w, att.product) (the q|k|v product, its own prologue and bias; no
 * ATTENTION prologue of its own), then the attention reads it: the whole of a decoding
 * step's attention block in one call, so that a GPU may compute q, k and v where the
 * attention needs them instead of in a kernel before it. */
typedef enum tern_prologue {
    TERN_PROLOGUE_NONE,
    TERN_PROLOGUE_LAYERNORM,
    TERN_PROLOGUE_RMSNORM,
    TERN_PROLOGUE_ATTENTION,
} tern_prologue;

typedef struct tern_matmul_norm {
    tern_buf w, b;
    float eps;
} tern_matmul_norm;

/* The ATTENTION prologue's attention_cached arguments (out is A), and optionally the
 * product that writes qkv first (product NULL: qkv is an input). */
typedef struct tern_matmul_attention {
    tern_buf k_cache, v_cache, qkv, pos;
    int B, T, NH, KV, hs, max_T;
    const struct tern_matmul *product; /* qkv = x @ w as *product says, or NULL */
    tern_buf x, w;                     /* the product's A and B */
} tern_matmul_attention;

typedef struct tern_matmul {
    int m, n, k;
    bool trans_a, trans_b;
    int lda, ldb, ldc;
    int batch;
    long stride_a, stride_b, stride_c;
    float alpha, beta;
    tern_buf bias; /* [n], or absent */
    tern_epilogue epilogue;
    tern_buf aux;    /* [m, n] (dense), or absent; written by GELU, read by GELU_BACKWARD */
    tern_buf addend; /* laid out as C: what beta multiplies instead of C; or absent */
    tern_buf bias_grad; /* [n]: beta * bias_grad + the column sums of op(B); or absent */
    tern_buf col_sums;  /* [n]: col_sums_beta * col_sums + the column sums of C; or absent */
    float col_sums_beta;
    tern_matmul_rope rope; /* the ROPE epilogue's; unused otherwise */
    tern_prologue prologue; /* NONE, A's rows normalised first (LAYERNORM, RMSNORM), or A
                             * written by a cached attention first (ATTENTION) */
    tern_matmul_norm norm;  /* the norm prologues'; unused otherwise */
    tern_matmul_attention att; /* the ATTENTION prologue's; unused otherwise */
} tern_matmul;

/* One AdamW step with PyTorch's semantics (decoupled decay, bias correction):
 *   g = grad * grad_scale
 *   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
 *   p = p - lr (weight_decay p + (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)) */
typedef struct tern_adamw {
    float lr, beta1, beta2, eps, weight_decay;
    int step; /* 1 for the first step */
    float grad_scale;
} tern_adamw;

/* Operation contracts (docs/effects.md has the full text, errors included).
 *
 * device
 *   open            a new device of this handler, tuned by `options` ("key=value,..." or NULL:
 *                   e.g. "device=1"; after the handler's one environment variable,
 *                   TERN_<H>_TUNE; an unknown key is an error naming it; docs/effects.md
 *                   lists each handler's keys); close releases it (free its buffers
 *                   first). device_name: a string owned by the device, e.g. "NVIDIA H200".
 *   sync            waits for queued work; reports an asynchronous fault as an error.
 * memory
 *   alloc           a new buffer of len > 0 elements, contents undefined.
 *   free            releases a whole allocation (offset 0) and makes *buf absent; absent: no-op.
 *   upload          dst.len elements from host memory, already in dst's dtype.
 *   download        src.len elements to host memory, in src's dtype. Synchronising.
 *   download_async  as download, without waiting: dst holds src as the operations queued
 *                   before it leave it once download_wait returns. dst must stay valid and
 *                   unread until then; one may be pending at a time.
 *   download_wait   waits for the pending download_async only, not for operations queued
 *                   after it (decoding queues the next step, then reads the last token).
 *                   Not synchronising: a fault of a kernel surfaces at the next download,
 *                   get or sync. No pending download: nothing to do.
 *   copy            dst.len == src.len; converts between dtypes (floats round to nearest even,
 *                   floats to integers truncate). The two must not overlap. To q8_0 from a
 *                   float dtype it quantizes (per block d = max |x| / 127 rounded to f16,
 *                   q = x / d rounded to nearest, ties away from 0); from q8_0 to a float
 *                   dtype it dequantizes (d * q); q8_0 to q8_0 copies the blocks.
 *   fill            every element of dst becomes value, converted to dst's dtype.
 * generic
 *   get             element `index` (< a.len) as a double. Synchronising.
 *   length          a.len.
 *   from_list       a new buffer of `count` elements converted from values.
 *   load            a new buffer holding tensor `name` of the safetensors file at `path`
 *                   (F32, F16 or BF16 in the file), converted to the float dtype `dtype`.
 *   build           out[i] = k(i) for every i < out.len; k a pure DSL function of its index.
 *   zip_with        out[i] = combine(a[i], b[i]) (equal lengths).
 *   reduce          *out = combine(... combine(init, a[0]) ..., a[n-1]), in any order
 *                   (combine associative and commutative); init when a is empty.
 *   index_of        *out = the first i with a[i] == value, or -1.
 *                   A kernel that is not pure (prints, stores, atomics, barriers) is an error
 *                   naming the operation and the kernel. See docs/kernels.md.
 *   capture_begin   starts a replayable section identified by `key`. When *replay is set the
 *   capture_end     handler already holds the section: the caller skips the operations inside
 *                   and capture_end replays them. Operations inside may depend only on buffer
 *                   contents, never on host values that change between replays; the key must
 *                   change whenever any argument inside does. Handlers without graphs always
 *                   answer *replay = false and run the operations directly.
 *   replay_steps    *out = how many steps of a loop (decoding's one-token steps) one
 *                   replayable section should hold: the handler's replay_steps option (1;
 *                   cuda 8). More steps a section share its launch and the host's round
 *                   trip; the caller then gets their results in bursts.
 *   fence           the operations queued after it start only after every one before it has
 *                   finished, even where a handler lets a kernel start before the one before
 *                   it ends (cuda's programmatic dependent launch): from there on, what the
 *                   operations before it wrote may be read early again (decoding's cached
 *                   keys, a step of a section after the step that wrote them). A no-op where
 *                   operations never overlap (cpu, opencl, interp).
 * linear algebra
 *   matmul          see tern_matmul. c must not overlap a or b. addend (when present and
 *                   not c's own view) is read instead of c by the beta term and must not
 *                   overlap c. Epilogue GELU_BACKWARD: c = gelu'(aux) * alpha op(a) op(b).
 *   sum_rows        out[cols] = beta * out + sum over r of x[r, :]     (x [rows, cols])
 *   add             out = a + b elementwise (equal lengths; out may be a or b).
 *   norm2           *out = sqrt(sum of x^2), accumulated in double. Synchronising.
 * GPT-2 and the Llama family (every float buffer may be f32 or bf16 unless stated; math f32)
 *   embed           out[B*T, C] = wte[tokens[b*T + t], :] + wpe[p0 + t, :], p0 = pos[0] (i32)
 *                   or 0 when pos is absent. tokens i32 [B*T]; wte [>= V, C]; wpe [max_T, C],
 *                   or absent (no position table, as Llama): out = wte[tokens].
 *   embed_backward  dwte[tokens[i], :] += dout[i, :];  dwpe[t, :] += sum over b of dout[b*T + t, :].
 *   layernorm       per row of x [rows, C]: mu, var (biased), rstd = 1 / sqrt(var + eps);
 *                   out = (x - mu) * rstd * w + b. mean, rstd: f32 [rows], stored when present.
 *   layernorm_backward  dx += dL/dx (accumulates); dw = grad_beta dw + sum dout * xhat,
 *                   db = grad_beta db + sum dout; dsum, when present [C], = grad_beta dsum +
 *                   the column sums of the updated dx (when dx is a residual's gradient: the
 *                   bias gradient of the layer whose output was added into that residual).
 *                   grad_beta 0: dw, db, dsum are written, not read (they may hold NaN).
 *                   out, when present [rows, C], = the forward's output (x - mean) rstd w + b
 *                   again, written as layernorm writes it (b [C] then required): a backward
 *                   that recomputes the layer norm's output for the weight gradient that
 *                   reads it next, in the pass that reads x anyway, instead of keeping it.
 *                   mean absent: x is the forward's output y (out then absent, b required),
 *                   and xhat = (y - b) / w, each |w| taken as at least 1e-6: a backward that
 *                   needs only the output, which the weight gradient after it keeps anyway,
 *                   instead of the input too. Exact up to y's rounding divided by w: for
 *                   weights away from zero (a channel with w = 0 has lost its xhat).
 *   rmsnorm         per row of x [rows, C]: rrms = 1 / sqrt(mean(x^2) + eps); out = x rrms w,
 *                   w [C]; rrms f32 [rows], stored when present. out disjoint from the rest.
 *   rmsnorm_backward  xhat = x rrms; dx += rrms (w dout - xhat mean(w dout xhat)) (accumulates);
 *                   dw = grad_beta dw + the column sums of dout xhat (grad_beta 0: written).
 *   rope            rotary embedding, transformers' rotate-half layout: x holds `rows` rows of
 *                   `heads` heads of head_dim (even) channels, a row every `stride` elements
 *                   (a slice of a wider row: q and k of a fused qkv in one call). The pair
 *                   (j, j + head_dim/2) of each head turns by a = float(pos[row]) inv_freq[j];
 *                   pos i32 [rows], inv_freq f32 [head_dim/2]. out is x's view or disjoint;
 *                   elements outside the slice are not touched.
 *   rope_backward   the same rotation by -a: dx from dout (dx may be dout).
 *   swiglu          out [rows, I] dense = silu(gate) up, silu(g) = g / (1 + exp(-g)); gate and
 *                   up rows ld (>= I) elements apart (the halves of a fused [rows, 2I]: ld 2I).
 *                   (I, the intermediate size, is the parameter `inter`: complex.h, which
 *                   OpenBLAS's headers include, defines I.)
 *   swiglu_backward dgate = dout up silu'(gate), dup = dout silu(gate), in gate's and up's
 *                   layout; dgate may be gate and dup up (in place).
 *   gelu            out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); out may be x.
 *   gelu_backward   dx = dout * gelu'(x); dx may be dout.
 *   attention       causal softmax attention with scale 1/sqrt(hs), NH query heads sharing KV
 *                   key/value heads (KV divides NH; KV = NH is GPT-2's multi-head attention).
 *                   qkv [B, T, (NH + 2 KV) hs]: query head h at channels h hs, key/value head
 *                   g's key at NH hs + g hs and value at (NH + KV) hs + g hs; query head h
 *                   uses key/value head h / (NH / KV). out [B, T, NH hs]. saved: f32 of
 *                   attention_saved_len elements, the handler's own record for the backward.
 *   attention_backward  dqkv [B, T, (NH + 2 KV) hs] is overwritten with the gradient of qkv.
 *   attention_cached  k_cache, v_cache [B, KV, max_T, hs]; p0 = pos[0] (i32). Stores the keys
 *                   and values of the T new positions at p0 .. p0+T-1, then out [B, T, NH hs]
 *                   is the attention of each new position over positions 0 .. its own.
 *   cross_entropy   logits [rows, Vp] (the first V columns are real), targets i32 [rows];
 *                   losses f32 [rows] = logsumexp(logits[r, :V]) - logits[r, target]. When
 *                   grad_scale != 0 the logits are overwritten with their gradient:
 *                   (softmax - onehot(target)) * grad_scale, and 0 in the padding columns.
 *   sample          out i32 [rows]. temperature <= 0: argmax of logits[r, :V] (lowest index on
 *                   ties). Otherwise: the top_k largest logits (all when top_k <= 0 or >= V),
 *                   in descending order (ties: lower index first), weighted by
 *                   exp((l - max) / temperature); with u = tern_uniform(seed, counter[0] * rows
 *                   + r) (counter i32 [1], or 0 when absent), the first candidate whose
 *                   cumulative weight exceeds u * total (the last one otherwise).
 *   adamw           param, m, v f32 [n], grad [n]; see tern_adamw. shadow, when present [n],
 *                   receives the updated param in its own dtype (e.g. bf16 compute weights).
 *                   Split form: param u16 and shadow bf16 [n] hold the low and high halves of
 *                   an f32 parameter (tern_f32_split, tern/half.h); the step joins them, updates
 *                   the f32 exactly as the f32 form (the same bits) and splits it back, so
 *                   shadow is the high half (nearest, ties away from zero), not the f32
 *                   form's round to nearest even. A u16 param without a bf16 shadow: error.
 * across processes
 *   allreduce       buf (f32 or bf16) becomes the sum of every rank's buf, in place; every rank
 *                   calls it with the same length and dtype. comm NULL or of one rank: no-op.
 *                   The engine is NCCL (cuda, on the device's stream) or MPI (cpu; opencl
 *                   through host memory); a rank that does not answer within the
 *                   communicator's timeout, or an engine failure, is an error.
 *   allgather       buf (f32 or bf16) of world * k elements (k = len / world; len must divide
 *                   evenly): rank r's segment [r k, (r+1) k) is its contribution; afterwards
 *                   every rank holds every rank's segment, in place. Same engines, rules and
 *                   errors as allreduce; comm NULL or of one rank: no-op.
 */
/* The op list. X(name, parameter list, argument list): the argument list names the
 * parameters in order, so that handlers' entry points can be generated from it
 * (src/handlers/seam.h). Every operation returns tern_error *.
 * Shapes: B batch, T sequence, C channels, NH (query) heads, KV key/value heads, hs the head
 * size (GPT-2: KV = NH, hs = C / NH), V vocabulary, Vp the
 * padded row length of logits and of the embedding table (Vp >= V).
 *
 * TERN_OPS_OWN: open and close, which each handler writes whole (there is no device yet to
 * check, and close takes NULL). TERN_OPS_SEAM: every other operation, the device d first;
 * each handler writes only its body, and the seam generates the entry point. */
#define TERN_OPS_OWN(X)                                                                    \
    X(open, (const char *options, tern_dev **out), (options, out))                         \
    X(close, (tern_dev * d), (d))

#define TERN_OPS_SEAM(X)                                                                   \
    /* device */                                                                           \
    X(device_name, (tern_dev * d, const char **out), (d, out))                             \
    X(sync, (tern_dev * d), (d))                                                           \
    /* memory */                                                                           \
    X(alloc, (tern_dev * d, tern_dtype dtype, size_t len, tern_buf *out), (d, dtype, len, out)) \
    X(free, (tern_dev * d, tern_buf *buf), (d, buf))                                       \
    X(upload, (tern_dev * d, tern_buf dst, const void *src), (d, dst, src))                \
    X(download, (tern_dev * d, void *dst, tern_buf src), (d, dst, src))                    \
    X(download_async, (tern_dev * d, void *dst, tern_buf src), (d, dst, src))              \
    X(download_wait, (tern_dev * d), (d))                                                  \
    X(copy, (tern_dev * d, tern_buf dst, tern_buf src), (d, dst, src))                     \
    X(fill, (tern_dev * d, tern_buf dst, double value), (d, dst, value))                   \
    /* generic */                                                                          \
    X(get, (tern_dev * d, tern_buf a, size_t index, double *out), (d, a, index, out))      \
    X(length, (tern_dev * d, tern_buf a, size_t *out), (d, a, out))                        \
    X(from_list, (tern_dev * d, tern_dtype dtype, const double *values, size_t count,      \
                  tern_buf *out), (d, dtype, values, count, out))                          \
    X(load, (tern_dev * d, const char *path, const char *name, tern_dtype dtype,           \
             tern_buf *out), (d, path, name, dtype, out))                                  \
    X(build, (tern_dev * d, tern_buf out, const tern_kernel *k), (d, out, k))              \
    X(zip_with, (tern_dev * d, tern_buf out, tern_buf a, tern_buf b,                       \
                 const tern_kernel *combine), (d, out, a, b, combine))                     \
    X(reduce, (tern_dev * d, tern_buf a, double init, const tern_kernel *combine,          \
               double *out), (d, a, init, combine, out))                                   \
    X(index_of, (tern_dev * d, tern_buf a, double value, int64_t *out), (d, a, value, out)) \
    /* replayable sections (CUDA graphs); see docs/effects.md */                           \
    X(capture_begin, (tern_dev * d, uint64_t key, bool *replay), (d, key, replay))         \
    X(capture_end, (tern_dev * d, uint64_t key), (d, key))                                 \
    X(replay_steps, (tern_dev * d, int *out), (d, out))                                    \
    X(fence, (tern_dev * d), (d))                                                          \
    /* linear algebra */                                                                   \
    X(matmul, (tern_dev * d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm),   \
      (d, c, a, b, mm))                                                                    \
    X(sum_rows, (tern_dev * d, tern_buf out, tern_buf x, int rows, int cols, float beta),  \
      (d, out, x, rows, cols, beta))                                                       \
    X(add, (tern_dev * d, tern_buf out, tern_buf a, tern_buf b), (d, out, a, b))           \
    X(norm2, (tern_dev * d, tern_buf x, double *out), (d, x, out))                         \
    /* GPT-2 */                                                                            \
    X(embed, (tern_dev * d, tern_buf out, tern_buf tokens, tern_buf wte, tern_buf wpe,     \
              tern_buf pos, int B, int T, int C), (d, out, tokens, wte, wpe, pos, B, T, C)) \
    X(embed_backward, (tern_dev * d, tern_buf dwte, tern_buf dwpe, tern_buf dout,          \
                       tern_buf tokens, int B, int T, int C),                              \
      (d, dwte, dwpe, dout, tokens, B, T, C))                                              \
    X(layernorm, (tern_dev * d, tern_buf out, tern_buf mean, tern_buf rstd, tern_buf x,    \
                  tern_buf w, tern_buf b, int rows, int C, float eps),                     \
      (d, out, mean, rstd, x, w, b, rows, C, eps))                                         \
    X(layernorm_backward, (tern_dev * d, tern_buf dx, tern_buf dw, tern_buf db,            \
                           tern_buf dsum, tern_buf out, tern_buf dout, tern_buf x,         \
                           tern_buf w, tern_buf b, tern_buf mean, tern_buf rstd, int rows, \
                           int C, float grad_beta),                                        \
      (d, dx, dw, db, dsum, out, dout, x, w, b, mean, rstd, rows, C, grad_beta))           \
    X(gelu, (tern_dev * d, tern_buf out, tern_buf x), (d, out, x))                         \
    X(gelu_backward, (tern_dev * d, tern_buf dx, tern_buf dout, tern_buf x), (d, dx, dout, x)) \
    X(attention_saved_len, (tern_dev * d, int B, int T, int NH, size_t *out),              \
      (d, B, T, NH, out))                                                                  \
    X(attention, (tern_dev * d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T,  \
                  int NH, int KV, int hs), (d, out, saved, qkv, B, T, NH, KV, hs))         \
    X(attention_backward, (tern_dev * d, tern_buf dqkv, tern_buf dout, tern_buf qkv,       \
                           tern_buf out, tern_buf saved, int B, int T, int NH, int KV,     \
                           int hs), (d, dqkv, dout, qkv, out, saved, B, T, NH, KV, hs))    \
    X(attention_cached, (tern_dev * d, tern_buf out, tern_buf k_cache, tern_buf v_cache,   \
                         tern_buf qkv, tern_buf pos, int B, int T, int NH, int KV, int hs, \
                         int max_T),                                                       \
      (d, out, k_cache, v_cache, qkv, pos, B, T, NH, KV, hs, max_T))                       \
    /* Llama family */                                                                     \
    X(rmsnorm, (tern_dev * d, tern_buf out, tern_buf rrms, tern_buf x, tern_buf w, int rows, \
                int C, float eps), (d, out, rrms, x, w, rows, C, eps))                     \
    X(rmsnorm_backward, (tern_dev * d, tern_buf dx, tern_buf dw, tern_buf dout, tern_buf x, \
                         tern_buf w, tern_buf rrms, int rows, int C, float grad_beta),     \
      (d, dx, dw, dout, x, w, rrms, rows, C, grad_beta))                                   \
    X(rope, (tern_dev * d, tern_buf out, tern_buf x, tern_buf pos, tern_buf inv_freq,      \
             int rows, int heads, int head_dim, int stride),                               \
      (d, out, x, pos, inv_freq, rows, heads, head_dim, stride))                           \
    X(rope_backward, (tern_dev * d, tern_buf dx, tern_buf dout, tern_buf pos,              \
                      tern_buf inv_freq, int rows, int heads, int head_dim, int stride),   \
      (d, dx, dout, pos, inv_freq, rows, heads, head_dim, stride))                         \
    X(swiglu, (tern_dev * d, tern_buf out, tern_buf gate, tern_buf up, int rows,          \
               int inter, int ld), (d, out, gate, up, rows, inter, ld))                    \
    X(swiglu_backward, (tern_dev * d, tern_buf dgate, tern_buf dup, tern_buf dout,         \
                        tern_buf gate, tern_buf up, int rows, int inter, int ld),          \
      (d, dgate, dup, dout, gate, up, rows, inter, ld))                                        \
    X(cross_entropy, (tern_dev * d, tern_buf losses, tern_buf logits, tern_buf targets,    \
                      int rows, int V, int Vp, float grad_scale),                          \
      (d, losses, logits, targets, rows, V, Vp, grad_scale))                               \
    X(sample, (tern_dev * d, tern_buf out, tern_buf logits, int rows, int V, int Vp,       \
               float temperature, int top_k, uint64_t seed, tern_buf counter),             \
      (d, out, logits, rows, V, Vp, temperature, top_k, seed, counter))                    \
    X(adamw, (tern_dev * d, tern_buf param, tern_buf shadow, tern_buf grad, tern_buf m,    \
              tern_buf v, const tern_adamw *h), (d, param, shadow, grad, m, v, h))         \
    /* across processes (tern/dist.h) */                                                   \
    X(allreduce, (tern_dev * d, tern_buf buf, tern_dist *comm), (d, buf, comm))            \
    X(allgather, (tern_dev * d, tern_buf buf, tern_dist *comm), (d, buf, comm))

#define TERN_OPS(X) TERN_OPS_OWN(X) TERN_OPS_SEAM(X)

/* Every handler also exports its operations as a table, `const tern_ops tern_<h>_ops`.
 * Building that table references every entry tern_<h>_<op>; each generated entry calls its
 * body <h>_<op>, declared from this list, so a missing body fails the link with its name and
 * a body of another signature fails to compile (tests/effect_check proves both). Models do not dispatch through it: they
 * are compiled once per handler and call tern_<h>_<op> directly. Tests use it to run the
 * same checks on every handler. */
#define TERN_OP_FIELD_(name, params, args) tern_error *(*name) params;
typedef struct tern_ops {
    const char *handler; /* "cpu", "cuda", ... */
    TERN_OPS(TERN_OP_FIELD_)
} tern_ops;
#undef TERN_OP_FIELD_

#ifdef __cplusplus
}
#endif
#endif
