/* The GPU core's operations at GPT-2 124M sizes, on any DSL runtime (host, opencl, cuda):
 * time per call and the bandwidth it reaches, for a training step's shapes (B x T tokens)
 * and a decode step's. The name says opencl for where it lives; `cuda` is the runtime that
 * matters for speed.
 *
 *   bench_kernels [runtime [B [T [bf16|f32 [reps]]]]]   (default: cuda 16 1024 bf16 20)
 *
 * Each operation runs once (building and compiling its kernel), then `reps` times back to
 * back between two synchronisations; the time is the mean per call, launch included. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_core/gpu_core.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static gpu_core G;
static int reps = 20;
static double total_step_us;

#define TRY(expr)                                                                        \
    do {                                                                                 \
        tern_error *e_ = (expr);                                                         \
        if (e_) {                                                                        \
            fprintf(stderr, "error: %s: %s\n", #expr, tern_error_message(e_));           \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* A buffer of n elements filled with values in [lo, hi). */
static tern_buf make(tern_dtype dt, size_t n, float lo, float hi) {
    tern_buf b;
    TRY(gpu_alloc(gpu_dev(&G), dt, n, &b));
    tern_buf f;
    TRY(gpu_alloc(gpu_dev(&G), TERN_F32, n, &f));
    float *host = malloc(n * sizeof *host);
    uint64_t s = 0x1234567ull + n;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        host[i] = lo + (hi - lo) * (float)((s >> 40) & 0xffffff) / 16777216.0f;
    }
    TRY(gpu_upload(gpu_dev(&G), f, host));
    TRY(gpu_copy(gpu_dev(&G), b, f));
    TRY(gpu_free(gpu_dev(&G), &f));
    free(host);
    return b;
}

static tern_buf make_i32(size_t n, int32_t mod) {
    tern_buf b;
    TRY(gpu_alloc(gpu_dev(&G), TERN_I32, n, &b));
    int32_t *host = malloc(n * sizeof *host);
    for (size_t i = 0; i < n; i++) host[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)mod);
    TRY(gpu_upload(gpu_dev(&G), b, host));
    free(host);
    return b;
}

typedef tern_error *(*op_fn)(void *ctx);

/* Times fn; `bytes` moved per call (0: no bandwidth), `per_step` calls per training step
 * (0: not part of the step's sum). */
static void timeit(const char *name, op_fn fn, void *ctx, double bytes, int per_step) {
    TRY(fn(ctx));
    TRY(gpu_sync(gpu_dev(&G)));
    double t0 = now();
    for (int r = 0; r < reps; r++) TRY(fn(ctx));
    TRY(gpu_sync(gpu_dev(&G)));
    double us = (now() - t0) / reps * 1e6;
    printf("%-34s %10.1f us", name, us);
    if (bytes > 0) printf("  %7.0f GB/s", bytes / (us * 1e-6) * 1e-9);
    if (per_step) printf("  x%d per step", per_step);
    printf("\n");
    total_step_us += us * per_step;
}

/* ---- the operations, each over a context of buffers ---- */

typedef struct ctx {
    int B, T, C, NH, V, Vp, L;
    tern_buf x, y, out, w, b, mean, rstd, dx, dw, db, ds, h, dh, qkv, att, dqkv, saved, logits, losses, tokens;
    tern_buf wte, wpe, dwte, dwpe, param, grad, m, v, shadow, kc, vc, pos, one_row, one_out, one_qkv, one_att;
    tern_buf one_logits, token, sum_out;
} ctx;

