/* Micro-benchmarks of the hot operations at GPT-2 124M sizes, on one handler:
 *   bench_ops [handler] [filter]
 * handler defaults to cpu; filter (a substring) picks benchmarks by name. Each benchmark
 * reports the best of several runs (after a warm-up) and its rate (GFLOP/s or GB/s), from
 * wall time, and the process CPU time of that run divided by OMP_NUM_THREADS: on a quiet
 * machine the two agree; on a shared one the CPU figure is what the code would do alone
 * (threads spinning at a barrier still count, so poor balance still shows). A filter
 * containing "B16 T1024" runs only the training step's sizes instead, for a GPU (flash
 * attention at 12 and 25 heads, the fc product with and without its GELU epilogue; 10
 * calls between synchronisations, as bench/h200/attention_peers.py times its peers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/effect.h"
#include "tern/handlers.h"

static const tern_ops *o;
static tern_dev *dev;
static const char *filter;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bench_threads = 1;

static void die_on(tern_error *err, const char *what) {
    if (!err) return;
    fprintf(stderr, "bench_ops: %s: %s\n", what, tern_error_message(err));
    exit(1);
}

static tern_buf buf(tern_dtype dt, size_t n, double lo, double hi) {
    tern_buf b;
    die_on(o->alloc(dev, dt, n, &b), "alloc");
    float *h = malloc(n * sizeof(float));
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        h[i] = (float)(lo + (hi - lo) * (double)(s >> 8) / 16777216.0);
    }
    tern_buf f;
    die_on(o->alloc(dev, TERN_F32, n, &f), "alloc");
    die_on(o->upload(dev, f, h), "upload");
    die_on(o->copy(dev, b, f), "copy");
    die_on(o->free(dev, &f), "free");
    free(h);
    return b;
}

/* A GPU's form: body 10 times between synchronisations (as CUDA events time a peer's 10
 * calls), the best of 7 such runs after a warm-up run, printed as ms a call and TFLOP/s. */
#define BENCH_CALLS(name, flops, body)                                                      \
    do {                                                                                    \
        double best_ = 1e30;                                                                \
        for (int run_ = -1; run_ < 7; run_++) {                                             \
            double t0_ = now();                                                             \
            for (int c_ = 0; c_ < 10; c_++) body;                                           \
            die_on(o->sync(dev), name);                                                     \
            double dt_ = (now() - t0_) / 10;                                                \
            if (run_ >= 0 && dt_ < best_) best_ = dt_;                                      \
        }                                                                                   \
        printf("%-44s %9.3f ms %8.1f TFLOP/s\n", name, best_ * 1e3, (flops) / best_ / 1e12); \
    } while (0)

/* Runs body `reps` times after one warm-up, prints the best time and rate. */
#define BENCH(name, reps, work, unit, body)                                                 \
    do {                                                                                    \
        if (filter && !strstr(name, filter)) break;                                         \
        body;                                                                               \
        die_on(o->sync(dev), name);                                                         \
        double best = 1e30, best_cpu = 1e30;                                                \
        for (int r_ = 0; r_ < (reps); r_++) {                                               \
            double t0_ = now(), c0_ = cpu_now();                                            \
            body;                                                                           \
            die_on(o->sync(dev), name);                                                     \
            double dt_ = now() - t0_, dc_ = (cpu_now() - c0_) / bench_threads;              \
            if (dt_ < best) best = dt_;                                                     \
            if (dc_ < best_cpu) best_cpu = dc_;                                             \
        }                                                                                   \
        printf("%-44s %9.3f ms %8.1f %-7s| cpu %9.3f ms %8.1f\n", name, best * 1e3,          \
               (work) / best / 1e9, unit, best_cpu * 1e3, (work) / best_cpu / 1e9);         \
    } while (0)

