/* mlp (tern_mlp) on the GPU core: the pair in one kernel (src/kernels/gemv_mlp.c) where
 * it applies, otherwise its two matmuls (tern_mlp_products), each as gpu_matmul answers it.
 *
 * The one kernel takes decoding's GPT-2 block: one row, GELU, both weights [k, n] (not
 * transposed, not q8_0), C small enough to stage in one chunk, H a multiple of a group's
 * hidden units. Its groups are the first product's GEMV groups (32 hidden units each, as
 * gemv.c's rule, at 1,024 threads), so each keeps its h and multiplies it by its own rows
 * of W2; the partial outputs meet in a fixed two-level order (the kernel's comment).
 * mlp_one=0 (a gpu_tune key) runs the two products instead, for measurements. */
#include <math.h>

#include "gpu_core/gpu_internal.h"

/* The one kernel's spec and grid for f, or false where it does not apply. */
static bool one_kernel(gpu_core *g, tern_buf x, tern_buf w1, tern_buf w2, const tern_mlp *f, gk_spec *s,
                       uint32_t *groups) {
    if (!g->tune.mlp_one || f->m != 1 || f->act != TERN_EPILOGUE_GELU || f->trans_w) return false;
    if (w1.dtype == TERN_Q8 || w2.dtype == TERN_Q8) return false;
    const int M = 1, G = 1024;
    size_t C = (size_t)f->C, H = (size_t)f->H, size = tern_dtype_size(x.dtype);
    size_t kc = (C + 255) / 256 * 256;
    if ((size_t)M * kc * size > GK_GEMV_X_BYTES) return false; /* x in one chunk */
    /* W1 [C, H]: W1w-wide loads along its rows, TC threads across a group's 32 units */
    int w1w = gpu_width(&w1, 1, H), w2w = gpu_width(&w2, 1, C);
    int tc = 32 / w1w, ct = tc * w1w;
    if (H % (size_t)ct) return false;
    size_t rows1 = (C + (size_t)(G / tc) - 1) / (size_t)(G / tc); /* a thread's rows of W1 */
    /* the second product: NV vectors of W2's rows, RL row lanes */
    size_t nv = C / (size_t)w2w;
    if (C % (size_t)w2w || nv > (size_t)G) return false;
    size_t rl = (size_t)G / nv, most = GK_MLP_RED_BYTES / ((size_t)M * C * 4);
    if (rl > most) rl = most;
    if (rl > (size_t)ct) rl = (size_t)ct;
    if (rl == 0) return false;
    size_t nr = ((size_t)ct + rl - 1) / rl;
    /* each thread holds its rows of both weights in registers (64 at 1,024 threads) */
    if (nr > GK_MLP_ROWS || rows1 + nr > 12) return false;
    size_t ng = H / (size_t)ct, s1 = (size_t)ceil(sqrt((double)ng)), ns = (ng + s1 - 1) / s1;
    if (s1 > GK_MLP_SETS_MAX || ns > GK_MLP_SETS_MAX || (ng + ns) * (size_t)M * C > GK_MLP_PART_FLOATS) return false;

    tern_matmul first, second;
    tern_mlp_products(f, &first, &second);
    tern_matmul_dims d1;
    tern_matmul_resolve(&first, &d1);
    bool has_b1 = tern_present(f->b1), has_b2 = tern_present(f->b2);
    *s = (gk_spec){0};
    s->t[0] = 0; /* y, set by the caller */
    s->t[1] = gpu_t(x);
    s->t[2] = gpu_t(w1);
    s->t[3] = has_b1 ? gpu_t(f->b1) : 0;
    s->t[4] = gpu_t(w2);
    s->t[7] = has_b2 ? gpu_t(f->b2) : 0;
    s->n[0] = M;
    s->n[1] = w1w;
    s->n[2] = 1;
    s->n[3] = has_b1;
    s->n[5] = tc;
    s->n[6] = (int32_t)kc;
    s->n[7] = G;
    s->n[8] = (int32_t)C;
    s->n[11] = gpu_gemv_early(g, w1, f->b1) && gpu_gemv_early(g, w2, f->b2);
    s->n[12] = f->prologue == TERN_PROLOGUE_LAYERNORM ? GK_GEMV_LAYERNORM
               : f->prologue == TERN_PROLOGUE_RMSNORM ? GK_GEMV_RMSNORM
                                                       : 0;
    if (f->prologue == TERN_PROLOGUE_LAYERNORM) s->t[6] = gpu_t(f->norm.b);
    if (s->n[12]) {
        s->t[5] = gpu_t(f->norm.w);
        s->n[12] |= gpu_gemv_norm_flags(g, &d1, &first, kc, (uint32_t)G);
    }
    s->n[13] = w2w;
    s->n[14] = (int32_t)rl;
    s->n[15] = (int32_t)s1;
    s->n[16] = (int32_t)ng;
    *groups = (uint32_t)ng;
    return true;
}