static tern_error *op_layernorm(void *p) {
    ctx *c = p;
    return gpu_layernorm(gpu_dev(&G), c->out, c->mean, c->rstd, c->x, c->w, c->b, c->B * c->T, c->C, 1e-5f);
}
static tern_error *op_layernorm_backward(void *p) {
    ctx *c = p;
    return gpu_layernorm_backward(gpu_dev(&G), c->dx, c->dw, c->db, tern_none(), tern_none(), c->y, c->x, c->w, tern_none(), c->mean, c->rstd, c->B * c->T,
                                  c->C, 1.0f);
}
/* as the model's training step calls it: dsum (a projection's bias gradient), written */
static tern_error *op_layernorm_backward_dsum(void *p) {
    ctx *c = p;
    return gpu_layernorm_backward(gpu_dev(&G), c->dx, c->dw, c->db, c->ds, tern_none(), c->y, c->x, c->w, tern_none(), c->mean, c->rstd, c->B * c->T,
                                  c->C, 0.0f);
}
static tern_error *op_gelu(void *p) {
    ctx *c = p;
    return gpu_gelu(gpu_dev(&G), c->dh, c->h);
}
static tern_error *op_gelu_backward(void *p) {
    ctx *c = p;
    return gpu_gelu_backward(gpu_dev(&G), c->dh, c->dh, c->h);
}
static tern_error *op_add(void *p) {
    ctx *c = p;
    return gpu_add(gpu_dev(&G), c->out, c->x, c->y);
}
static tern_error *op_sum_rows(void *p) {
    ctx *c = p;
    return gpu_sum_rows(gpu_dev(&G), c->sum_out, c->dh, c->B * c->T, 4 * c->C, 1.0f);
}
static tern_error *op_attention(void *p) {
    ctx *c = p;
    return gpu_attention(gpu_dev(&G), c->att, c->saved, c->qkv, c->B, c->T, c->NH, c->NH, c->C / c->NH);
}
static tern_error *op_attention_backward(void *p) {
    ctx *c = p;
    return gpu_attention_backward(gpu_dev(&G), c->dqkv, c->y, c->qkv, c->att, c->saved, c->B, c->T, c->NH, c->NH, c->C / c->NH);
}
static tern_error *op_cross_entropy(void *p) {
    ctx *c = p;
    return gpu_cross_entropy(gpu_dev(&G), c->losses, c->logits, c->tokens, c->B * c->T, c->V, c->Vp, 1.0f / (float)(c->B * c->T));
}
static tern_error *op_embed(void *p) {
    ctx *c = p;
    return gpu_embed(gpu_dev(&G), c->x, c->tokens, c->wte, c->wpe, tern_none(), c->B, c->T, c->C);
}
static tern_error *op_embed_backward(void *p) {
    ctx *c = p;
    return gpu_embed_backward(gpu_dev(&G), c->dwte, c->dwpe, c->y, c->tokens, c->B, c->T, c->C);
}
static tern_error *op_adamw(void *p) {
    ctx *c = p;
    tern_adamw h = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 1,
                    .grad_scale = 1.0f};
    return gpu_adamw(gpu_dev(&G), c->param, c->shadow, c->grad, c->m, c->v, &h);
}
static double norm_out;
static tern_error *op_norm2(void *p) {
    ctx *c = p;
    return gpu_norm2(gpu_dev(&G), c->grad, &norm_out);
}
/* decode: one row per sequence, B = 1 */
static tern_error *op_dec_layernorm(void *p) {
    ctx *c = p;
    return gpu_layernorm(gpu_dev(&G), c->one_out, tern_none(), tern_none(), c->one_row, c->w, c->b, 1, c->C, 1e-5f);
}
static tern_error *op_dec_attention(void *p) {
    ctx *c = p;
    return gpu_attention_cached(gpu_dev(&G), c->one_att, c->kc, c->vc, c->one_qkv, c->pos, 1, 1, c->NH, c->NH, c->C / c->NH, 1024);
}
static tern_error *op_dec_sample(void *p) {
    ctx *c = p;
    return gpu_sample(gpu_dev(&G), c->token, c->one_logits, 1, c->V, c->Vp, 0.8f, 40, 42, c->pos);
}
static tern_error *op_dec_sample_all(void *p) {
    ctx *c = p;
    return gpu_sample(gpu_dev(&G), c->token, c->one_logits, 1, c->V, c->Vp, 1.0f, 0, 42, c->pos);
}
static tern_error *op_dec_greedy(void *p) {
    ctx *c = p;
    return gpu_sample(gpu_dev(&G), c->token, c->one_logits, 1, c->V, c->Vp, 0.0f, 0, 42, c->pos);
}
static tern_error *op_dec_add(void *p) {
    ctx *c = p;
    return gpu_add(gpu_dev(&G), c->one_row, c->one_row, c->one_out);
}
static tern_error *op_dec_embed(void *p) {
    ctx *c = p;
    return gpu_embed(gpu_dev(&G), c->one_row, c->token, c->wte, c->wpe, c->pos, 1, 1, c->C);
}