static void bench_matmul(const char *name, int m, int n, int k, bool ta, bool tb, tern_dtype da,
                         tern_dtype db, tern_dtype dc, bool bias, bool gelu, int reps) {
    tern_buf a = buf(da, (size_t)m * k, -1, 1), b = buf(db, (size_t)k * n, -1, 1);
    tern_buf c = buf(dc, (size_t)m * n, -1, 1), bb = buf(TERN_F32, (size_t)n, -1, 1);
    tern_buf aux = gelu ? buf(TERN_F32, (size_t)m * n, 0, 0) : tern_none();
    tern_matmul mm = {0};
    mm.m = m;
    mm.n = n;
    mm.k = k;
    mm.trans_a = ta;
    mm.trans_b = tb;
    mm.alpha = 1;
    mm.bias = bias ? bb : tern_none();
    mm.epilogue = gelu ? TERN_EPILOGUE_GELU : TERN_EPILOGUE_NONE;
    mm.aux = aux;
    double flops = 2.0 * m * n * k;
    /* decode-sized matmuls are limited by reading B: report GB/s of B then */
    double work = m <= 8 ? (double)tern_dtype_bytes(db, (size_t)k * n) : flops;
    BENCH(name, reps, work, m <= 8 ? "GB/s" : "GFLOP/s",
          die_on(o->matmul(dev, c, a, b, &mm), name));
    o->free(dev, &a);
    o->free(dev, &b);
    o->free(dev, &c);
    o->free(dev, &bb);
    if (gelu) o->free(dev, &aux);
}

/* Flash attention at a training step's size, bf16 as GPT-2's bf16 training runs it (qkv,
 * out and their gradients bf16, the saved statistics f32): B=16, T=1024, hs=64, causal, NH
 * heads (12: 124M, 25: 1.5B). FLOPs as FlashAttention's papers count them: the forward's two
 * products over the causal half, 4 B NH T^2 hs / 2; the backward's five, 2.5 times that.
 * bench/h200/attention_peers.py times PyTorch's kernels at the same sizes (BENCH_CALLS). */
static void bench_attention_train(int NH) {
    const int B = 16, T = 1024, hs = 64, C = NH * hs;
    char fwd[64], bwd[64];
    snprintf(fwd, sizeof fwd, "attention bf16 B16 T1024 NH%d hs64", NH);
    snprintf(bwd, sizeof bwd, "attention_backward bf16 B16 T1024 NH%d hs64", NH);
    if (filter && !strstr(fwd, filter) && !strstr(bwd, filter)) return;
    size_t BT = (size_t)B * T, saved_len;
    die_on(o->attention_saved_len(dev, B, T, NH, &saved_len), "saved_len");
    tern_buf qkv = buf(TERN_BF16, BT * 3 * C, -1, 1), att = buf(TERN_BF16, BT * C, 0, 0);
    tern_buf datt = buf(TERN_BF16, BT * C, -1, 1), dqkv = buf(TERN_BF16, BT * 3 * C, 0, 0);
    tern_buf saved = buf(TERN_F32, saved_len, 0, 0);
    double flops = 4.0 * B * NH * (double)T * T * hs / 2;
    if (!filter || strstr(fwd, filter))
        BENCH_CALLS(fwd, flops, die_on(o->attention(dev, att, saved, qkv, B, T, NH, NH, hs), fwd));
    if (!filter || strstr(bwd, filter))
        BENCH_CALLS(bwd, 2.5 * flops,
                    die_on(o->attention_backward(dev, dqkv, datt, qkv, att, saved, B, T, NH, NH, hs), bwd));
    o->free(dev, &qkv); o->free(dev, &att); o->free(dev, &datt); o->free(dev, &dqkv); o->free(dev, &saved);
}

/* cuBLASLt (through the cuda handler's matmul) on GPT-2's fc product at a training step's
 * size, all bf16 as bf16 training runs it: [16384, k] @ [k, n] (124M: k 768, n 3,072; 1.5B:
 * 1,600 and 6,400), plain, with the bias, with the bias and GELU writing its aux, and the
 * backward's product through the GELU (B transposed, aux read: the DGELU epilogue). */