/* The one kernel's partials and counters (the counters zeroed here; each launch's last
 * groups set them back to zero), allocated once at full size and never moved. */
static tern_error *one_kernel_buffers(gpu_core *g) {
    if (g->mlp_part.mem && g->mlp_count.mem) return NULL;
    if (!g->mlp_part.mem) TERN_TRY(tern_rt_alloc(g->rt, TERN_T_F32, GK_MLP_PART_FLOATS, &g->mlp_part));
    static const int32_t zeros[1 + GK_MLP_SETS_MAX];
    TERN_TRY(tern_rt_alloc(g->rt, TERN_T_I32, 1 + GK_MLP_SETS_MAX, &g->mlp_count));
    tern_error *err = tern_rt_upload(g->rt, g->mlp_count, zeros);
    if (err) tern_rt_free(g->rt, &g->mlp_count);
    return err;
}

tern_error *gpu_mlp(tern_dev *d, tern_buf y, tern_buf x, tern_buf w1, tern_buf w2, const tern_mlp *f) {
    gpu_core *g = gpu_core_of(d);
    const char *op = "mlp";
    gk_spec s;
    uint32_t groups = 0;
    if (!one_kernel(g, x, w1, w2, f, &s, &groups)) {
        tern_matmul first, second;
        tern_mlp_products(f, &first, &second);
        TERN_TRY(tern_error_wrap(gpu_matmul(d, f->hidden, x, w1, &first), "%s", op));
        return tern_error_wrap(gpu_matmul(d, y, f->hidden, w2, &second), "%s", op);
    }
    TERN_TRY(gpu_check_index(op, "w1", w1.len));
    TERN_TRY(gpu_check_index(op, "w2", w2.len));
    TERN_TRY(tern_error_wrap(one_kernel_buffers(g), "%s", op));
    s.t[0] = gpu_t(y);
    tern_arg args[20];
    size_t n = 0;
    args[n++] = tern_arg_buf(y);
    args[n++] = tern_arg_buf(x);
    args[n++] = tern_arg_buf(w1);
    if (tern_present(f->b1)) args[n++] = tern_arg_buf(f->b1);
    if (f->prologue != TERN_PROLOGUE_NONE) args[n++] = tern_arg_buf(f->norm.w);
    if (f->prologue == TERN_PROLOGUE_LAYERNORM) args[n++] = tern_arg_buf(f->norm.b);
    args[n++] = tern_arg_i32(f->H);
    args[n++] = tern_arg_i32(f->C);
    args[n++] = tern_arg_i32(f->C); /* lda: x's rows are dense */
    args[n++] = tern_arg_i32(f->H); /* ldb: W1 [C, H] */
    args[n++] = tern_arg_i32(f->C); /* ldc: y's rows */
    args[n++] = tern_arg_f32(1.0f);
    args[n++] = tern_arg_f32(f->beta);
    if (f->prologue != TERN_PROLOGUE_NONE) args[n++] = tern_arg_f32(f->norm.eps);
    args[n++] = tern_arg_buf(w2);
    if (tern_present(f->b2)) args[n++] = tern_arg_buf(f->b2);
    args[n++] = tern_arg_dev(g->mlp_part);
    args[n++] = tern_arg_dev(g->mlp_count);
    args[n++] = tern_arg_i32(f->C); /* ldw2: W2 [H, C] */
    return gpu_run(g, op, GK_GEMV_MLP, &s, tern_dims1(groups), tern_dims1(1024), args, n);
}
