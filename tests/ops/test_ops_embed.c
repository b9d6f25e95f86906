/* embed and embed_backward against references: repeated tokens, a start position (pos)
 * or none, tables with more rows than used, mixed f32/bf16, absent dwte or dwpe; the
 * backward as the adjoint of the forward (the op is linear, so the finite difference is
 * exact: <dout, embed(dir)> = <embed_backward(dout), dir>); then bad token ids, positions
 * out of range and the other validation errors. */
#include "ops_test.h"

static void test_forward(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(41);
    const int shapes[][3] = {{1, 1, 1}, {2, 5, 7}, {4, 64, 768}, {3, 9, 33}}; /* B, T, C */
    for (int s = 0; s < 4; s++)
        for (int combo = 0; combo < 16; combo++) { /* every f32/bf16 combination, pos or not */
            int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2];
            int vocab = 50 + combo, max_t = T + 6;
            bool with_pos = combo & 1;
            int p0 = with_pos ? 6 : 0;
            tern_dtype d_out = ot_float2[(combo >> 1) & 1], d_wte = ot_float2[(combo >> 2) & 1], d_wpe = ot_float2[combo >> 3];
            size_t bt = (size_t)B * T, n = bt * C;
            int32_t *tok = malloc(bt * sizeof *tok);
            for (size_t i = 0; i < bt; i++) tok[i] = ot_randint(0, vocab);
            tok[0] = vocab - 1; /* the last row of the table */
            float *wte = ot_random((size_t)vocab * C, -1, 1), *wpe = ot_random((size_t)max_t * C, -1, 1);
            ot_round(wte, (size_t)vocab * C, d_wte);
            ot_round(wpe, (size_t)max_t * C, d_wpe);
            float *want = malloc(n * sizeof(float));
            for (size_t i = 0; i < bt; i++)
                for (int j = 0; j < C; j++)
                    want[i * C + j] = (float)((double)wte[(size_t)tok[i] * C + j] + wpe[(size_t)(p0 + (int)(i % T)) * C + j]);
            ot_buf bt_ = ot_make_i32(c, tok, bt, 2), bwte = ot_make(c, d_wte, (size_t)vocab * C, 1, wte);
            ot_buf bwpe = ot_make(c, d_wpe, (size_t)max_t * C, 3, wpe), bo = ot_make(c, d_out, n, 4, NULL);
            int32_t p0v = p0;
            ot_buf bpos = ot_make_i32(c, &p0v, 1, 1);
            CHECK_OK(o->embed(c->d, bo.view, bt_.view, bwte.view, bwpe.view, with_pos ? bpos.view : tern_none(), B, T, C));
            OT_EXPECT(c, bo, want, ot_tol(d_out, 1e-7), "embed B%d T%d C%d combo %d", B, T, C, combo);
            ot_free(c, &bt_), ot_free(c, &bwte), ot_free(c, &bwpe), ot_free(c, &bo), ot_free(c, &bpos);
            free(tok), free(wte), free(wpe), free(want);
        }
}