static void bench_fc_train(int k, int n, const char *const names[4]) {
    const int m = 16384;
    tern_buf a = buf(TERN_BF16, (size_t)m * k, -1, 1), b = buf(TERN_BF16, (size_t)k * n, -0.0625, 0.0625);
    tern_buf c = buf(TERN_BF16, (size_t)m * n, 0, 0), aux = buf(TERN_BF16, (size_t)m * n, 0, 0);
    tern_buf bias = buf(TERN_BF16, (size_t)n, -1, 1);
    for (int v = 0; v < 4; v++) {
        if (filter && !strstr(names[v], filter)) continue;
        tern_matmul mm = {.m = m, .n = n, .k = k, .alpha = 1};
        mm.bias = v == 1 || v == 2 ? bias : tern_none();
        mm.epilogue = v == 2 ? TERN_EPILOGUE_GELU : TERN_EPILOGUE_NONE;
        mm.aux = v >= 2 ? aux : tern_none();
        if (v == 3) { /* the backward's: d pre = (dy @ W^T) gelu'(pre), W [n, k] as the weight is stored */
            mm.trans_b = true;
            mm.epilogue = TERN_EPILOGUE_GELU_BACKWARD;
        }
        /* (the warm-up run also tunes cuBLASLt's choice) */
        BENCH_CALLS(names[v], 2.0 * m * n * k, die_on(o->matmul(dev, c, a, b, &mm), names[v]));
    }
    o->free(dev, &a); o->free(dev, &b); o->free(dev, &c); o->free(dev, &aux); o->free(dev, &bias);
}

