/* A matrix product's epilogue as a separate pass, for handlers whose GEMM library has none
 * (CLBlast): x = src + bias[j]; aux = x; c = gelu(x) (or x), where src is C itself (f32,
 * in place) or an f32 result computed elsewhere (then c may be bf16: the pass also
 * converts).
 *
 * Spec: t[0] c, t[2] bias, t[3] aux; n[0] 1 when src is a separate f32 buffer, n[1] GELU,
 * n[2] has bias, n[3] has aux. Parameters: c, [src], [bias], [aux], m, n, ldc, stride_c,
 * src_ld, src_stride. One thread per element; grid (ceil(m n / GK_EW_GROUP), batch). */
#include "kernels/kutil.h"

void gk_trace_epilogue(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    bool has_src = s->n[0], gelu = s->n[1], has_bias = s->n[2], has_aux = s->n[3];
    tern_v c = ku_buf(kb, "c", s->t[0], has_src ? TERN_WRITE : TERN_READ_WRITE);
    tern_v src = has_src ? tern_param_buf(kb, "src", TERN_T_F32, TERN_READ) : tern_int(0);
    tern_v bias = has_bias ? ku_buf(kb, "bias", s->t[2], TERN_READ) : tern_int(0);
    tern_v aux = has_aux ? ku_buf(kb, "aux", s->t[3], TERN_WRITE) : tern_int(0);
    tern_v M = tern_param_scalar(kb, "m", TERN_T_I32);
    tern_v N = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v ldc = tern_param_scalar(kb, "ldc", TERN_T_I32);
    tern_v stride_c = tern_param_scalar(kb, "stride_c", TERN_T_I32);
    tern_v src_ld = tern_param_scalar(kb, "src_ld", TERN_T_I32);
    tern_v src_stride = tern_param_scalar(kb, "src_stride", TERN_T_I32);
    tern_v gid = tern_global_id(kb, 0);
    tern_v e = tern_group_id(kb, 1);
    tern_v i = tern_div(gid, N), j = tern_rem(gid, N);
    TERN_IF(kb, tern_lt(i, M)) {
        tern_v at = tern_add(tern_mul(e, stride_c), tern_add(tern_mul(i, ldc), j));
        tern_v x = has_src ? tern_load(src, tern_add(tern_mul(e, src_stride), tern_add(tern_mul(i, src_ld), j)))
                           : tern_load(c, at);
        if (has_bias) x = tern_add(x, tern_load(bias, j));
        if (has_aux) tern_store(aux, tern_add(tern_mul(tern_add(tern_mul(e, M), i), N), j), x);
        if (gelu) x = ku_gelu(x);
        tern_store(c, at, x);
    }
}