static void test_backward(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(42);
    /* {5, 120, 3}: 600 rows, three tiles of a GPU sort and a part of one; {3, 1000, 3}: 3,000
     * rows, two parts of the GPU sort's rank counting (2,048 rows each); the last, with a
     * vocabulary over 65,535, the GPU sort's general form (not the packed keys) */
    const int shapes[][3] = {{1, 1, 1}, {2, 5, 7}, {4, 64, 768}, {3, 9, 130}, {5, 120, 3}, {3, 1000, 3}, {3, 1000, 2}};
    for (int s = 0; s < 7; s++)
        for (int combo = 0; combo < 8; combo++) {
            int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2];
            /* a small vocabulary: many repeats (about 70 a token in the 600 rows: every
             * handler sums a token's rows before it rounds them into a bf16 dwte) */
            int vocab = (s == 6 ? 70000 : 6) + combo, max_t = T + 2;
            bool has_wte = combo != 5, has_wpe = combo != 6;
            tern_dtype d_g = ot_float2[combo & 1], d_wte = ot_float2[(combo >> 1) & 1], d_wpe = ot_float2[(combo >> 2) & 1];
            size_t bt = (size_t)B * T, n = bt * C, nwte = (size_t)vocab * C, nwpe = (size_t)max_t * C;
            int32_t *tok = malloc(bt * sizeof *tok);
            for (size_t i = 0; i < bt; i++) tok[i] = ot_randint(0, vocab);
            float *g = ot_random(n, -1, 1), *wte0 = ot_random(nwte, -1, 1), *wpe0 = ot_random(nwpe, -1, 1);
            ot_round(g, n, d_g), ot_round(wte0, nwte, d_wte), ot_round(wpe0, nwpe, d_wpe);
            double *acc_wte = calloc(nwte, sizeof(double)), *acc_wpe = calloc(nwpe, sizeof(double));
            for (size_t i = 0; i < bt; i++)
                for (int j = 0; j < C; j++) {
                    acc_wte[(size_t)tok[i] * C + j] += g[i * C + j];
                    acc_wpe[(i % T) * C + j] += g[i * C + j];
                }
            float *want_wte = malloc(nwte * sizeof(float)), *want_wpe = malloc(nwpe * sizeof(float));
            for (size_t i = 0; i < nwte; i++) want_wte[i] = (float)(wte0[i] + acc_wte[i]);
            for (size_t i = 0; i < nwpe; i++) want_wpe[i] = (float)(wpe0[i] + acc_wpe[i]);
            ot_buf btok = ot_make_i32(c, tok, bt, 1), bg = ot_make(c, d_g, n, 2, g);
            ot_buf bwte = ot_make(c, d_wte, nwte, 3, wte0), bwpe = ot_make(c, d_wpe, nwpe, 4, wpe0);
            CHECK_OK(o->embed_backward(c->d, has_wte ? bwte.view : tern_none(), has_wpe ? bwpe.view : tern_none(),
                                       bg.view, btok.view, B, T, C));
            /* sums of up to B*T terms in f32 */
            if (has_wte) OT_EXPECT(c, bwte, want_wte, ot_tol(d_wte, 1e-6), "embed_backward dwte B%d T%d C%d combo %d", B, T, C, combo);
            else OT_EXPECT(c, bwte, wte0, 0.0, "embed_backward left the absent dwte's buffer alone");
            if (has_wpe) OT_EXPECT(c, bwpe, want_wpe, ot_tol(d_wpe, 1e-6), "embed_backward dwpe B%d T%d C%d combo %d", B, T, C, combo);
            ot_free(c, &btok), ot_free(c, &bg), ot_free(c, &bwte), ot_free(c, &bwpe);
            free(tok), free(g), free(wte0), free(wpe0), free(acc_wte), free(acc_wpe), free(want_wte), free(want_wpe);
        }
}

/* <dout, embed(wte_dir, wpe_dir)> = <dwte, wte_dir> + <dwpe, wpe_dir> with the handler's
 * own forward and backward (f32; sums of ~10^4 products: 1e-5 relative). */
static void test_adjoint(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(43);
    int B = 3, T = 8, C = 40, vocab = 11, max_t = 8;
    size_t bt = (size_t)B * T, n = bt * C, nwte = (size_t)vocab * C, nwpe = (size_t)max_t * C;
    int32_t tok[24];
    for (size_t i = 0; i < bt; i++) tok[i] = ot_randint(0, vocab);
    float *dte = ot_random(nwte, -1, 1), *dpe = ot_random(nwpe, -1, 1), *g = ot_random(n, -1, 1);
    float *zte = calloc(nwte, sizeof(float)), *zpe = calloc(nwpe, sizeof(float));
    ot_buf btok = ot_make_i32(c, tok, bt, 0), bte = ot_make(c, TERN_F32, nwte, 0, dte), bpe = ot_make(c, TERN_F32, nwpe, 0, dpe);
    ot_buf bo = ot_make(c, TERN_F32, n, 0, NULL), bg = ot_make(c, TERN_F32, n, 0, g);
    ot_buf gte = ot_make(c, TERN_F32, nwte, 0, zte), gpe = ot_make(c, TERN_F32, nwpe, 0, zpe);
    CHECK_OK(o->embed(c->d, bo.view, btok.view, bte.view, bpe.view, tern_none(), B, T, C));
    CHECK_OK(o->embed_backward(c->d, gte.view, gpe.view, bg.view, btok.view, B, T, C));
    float *out = malloc(n * sizeof(float)), *rte = malloc(nwte * sizeof(float)), *rpe = malloc(nwpe * sizeof(float));
    ot_read(c, bo, out), ot_read(c, gte, rte), ot_read(c, gpe, rpe);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < n; i++) lhs += (double)g[i] * out[i];
    for (size_t i = 0; i < nwte; i++) rhs += (double)rte[i] * dte[i];
    for (size_t i = 0; i < nwpe; i++) rhs += (double)rpe[i] * dpe[i];
    CHECKF(fabs(lhs - rhs) <= 1e-5 * fmax(1.0, fabs(lhs)), "%s: embed adjoint: %.9g vs %.9g", c->handler, lhs, rhs);
    ot_free(c, &btok), ot_free(c, &bte), ot_free(c, &bpe), ot_free(c, &bo), ot_free(c, &bg), ot_free(c, &gte), ot_free(c, &gpe);
    free(dte), free(dpe), free(g), free(zte), free(zpe), free(out), free(rte), free(rpe);
}