int main(int argc, char **argv) {
    const char *handler = argc > 1 ? argv[1] : "cpu";
    const char *omp = getenv("OMP_NUM_THREADS");
    if (omp && atoi(omp) > 0) bench_threads = atoi(omp);
    filter = argc > 2 ? argv[2] : NULL;
    o = tern_handler_ops(handler);
    if (!o) {
        fprintf(stderr, "bench_ops: handler %s is not built in\n", handler);
        return 1;
    }
    die_on(o->open(NULL, &dev), "open");
    const char *dn;
    die_on(o->device_name(dev, &dn), "device_name");
    printf("handler %s (%s)\n", handler, dn);
    const int BT = 256, C = 768, V = 50257, Vp = 50304;
    /* only when asked for by name: a training step's sizes, for a GPU (a CPU takes minutes) */
    if (filter && strstr(filter, "B16 T1024")) {
        bench_attention_train(12);
        bench_attention_train(25);
        static const char *const fc[] = {"matmul bf16 fc B16 T1024 plain", "matmul bf16 fc B16 T1024 bias",
                                         "matmul bf16 fc B16 T1024 gelu+aux+bias", "matmul bf16 fc B16 T1024 dgelu"};
        static const char *const fc_xl[] = {"matmul bf16 fc B16 T1024 xl plain", "matmul bf16 fc B16 T1024 xl bias",
                                            "matmul bf16 fc B16 T1024 xl gelu+aux+bias",
                                            "matmul bf16 fc B16 T1024 xl dgelu"};
        bench_fc_train(768, 3072, fc);
        bench_fc_train(1600, 6400, fc_xl); /* GPT-2 1.5B's */
        die_on(o->close(dev), "close");
        return 0;
    }

    /* training step B=4, T=64, fp32: forward, then the two backward matmuls per linear */
    bench_matmul("matmul fwd qkv 256x768 @ 768x2304", BT, 3 * C, C, false, false, TERN_F32, TERN_F32, TERN_F32, true, false, 10);
    bench_matmul("matmul fwd fc 256x768 @ 768x3072 +gelu", BT, 4 * C, C, false, false, TERN_F32, TERN_F32, TERN_F32, true, true, 10);
    bench_matmul("matmul fwd proj 256x3072 @ 3072x768", BT, C, 4 * C, false, false, TERN_F32, TERN_F32, TERN_F32, true, false, 10);
    bench_matmul("matmul fwd lm head 256x768 @ (50304x768)^T", BT, Vp, C, false, true, TERN_F32, TERN_F32, TERN_F32, false, false, 5);
    bench_matmul("matmul bwd dx 256x2304 @ (768x2304)^T", BT, C, 3 * C, false, true, TERN_F32, TERN_F32, TERN_F32, false, false, 10);
    bench_matmul("matmul bwd dw (256x768)^T @ 256x2304", C, 3 * C, BT, true, false, TERN_F32, TERN_F32, TERN_F32, false, false, 10);
    bench_matmul("matmul bwd lm dx 256x50304 @ 50304x768", BT, C, Vp, false, false, TERN_F32, TERN_F32, TERN_F32, false, false, 5);
    bench_matmul("matmul bwd lm dw (256x50304)^T @ 256x768", Vp, C, BT, true, false, TERN_F32, TERN_F32, TERN_F32, false, false, 5);
    /* mixed: bf16 weights with a prompt-sized A */
    bench_matmul("matmul bf16 B 64x768 @ 768x3072", 64, 4 * C, C, false, false, TERN_F32, TERN_BF16, TERN_F32, true, false, 10);
    /* a 64-token prompt's products, fp32 */
    bench_matmul("matmul f32 64x768 @ 768x3072 +gelu", 64, 4 * C, C, false, false, TERN_F32, TERN_F32, TERN_F32, true, true, 10);
    bench_matmul("matmul f32 64x3072 @ 3072x768", 64, C, 4 * C, false, false, TERN_F32, TERN_F32, TERN_F32, true, false, 10);
    /* the same at bf16 (A, B and C bf16: the bf16 model's prompt; the bf16 GEMM where the
     * processor has AVX512_BF16, else sgemm on converted operands) */
    bench_matmul("prefill bf16 64x768 @ 768x2304", 64, 3 * C, C, false, false, TERN_BF16, TERN_BF16, TERN_BF16, true, false, 20);
    bench_matmul("prefill bf16 64x768 @ 768x3072 +gelu", 64, 4 * C, C, false, false, TERN_BF16, TERN_BF16, TERN_BF16, true, true, 20);
    bench_matmul("prefill bf16 64x3072 @ 3072x768", 64, C, 4 * C, false, false, TERN_BF16, TERN_BF16, TERN_BF16, true, false, 20);
    bench_matmul("prefill bf16 64x768 @ (3072x768)^T", 64, 4 * C, C, false, true, TERN_BF16, TERN_BF16, TERN_BF16, true, false, 20);

    /* decoding, batch 1: B streamed once */
    bench_matmul("decode f32 1x768 @ 768x2304", 1, 3 * C, C, false, false, TERN_F32, TERN_F32, TERN_F32, true, false, 50);
    bench_matmul("decode bf16 1x768 @ 768x2304", 1, 3 * C, C, false, false, TERN_F32, TERN_BF16, TERN_F32, true, false, 50);
    bench_matmul("decode bf16 1x768 @ 768x3072 +gelu", 1, 4 * C, C, false, false, TERN_F32, TERN_BF16, TERN_F32, true, true, 50);
    bench_matmul("decode bf16 1x3072 @ 3072x768", 1, C, 4 * C, false, false, TERN_F32, TERN_BF16, TERN_F32, true, false, 50);
    bench_matmul("decode bf16 1x768 @ (768x2304)^T", 1, 3 * C, C, false, true, TERN_F32, TERN_BF16, TERN_F32, true, false, 50);
    bench_matmul("decode bf16 lm head 1x768 @ (50304x768)^T", 1, Vp, C, false, true, TERN_F32, TERN_BF16, TERN_F32, false, false, 20);
    bench_matmul("decode bf16 A,C bf16 1x768 @ 768x3072", 1, 4 * C, C, false, false, TERN_BF16, TERN_BF16, TERN_BF16, true, false, 50);
    bench_matmul("decode f16 1x768 @ 768x3072", 1, 4 * C, C, false, false, TERN_F32, TERN_F16, TERN_F32, true, false, 50);
    /* q8_0 weights ([n, k] only), against f32 and bf16 in the same layout */
    bench_matmul("decode f32 1x768 @ (3072x768)^T", 1, 4 * C, C, false, true, TERN_F32, TERN_F32, TERN_F32, true, false, 50);
    bench_matmul("decode bf16 1x768 @ (3072x768)^T", 1, 4 * C, C, false, true, TERN_F32, TERN_BF16, TERN_F32, true, false, 50);
    bench_matmul("decode q8_0 1x768 @ (3072x768)^T", 1, 4 * C, C, false, true, TERN_F32, TERN_Q8, TERN_F32, true, false, 50);
    bench_matmul("decode q8_0 1x3072 @ (768x3072)^T", 1, C, 4 * C, false, true, TERN_F32, TERN_Q8, TERN_F32, true, false, 50);
    bench_matmul("decode q8_0 4x768 @ (3072x768)^T", 4, 4 * C, C, false, true, TERN_F32, TERN_Q8, TERN_F32, true, false, 50);
    bench_matmul("decode q8_0 lm head 1x768 @ (50304x768)^T", 1, Vp, C, false, true, TERN_F32, TERN_Q8, TERN_F32, false, false, 20);
    bench_matmul("matmul q8_0 B 64x768 @ (3072x768)^T", 64, 4 * C, C, false, true, TERN_F32, TERN_Q8, TERN_F32, true, false, 10);

    /* one decoding step's matmuls: 12 layers of GPT-2 124M weights (170 MB in bf16, far
     * beyond L3) and the tied lm head, batch 1; B stored [k, n] as Hugging Face's Conv1D
     * ("nt"), or [n, k] ("t") */
    for (int layout = 0; layout < 5; layout++) { /* 2: q8_0, [n, k]; 3, 4: fp32 */
        const char *names[] = {"decode step bf16 weights [k,n], 12 layers + head",
                               "decode step bf16 weights [n,k], 12 layers + head",
                               "decode step q8_0 weights [n,k], 12 layers + head",
                               "decode step fp32 weights [k,n], 12 layers + head",
                               "decode step fp32 weights [n,k], 12 layers + head"};
        const char *name = names[layout];
        tern_dtype wt = layout == 2 ? TERN_Q8 : layout >= 3 ? TERN_F32 : TERN_BF16;
        if (filter && !strstr(name, filter)) continue;
        const int shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}}; /* k, n */
        tern_buf w[12][4], x = buf(TERN_F32, 4 * C, -1, 1), y = buf(TERN_F32, Vp, 0, 0);
        tern_buf head = buf(wt, (size_t)Vp * C, -0.1, 0.1);
        double bytes = (double)tern_dtype_bytes(wt, (size_t)Vp * C);
        for (int l = 0; l < 12; l++)
            for (int i = 0; i < 4; i++) {
                w[l][i] = buf(wt, (size_t)shapes[i][0] * shapes[i][1], -0.1, 0.1);
                bytes += (double)tern_dtype_bytes(wt, (size_t)shapes[i][0] * shapes[i][1]);
            }
        BENCH(name, 5, bytes, "GB/s", {
            for (int l = 0; l < 12; l++)
                for (int i = 0; i < 4; i++) {
                    tern_matmul mm = {0};
                    mm.m = 1;
                    mm.k = shapes[i][0];
                    mm.n = shapes[i][1];
                    mm.trans_b = layout == 1 || layout == 2 || layout == 4;
                    mm.alpha = 1;
                    die_on(o->matmul(dev, tern_view(y, 0, (size_t)mm.n), tern_view(x, 0, (size_t)mm.k), w[l][i], &mm), "matmul");
                }
            tern_matmul mm = {0};
            mm.m = 1;
            mm.k = C;
            mm.n = Vp;
            mm.trans_b = true;
            mm.alpha = 1;
            die_on(o->matmul(dev, y, tern_view(x, 0, C), head, &mm), "matmul");
        });
        for (int l = 0; l < 12; l++)
            for (int i = 0; i < 4; i++) o->free(dev, &w[l][i]);
        o->free(dev, &x);
        o->free(dev, &y);
        o->free(dev, &head);
    }

    /* a 64-token prompt's products through 12 layers of GPT-2 124M weights (bf16, 170 MB: B
     * comes from memory, as in a real prefill, not from L3): A, B and C bf16, bias, GELU on
     * the fc product, the residual products accumulating (beta 1) into an f32 stream */
    for (int v = 0; v < 4; v++) { /* fp32, bf16; B [k, n] (Conv1D), then [n, k] (Llama's nn.Linear) */
        const char *names[] = {"prefill step fp32, 64 rows, 12 layers", "prefill step bf16, 64 rows, 12 layers",
                               "prefill step fp32 [n,k], 64 rows, 12 layers",
                               "prefill step bf16 [n,k], 64 rows, 12 layers"};
        const char *name = names[v];
        int prec = v % 2;
        bool nk = v >= 2;
        if (filter && !strstr(name, filter)) continue;
        tern_dtype wt = prec ? TERN_BF16 : TERN_F32;
        const int shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}}; /* k, n */
        tern_buf w[12][4], bias[12][4];
        tern_buf x = buf(wt, 64 * 4 * C, -1, 1), y = buf(wt, 64 * 4 * C, 0, 0), res = buf(TERN_F32, 64 * C, 0, 0);
        double flops = 0;
        for (int l = 0; l < 12; l++)
            for (int i = 0; i < 4; i++) {
                w[l][i] = buf(wt, (size_t)shapes[i][0] * shapes[i][1], -0.1, 0.1);
                bias[l][i] = buf(TERN_F32, (size_t)shapes[i][1], -0.1, 0.1);
                flops += 2.0 * 64 * shapes[i][0] * shapes[i][1];
            }
        BENCH(name, 5, flops, "GFLOP/s", {
            for (int l = 0; l < 12; l++)
                for (int i = 0; i < 4; i++) {
                    tern_matmul mm = {0};
                    mm.m = 64;
                    mm.k = shapes[i][0];
                    mm.n = shapes[i][1];
                    mm.trans_b = nk;
                    mm.alpha = 1;
                    mm.beta = i % 2 ? 1.0f : 0.0f; /* proj and fc proj: the residual update */
                    mm.bias = bias[l][i];
                    mm.epilogue = i == 2 ? TERN_EPILOGUE_GELU : TERN_EPILOGUE_NONE;
                    tern_buf out = i % 2 ? res : tern_view(y, 0, (size_t)64 * mm.n);
                    die_on(o->matmul(dev, out, tern_view(x, 0, (size_t)64 * mm.k), w[l][i], &mm), "matmul");
                }
        });
        for (int l = 0; l < 12; l++)
            for (int i = 0; i < 4; i++) o->free(dev, &w[l][i]), o->free(dev, &bias[l][i]);
        o->free(dev, &x);
        o->free(dev, &y);
        o->free(dev, &res);
    }

    {
        tern_buf x = buf(TERN_F32, (size_t)BT * C, -1, 1), out = buf(TERN_F32, (size_t)BT * C, 0, 0);
        tern_buf w = buf(TERN_F32, C, 0.5, 1.5), b = buf(TERN_F32, C, -1, 1);
        tern_buf mean = buf(TERN_F32, BT, 0, 0), rstd = buf(TERN_F32, BT, 0, 0);
        tern_buf dx = buf(TERN_F32, (size_t)BT * C, 0, 0), dw = buf(TERN_F32, C, 0, 0), db = buf(TERN_F32, C, 0, 0);
        double bytes = 2.0 * BT * C * 4;
        BENCH("layernorm 256x768", 50, bytes, "GB/s",
              die_on(o->layernorm(dev, out, mean, rstd, x, w, b, BT, C, 1e-5f), "layernorm"));
        BENCH("layernorm_backward 256x768", 50, 2 * bytes, "GB/s",
              die_on(o->layernorm_backward(dev, dx, dw, db, tern_none(), tern_none(), out, x, w, tern_none(), mean, rstd, BT, C, 1.0f), "lnb"));
        tern_buf h = buf(TERN_F32, (size_t)BT * 4 * C, -3, 3), hg = buf(TERN_F32, (size_t)BT * 4 * C, 0, 0);
        BENCH("gelu 256x3072", 50, 2.0 * BT * 4 * C * 4, "GB/s", die_on(o->gelu(dev, hg, h), "gelu"));
        BENCH("gelu_backward 256x3072", 50, 3.0 * BT * 4 * C * 4, "GB/s",
              die_on(o->gelu_backward(dev, hg, hg, h), "gelu_backward"));
        BENCH("add 256x768", 50, 3.0 * BT * C * 4, "GB/s", die_on(o->add(dev, out, out, x), "add"));
        BENCH("sum_rows 256x3072", 50, 1.0 * BT * 4 * C * 4, "GB/s",
              die_on(o->sum_rows(dev, tern_view(hg, 0, 4 * C), h, BT, 4 * C, 1), "sum_rows"));
        tern_buf qkv = buf(TERN_F32, (size_t)BT * 3 * C, -1, 1), att = buf(TERN_F32, (size_t)BT * C, 0, 0);
        size_t saved_len;
        die_on(o->attention_saved_len(dev, 4, 64, 12, &saved_len), "saved_len");
        tern_buf saved = buf(TERN_F32, saved_len, 0, 0), dqkv = buf(TERN_F32, (size_t)BT * 3 * C, 0, 0);
        double att_flops = 4.0 * 12 * 64 * 64 * 64 * 2; /* causal half of QK^T and PV, x2 */
        BENCH("attention B4 T64 NH12", 50, att_flops, "GFLOP/s",
              die_on(o->attention(dev, att, saved, qkv, 4, 64, 12, 12, C / 12), "attention"));
        BENCH("attention_backward B4 T64 NH12", 50, 2 * att_flops, "GFLOP/s",
              die_on(o->attention_backward(dev, dqkv, x, qkv, att, saved, 4, 64, 12, 12, C / 12), "attention_backward"));
        /* over a KV cache, as generation: a 64-token prompt, then one token at position 64;
         * qkv, out and the caches [1, 12, 1024, 64] in f32 (fp32) or bf16 (bf16) */
        for (int prec = 0; prec < 2; prec++) {
            tern_dtype dt = prec ? TERN_BF16 : TERN_F32;
            tern_buf cq = buf(dt, (size_t)64 * 3 * C, -1, 1), co = buf(dt, (size_t)64 * C, 0, 0);
            tern_buf kc = buf(dt, (size_t)12 * 1024 * 64, 0, 0), vc = buf(dt, (size_t)12 * 1024 * 64, 0, 0);
            tern_buf p0, p64;
            int32_t zero = 0, at64 = 64;
            die_on(o->alloc(dev, TERN_I32, 1, &p0), "alloc");
            die_on(o->alloc(dev, TERN_I32, 1, &p64), "alloc");
            die_on(o->upload(dev, p0, &zero), "upload");
            die_on(o->upload(dev, p64, &at64), "upload");
            double prompt_flops = 12.0 * 64 * 65 / 2 * 64 * 4, token_flops = 12.0 * 65 * 64 * 4;
            BENCH(prec ? "attention_cached prompt 64, bf16" : "attention_cached prompt 64, fp32", 50, prompt_flops,
                  "GFLOP/s", die_on(o->attention_cached(dev, co, kc, vc, cq, p0, 1, 64, 12, 12, 64, 1024), "att"));
            BENCH(prec ? "attention_cached token at 64, bf16" : "attention_cached token at 64, fp32", 200, token_flops,
                  "GFLOP/s",
                  die_on(o->attention_cached(dev, tern_view(co, 0, C), kc, vc, tern_view(cq, 0, 3 * C), p64, 1, 1,
                                             12, 12, 64, 1024), "att"));
            o->free(dev, &cq); o->free(dev, &co); o->free(dev, &kc); o->free(dev, &vc);
            o->free(dev, &p0); o->free(dev, &p64);
        }
        o->free(dev, &x); o->free(dev, &out); o->free(dev, &w); o->free(dev, &b); o->free(dev, &mean);
        o->free(dev, &rstd); o->free(dev, &dx); o->free(dev, &dw); o->free(dev, &db); o->free(dev, &h);
        o->free(dev, &hg); o->free(dev, &qkv); o->free(dev, &att); o->free(dev, &saved); o->free(dev, &dqkv);
    }
    {
        tern_buf logits = buf(TERN_F32, (size_t)BT * Vp, -5, 5), losses = buf(TERN_F32, BT, 0, 0);
        int32_t *t = malloc(BT * sizeof *t);
        for (int i = 0; i < BT; i++) t[i] = (i * 7919) % V;
        tern_buf tg;
        die_on(o->alloc(dev, TERN_I32, BT, &tg), "alloc");
        die_on(o->upload(dev, tg, t), "upload");
        BENCH("cross_entropy 256x50304 (+grad)", 10, 2.0 * BT * Vp * 4, "GB/s",
              die_on(o->cross_entropy(dev, losses, logits, tg, BT, V, Vp, 1.0f / BT), "ce"));
        tern_buf row = buf(TERN_F32, Vp, -5, 5), out1;
        die_on(o->alloc(dev, TERN_I32, 1, &out1), "alloc");
        BENCH("sample argmax 1x50257", 50, 1.0 * Vp * 4, "GB/s",
              die_on(o->sample(dev, out1, row, 1, V, Vp, 0, 0, 1, tern_none()), "sample"));
        BENCH("sample top-k 40 1x50257", 50, 1.0 * Vp * 4, "GB/s",
              die_on(o->sample(dev, out1, row, 1, V, Vp, 0.8f, 40, 1, tern_none()), "sample"));
        BENCH("sample all 1x50257", 50, 1.0 * Vp * 4, "GB/s",
              die_on(o->sample(dev, out1, row, 1, V, Vp, 1.0f, 0, 1, tern_none()), "sample"));
        o->free(dev, &logits); o->free(dev, &losses); o->free(dev, &tg); o->free(dev, &row); o->free(dev, &out1);
        free(t);
    }
    {
        size_t n = 124439808; /* GPT-2 124M parameters */
        if (!filter || strstr("adamw 124M f32", filter)) {
            tern_buf p = buf(TERN_F32, n, -1, 1), g = buf(TERN_F32, n, -1, 1);
            tern_buf m = buf(TERN_F32, n, 0, 0), v = buf(TERN_F32, n, 0, 0);
            tern_adamw h = {3e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1.0f};
            BENCH("adamw 124M f32", 3, 28.0 * (double)n, "GB/s",
                  die_on(o->adamw(dev, p, tern_none(), g, m, v, &h), "adamw"));
            double nrm;
            BENCH("norm2 124M f32", 3, 4.0 * (double)n, "GB/s", die_on(o->norm2(dev, g, &nrm), "norm2"));
            BENCH("fill 124M f32 (zero grads)", 3, 4.0 * (double)n, "GB/s", die_on(o->fill(dev, g, 0), "fill"));
            o->free(dev, &p); o->free(dev, &g); o->free(dev, &m); o->free(dev, &v);
        }
        if (!filter || strstr("adamw 124M bf16 split", filter) || strstr("adamw 124M bf16 shadow", filter)) {
            /* bf16 training's step: bf16 gradients, the f32 master as u16 low halves beside the
             * bf16 weights (26 bytes a parameter), against an f32 master with a bf16 shadow (28) */
            tern_buf lo = buf(TERN_U16, n, 0, 65535), hi = buf(TERN_BF16, n, -1, 1), g = buf(TERN_BF16, n, -1, 1);
            tern_buf m = buf(TERN_F32, n, 0, 0), v = buf(TERN_F32, n, 0, 0);
            tern_adamw h = {3e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1.0f};
            BENCH("adamw 124M bf16 split", 3, 26.0 * (double)n, "GB/s",
                  die_on(o->adamw(dev, lo, hi, g, m, v, &h), "adamw"));
            die_on(o->free(dev, &lo), "free");
            tern_buf p = buf(TERN_F32, n, -1, 1);
            BENCH("adamw 124M bf16 shadow", 3, 28.0 * (double)n, "GB/s",
                  die_on(o->adamw(dev, p, hi, g, m, v, &h), "adamw"));
            o->free(dev, &p); o->free(dev, &hi); o->free(dev, &g); o->free(dev, &m); o->free(dev, &v);
        }
    }
    die_on(o->close(dev), "close");
    return 0;
}
