/* embed and embed_backward (see src/kernels/embed.c). Token ids and the start position are
 * device data: the kernels check them and a bad one is reported at the next sync. */
#include "gpu_core/gpu_internal.h"

tern_error *gpu_embed(tern_dev *d, tern_buf out, tern_buf tokens, tern_buf wte, tern_buf wpe,
                      tern_buf pos, int B, int T, int C) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index("embed", "out", out.len));
    TERN_TRY(gpu_check_index("embed", "wte", wte.len));
    TERN_TRY(gpu_check_index("embed", "wpe", wpe.len));
    size_t c = (size_t)C, bt = (size_t)B * (size_t)T;
    bool has_wpe = tern_present(wpe); /* absent: no position table (Llama), pos unused */
    tern_buf all[3] = {out, wte, wpe};
    bool has_pos = has_wpe && tern_present(pos);
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(wte);
    s.t[2] = has_wpe ? gpu_t(wpe) : s.t[1];
    s.n[0] = gpu_width(all, has_wpe ? 3 : 2, c);
    s.n[1] = has_pos;
    s.n[2] = !has_wpe;
    tern_arg args[11];
    size_t n = 0;
    args[n++] = tern_arg_buf(out);
    args[n++] = tern_arg_buf(tokens);
    args[n++] = tern_arg_buf(wte);
    if (has_wpe) args[n++] = tern_arg_buf(wpe);
    if (has_pos) args[n++] = tern_arg_buf(pos);
    args[n++] = gpu_fault_arg(g);
    args[n++] = tern_arg_i32((int32_t)bt);
    args[n++] = tern_arg_i32(T);
    args[n++] = tern_arg_i32(C);
    args[n++] = tern_arg_i32((int32_t)(wte.len / c));
    args[n++] = tern_arg_i32((int32_t)(wpe.len / c));
    size_t threads = bt * (c / (size_t)s.n[0]);
    return gpu_run(g, "embed", GK_EMBED, &s, tern_dims1(gpu_groups(threads, GK_EW_GROUP)), tern_dims1(GK_EW_GROUP),
                   args, n);
}

tern_error *gpu_embed_backward(tern_dev *d, tern_buf dwte, tern_buf dwpe, tern_buf dout,
                               tern_buf tokens, int B, int T, int C) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index("embed_backward", "dout", dout.len));
    size_t c = (size_t)C, bt = (size_t)B * (size_t)T;
    if (tern_present(dwte)) {
        TERN_TRY(gpu_check_index("embed_backward", "dwte", dwte.len));
        /* the rows in (token, row) order: ranks counted in parts of sort_per rows (partial
         * [parts, bt]), then summed and scattered into perm [bt]; one i32 scratch holds both */
        const size_t sort_per = 8 * GK_SORT_GROUP;
        size_t parts = (bt + sort_per - 1) / sort_per;
        tern_dbuf scratch;
        TERN_TRY(tern_error_wrap(gpu_scratch_i32(g, (parts + 1) * bt, &scratch), "embed_backward"));
        tern_arg perm_arg = tern_arg_dev((tern_dbuf){scratch.mem, scratch.offset, bt, TERN_T_I32});
        tern_arg partial_arg = tern_arg_dev((tern_dbuf){scratch.mem, scratch.offset + bt, parts * bt, TERN_T_I32});
        gk_spec so = {0};
        int32_t V = (int32_t)(dwte.len / c);
        so.n[0] = V <= 0xffff && bt <= 0x10000; /* the packed keys fit */
        tern_arg sa[] = {tern_arg_buf(tokens), partial_arg, tern_arg_i32((int32_t)bt), tern_arg_i32((int32_t)sort_per),
                         tern_arg_i32(V)};
        TERN_TRY(gpu_run(g, "embed_backward", GK_EMBED_SORT, &so,
                         tern_dims2(gpu_groups(bt, GK_SORT_GROUP), (uint32_t)parts), tern_dims1(GK_SORT_GROUP), sa,
                         so.n[0] ? 5 : 4));
        gk_spec sc = {0};
        tern_arg ca[] = {partial_arg, perm_arg, tern_arg_i32((int32_t)bt), tern_arg_i32((int32_t)parts)};
        TERN_TRY(gpu_run(g, "embed_backward", GK_EMBED_SORT_SCATTER, &sc, tern_dims1(gpu_groups(bt, GK_EW_GROUP)),
                         tern_dims1(GK_EW_GROUP), ca, 4));
        tern_buf both[2] = {dwte, dout};
        gk_spec s = {0};
        s.t[0] = gpu_t(dwte);
        s.t[1] = gpu_t(dout);
        s.n[0] = gpu_width(both, 2, c);
        size_t chunks = (c + 32 * (size_t)s.n[0] - 1) / (32 * (size_t)s.n[0]);
        tern_arg wa[] = {tern_arg_buf(dwte), tern_arg_buf(dout), tern_arg_buf(tokens), perm_arg, gpu_fault_arg(g),
                         tern_arg_i32((int32_t)bt), tern_arg_i32(C), tern_arg_i32((int32_t)(dwte.len / c))};
        TERN_TRY(gpu_run(g, "embed_backward", GK_EMBED_BACKWARD_WTE, &s,
                         tern_dims2(gpu_groups(bt, GK_LN_ROWS), (uint32_t)chunks), tern_dims1(32 * GK_LN_ROWS), wa, 8));
    }
    if (tern_present(dwpe)) {
        tern_buf both[2] = {dwpe, dout};
        gk_spec s = {0};
        s.t[0] = gpu_t(dwpe);
        s.t[1] = gpu_t(dout);
        s.n[0] = gpu_width(both, 2, c);
        size_t threads = (size_t)T * (c / (size_t)s.n[0]);
        tern_arg pa[] = {tern_arg_buf(dwpe), tern_arg_buf(dout), tern_arg_i32(B), tern_arg_i32(T), tern_arg_i32(C)};
        TERN_TRY(gpu_run(g, "embed_backward", GK_EMBED_BACKWARD_WPE, &s, tern_dims1(gpu_groups(threads, GK_EW_GROUP)),
                         tern_dims1(GK_EW_GROUP), pa, 5));
    }
    return NULL;
}