static void test_errors(ot_ctx *c) {
    const tern_ops *o = c->ops;
    int B = 2, T = 3, C = 4;
    int32_t tok[6] = {0, 1, 2, 3, 4, 49}, bad_tok[6] = {0, 1, 2, 50, 4, 5}, neg_tok[6] = {0, -1, 0, 0, 0, 0};
    ot_buf btok = ot_make_i32(c, tok, 6, 0), bbad = ot_make_i32(c, bad_tok, 6, 0), bneg = ot_make_i32(c, neg_tok, 6, 0);
    ot_buf wte = ot_make(c, TERN_F32, 50 * 4, 0, NULL), wpe = ot_make(c, TERN_F32, 5 * 4, 0, NULL);
    ot_buf out = ot_make(c, TERN_F32, 24, 0, NULL), tf = ot_make(c, TERN_F32, 6, 0, NULL);
    int32_t p_ok = 2, p_bad = 3, p_neg = -1;
    ot_buf pos_ok = ot_make_i32(c, &p_ok, 1, 0), pos_bad = ot_make_i32(c, &p_bad, 1, 0), pos_neg = ot_make_i32(c, &p_neg, 1, 0);
    tern_buf none = tern_none();
    CHECK_OK(o->embed(c->d, out.view, btok.view, wte.view, wpe.view, pos_ok.view, B, T, C));
    CHECK_ERR(ot_or_sync(c, o->embed(c->d, out.view, bbad.view, wte.view, wpe.view, none, B, T, C)),
              "embed: tokens[3] = 50 is out of range [0, 50)");
    CHECK_ERR(ot_or_sync(c, o->embed(c->d, out.view, bneg.view, wte.view, wpe.view, none, B, T, C)),
              "embed: tokens[1] = -1 is out of range [0, 50)");
    CHECK_ERR(ot_or_sync(c, o->embed(c->d, out.view, btok.view, wte.view, wpe.view, pos_bad.view, B, T, C)),
              "embed: positions 3 .. 5 are out of range of wpe's 5 rows");
    CHECK_ERR(ot_or_sync(c, o->embed(c->d, out.view, btok.view, wte.view, wpe.view, pos_neg.view, B, T, C)), "embed: positions -1");
    CHECK_ERR(o->embed(c->d, out.view, tf.view, wte.view, wpe.view, none, B, T, C), "embed: tokens is f32, needs i32");
    CHECK_ERR(o->embed(c->d, out.view, btok.view, tern_view(wte.view, 0, 199), wpe.view, none, B, T, C),
              "embed: wte has 199 elements, not a whole number of rows of C = 4");
    CHECK_ERR(o->embed(c->d, out.view, btok.view, wte.view, tern_view(wpe.view, 0, 8), none, B, T, C),
              "embed: wpe has 2 rows, needs at least 3");
    CHECK_ERR(o->embed(c->d, tern_view(out.view, 0, 20), btok.view, wte.view, wpe.view, none, B, T, C),
              "embed: out has 20 elements, B * T * C needs 24");
    CHECK_ERR(o->embed(c->d, out.view, btok.view, wte.view, wpe.view, none, B, 0, C), "embed: T must be positive");
    CHECK_ERR(o->embed(c->d, tern_view(wte.all, 0, 24), btok.view, wte.view, wpe.view, none, B, T, C),
              "embed: out and wte overlap");
    CHECK_ERR(ot_or_sync(c, o->embed_backward(c->d, wte.view, wpe.view, out.view, bbad.view, B, T, C)),
              "embed_backward: tokens[3] = 50 is out of range [0, 50)");
    CHECK_ERR(o->embed_backward(c->d, none, none, out.view, btok.view, B, T, C), "embed_backward: dwte and dwpe are both absent");
    CHECK_ERR(o->embed_backward(c->d, wte.view, tern_view(wte.all, 10, 20), out.view, btok.view, B, T, C),
              "embed_backward: dwte and dwpe overlap");
    CHECK_OK(o->embed_backward(c->d, none, wpe.view, out.view, bbad.view, B, T, C)); /* tokens unused */
    ot_free(c, &btok), ot_free(c, &bbad), ot_free(c, &bneg), ot_free(c, &wte), ot_free(c, &wpe), ot_free(c, &out);
    ot_free(c, &tf), ot_free(c, &pos_ok), ot_free(c, &pos_bad), ot_free(c, &pos_neg);
}

static void test_all(ot_ctx *c) {
    test_forward(c);
    test_backward(c);
    test_adjoint(c);
    test_errors(c);
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_embed");
}