int main(int argc, char **argv) {
    const char *runtime = argc > 1 ? argv[1] : "cuda";
    ctx c = {.B = argc > 2 ? atoi(argv[2]) : 16, .T = argc > 3 ? atoi(argv[3]) : 1024, .C = 768, .NH = 12,
             .V = 50257, .Vp = 50304, .L = 12};
    tern_dtype dt = argc > 4 && !strcmp(argv[4], "f32") ? TERN_F32 : TERN_BF16;
    if (argc > 5) reps = atoi(argv[5]);
    tern_rt *rt;
    TRY(tern_rt_open(runtime, &rt));
    TRY(gpu_core_init(&G, rt, NULL, NULL, NULL));
    printf("runtime %s (%s), B %d T %d C %d NH %d, %s activations\n", runtime, tern_rt_device(rt), c.B, c.T, c.C,
           c.NH, tern_dtype_name(dt));
    size_t bt = (size_t)c.B * c.T, C = (size_t)c.C, es = tern_dtype_size(dt);
    size_t nparams = 124439808;
    c.x = make(dt, bt * C, -1, 1);
    c.y = make(dt, bt * C, -1, 1);
    c.out = make(dt, bt * C, 0, 0);
    c.w = make(dt, C, 0.5f, 1.5f);
    c.b = make(dt, C, -0.1f, 0.1f);
    c.mean = make(TERN_F32, bt, 0, 0);
    c.rstd = make(TERN_F32, bt, 0, 0);
    c.dx = make(dt, bt * C, -1, 1);
    c.dw = make(dt, C, 0, 0);
    c.db = make(dt, C, 0, 0);
    c.ds = make(dt, C, 0, 0);
    c.h = make(dt, bt * 4 * C, -3, 3);
    c.dh = make(dt, bt * 4 * C, -1, 1);
    c.sum_out = make(dt, 4 * C, 0, 0);
    c.qkv = make(dt, bt * 3 * C, -1, 1);
    c.att = make(dt, bt * C, 0, 0);
    c.dqkv = make(dt, bt * 3 * C, 0, 0);
    size_t saved_len;
    TRY(gpu_attention_saved_len(gpu_dev(&G), c.B, c.T, c.NH, &saved_len));
    c.saved = make(TERN_F32, saved_len, 0, 0);
    c.tokens = make_i32(bt, c.V);
    c.logits = make(dt, bt * (size_t)c.Vp, -5, 5);
    c.losses = make(TERN_F32, bt, 0, 0);
    c.wte = make(dt, (size_t)c.Vp * C, -0.1f, 0.1f);
    c.wpe = make(dt, 1024 * C, -0.1f, 0.1f);
    c.dwte = make(dt, (size_t)c.Vp * C, 0, 0);
    c.dwpe = make(dt, 1024 * C, 0, 0);
    c.param = make(TERN_F32, nparams, -0.1f, 0.1f);
    c.grad = make(dt, nparams, -0.01f, 0.01f);
    c.m = make(TERN_F32, nparams, 0, 0);
    c.v = make(TERN_F32, nparams, 0, 0);
    c.shadow = dt == TERN_F32 ? tern_none() : make(dt, nparams, 0, 0);
    c.kc = make(dt, 1024 * C, -1, 1);
    c.vc = make(dt, 1024 * C, -1, 1);
    int32_t p0 = 512;
    TRY(gpu_alloc(gpu_dev(&G), TERN_I32, 1, &c.pos));
    TRY(gpu_upload(gpu_dev(&G), c.pos, &p0));
    c.one_row = make(dt, C, -1, 1);
    c.one_out = make(dt, C, 0, 0);
    c.one_qkv = make(dt, 3 * C, -1, 1);
    c.one_att = make(dt, C, 0, 0);
    c.one_logits = make(dt, (size_t)c.Vp, -5, 5);
    c.token = make_i32(1, c.V);

    double act = (double)bt * C * es, h4 = 4 * act;
    printf("-- training step shapes (per call; 'x N per step' counts calls in one 12-layer step)\n");
    timeit("layernorm", op_layernorm, &c, 2 * act, 2 * c.L + 1);
    /* a step: layer 0's ln_1 without dsum, the other 2L with it (models/gpt2/forward.c) */
    timeit("layernorm_backward", op_layernorm_backward, &c, 4 * act, 1);
    timeit("layernorm_backward + dsum", op_layernorm_backward_dsum, &c, 4 * act, 2 * c.L);
    timeit("gelu (if not in the GEMM epilogue)", op_gelu, &c, 2 * h4, 0);
    timeit("gelu_backward (in place)", op_gelu_backward, &c, 3 * h4, c.L);
    timeit("add", op_add, &c, 3 * act, 2 * c.L);
    timeit("sum_rows (BT x 4C)", op_sum_rows, &c, h4, 0);
    timeit("attention", op_attention, &c, 0, c.L);
    timeit("attention_backward", op_attention_backward, &c, 0, c.L);
    timeit("cross_entropy (with gradient)", op_cross_entropy, &c, 3.0 * bt * c.Vp * es, 1);
    timeit("embed", op_embed, &c, 3 * act, 1);
    timeit("embed_backward", op_embed_backward, &c, 0, 1);
    timeit("adamw (124M, shadow)", op_adamw, &c, (double)nparams * (16 + es + (dt == TERN_F32 ? 0 : es)), 1);
    timeit("norm2 (124M)", op_norm2, &c, (double)nparams * es, 1);
    printf("sum over one step (these kernels only): %.2f ms\n", total_step_us * 1e-3);
    printf("-- decode step shapes (B 1, position 512)\n");
    total_step_us = 0;
    timeit("embed", op_dec_embed, &c, 0, 1);
    timeit("layernorm (1 row)", op_dec_layernorm, &c, 0, 2 * c.L + 1);
    timeit("attention_cached", op_dec_attention, &c, 0, c.L);
    timeit("add (1 row)", op_dec_add, &c, 0, 2 * c.L);
    timeit("sample (T 0.8, top-k 40)", op_dec_sample, &c, 0, 1);
    timeit("sample (T 1, all)", op_dec_sample_all, &c, 0, 0);
    timeit("sample (greedy)", op_dec_greedy, &c, 0, 0);
    printf("sum over one decode step (these kernels only, no graphs): %.2f ms\n", total_step_us * 1e-3);
    gpu_core_free(&G);
    tern_rt_close(rt);
    return 0;
}
