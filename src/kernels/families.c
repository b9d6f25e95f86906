/* The table of kernel families: names (used in kernel names, so in profiles and compiler
 * messages) and trace functions. */
#include "kernels/kernels.h"

static const struct {
    const char *name;
    tern_trace_fn trace;
} families[GK_FAMILY_COUNT] = {
    [GK_FILL] = {"fill", gk_trace_fill},
    [GK_COPY] = {"copy", gk_trace_copy},
    [GK_ADD] = {"add", gk_trace_add},
    [GK_GELU] = {"gelu", gk_trace_gelu},
    [GK_GELU_BACKWARD] = {"gelu_backward", gk_trace_gelu_backward},
    [GK_ADAMW] = {"adamw", gk_trace_adamw},
    [GK_SUM_ROWS_PARTIAL] = {"sum_rows_partial", gk_trace_sum_rows_partial},
    [GK_SUM_SQUARES] = {"sum_squares", gk_trace_sum_squares},
    [GK_LAYERNORM] = {"layernorm", gk_trace_layernorm},
    [GK_LAYERNORM_BACKWARD] = {"layernorm_backward", gk_trace_layernorm_backward},
    [GK_PARTIAL_ADD] = {"partial_add", gk_trace_partial_add},
    [GK_EMBED] = {"embed", gk_trace_embed},
    [GK_EMBED_SORT] = {"embed_sort", gk_trace_embed_sort},
    [GK_EMBED_SORT_SCATTER] = {"embed_sort_scatter", gk_trace_embed_sort_scatter},
    [GK_EMBED_BACKWARD_WTE] = {"embed_backward_wte", gk_trace_embed_backward_wte},
    [GK_EMBED_BACKWARD_WPE] = {"embed_backward_wpe", gk_trace_embed_backward_wpe},
    [GK_ATTENTION] = {"attention", gk_trace_attention},
    [GK_ATTENTION_DELTA] = {"attention_delta", gk_trace_attention_delta},
    [GK_ATTENTION_DKDV] = {"attention_dkdv", gk_trace_attention_dkdv},
    [GK_ATTENTION_DQ] = {"attention_dq", gk_trace_attention_dq},
    [GK_ATTENTION_CACHED] = {"attention_cached", gk_trace_attention_cached},
    [GK_CROSS_ENTROPY] = {"cross_entropy", gk_trace_cross_entropy},
    [GK_SAMPLE] = {"sample", gk_trace_sample},
    [GK_ARGMAX_PARTIAL] = {"argmax_partial", gk_trace_argmax_partial},
    [GK_ARGMAX_MERGE] = {"argmax_merge", gk_trace_argmax_merge},
    [GK_MATMUL] = {"matmul", gk_trace_matmul},
    [GK_EPILOGUE] = {"epilogue", gk_trace_epilogue},
    [GK_GEMV] = {"gemv", gk_trace_gemv},
    [GK_GEMV_T] = {"gemv_t", gk_trace_gemv_t},
    [GK_RMSNORM] = {"rmsnorm", gk_trace_rmsnorm},
    [GK_RMSNORM_BACKWARD] = {"rmsnorm_backward", gk_trace_rmsnorm_backward},
    [GK_ROPE] = {"rope", gk_trace_rope},
    [GK_SWIGLU] = {"swiglu", gk_trace_swiglu},
    [GK_SWIGLU_BACKWARD] = {"swiglu_backward", gk_trace_swiglu_backward},
};

const char *gk_family_name(gk_family f) {
    return (unsigned)f < GK_FAMILY_COUNT ? families[f].name : "unknown";
}

tern_trace_fn gk_family_trace(gk_family f) {
    return (unsigned)f < GK_FAMILY_COUNT ? families[f].trace : NULL;
}
