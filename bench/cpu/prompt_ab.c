/* A 64-token prompt's 48 products (12 layers of GPT-2 124M: q|k|v, the attention projection,
 * fc with GELU, the fc projection; bias on each, the projections adding into the residual as
 * the model does) on two of the cpu handler's kernel tables in turn, in one process, so the
 * host's load falls on both alike:
 *   prompt_ab fp32|bf16|q8 kn|nk [rounds] [isa_a] [isa_b]
 * Weights in f32, bf16 (activations bf16 too, as --precision bf16) or q8_0 ([n, k] only),
 * stored [k, n] (GPT-2's Conv1D) or [n, k] (Llama's nn.Linear); isa_a and isa_b default to
 * portable (whose products are OpenBLAS's sgemm path) and avx2 (tern's gemm_f32 for the B
 * dtypes its table names). Prints each table's best, median and worst step in ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handlers/cpu/kernels.h"
#include "tern/effect.h"
#include "tern/handlers.h"

static const tern_ops *o;
static tern_dev *dev;

static void die_on(tern_error *err, const char *what) {
    if (!err) return;
    fprintf(stderr, "prompt_ab: %s: %s\n", what, tern_error_message(err));
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* n values in [-0.1, 0.1] in dtype dt */
static tern_buf buf(tern_dtype dt, size_t n) {
    tern_buf b, f;
    die_on(o->alloc(dev, dt, n, &b), "alloc");
    float *h = malloc(n * sizeof *h);
    if (!h) die_on(tern_errorf("out of memory"), "alloc");
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        h[i] = (float)(0.2 * (double)(s >> 8) / 16777216.0 - 0.1);
    }
    die_on(o->alloc(dev, TERN_F32, n, &f), "alloc");
    die_on(o->upload(dev, f, h), "upload");
    die_on(o->copy(dev, b, f), "copy");
    die_on(o->free(dev, &f), "free");
    free(h);
    return b;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static cpu_isa isa_named(const char *name) {
    static const char *const names[CPU_ISA_COUNT] = {"portable", "avx2", "avx512", "avx512bf16"};
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (!strcmp(name, names[i])) return (cpu_isa)i;
    fprintf(stderr, "prompt_ab: unknown table '%s' (portable, avx2, avx512, avx512bf16)\n", name);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "fp32") && strcmp(argv[1], "bf16") && strcmp(argv[1], "q8")) ||
        (strcmp(argv[2], "kn") && strcmp(argv[2], "nk"))) {
        fprintf(stderr, "usage: prompt_ab fp32|bf16|q8 kn|nk [rounds] [isa_a] [isa_b]\n");
        return 2;
    }
    bool nk = !strcmp(argv[2], "nk");
    int rounds = argc > 3 ? atoi(argv[3]) : 15;
    if (rounds < 1 || rounds > 1000) rounds = 15;
    cpu_isa isa[2] = {isa_named(argc > 4 ? argv[4] : "portable"), isa_named(argc > 5 ? argv[5] : "avx2")};
    tern_dtype wt = !strcmp(argv[1], "q8") ? TERN_Q8 : !strcmp(argv[1], "bf16") ? TERN_BF16 : TERN_F32;
    tern_dtype at = wt == TERN_BF16 ? TERN_BF16 : TERN_F32;
    if (wt == TERN_Q8 && !nk) {
        fprintf(stderr, "prompt_ab: q8_0 weights are stored [n, k] only\n");
        return 2;
    }
    o = tern_handler_ops("cpu");
    die_on(o->open(NULL, &dev), "open");
    enum { C = 768, M = 64, LAYERS = 12 };
    const int shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}}; /* k, n */
    tern_buf w[LAYERS][4], bias[LAYERS][4];
    tern_buf x = buf(at, (size_t)M * 4 * C), y = buf(at, (size_t)M * 4 * C), res = buf(TERN_F32, (size_t)M * C);
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < 4; i++) {
            w[l][i] = buf(wt, (size_t)shapes[i][0] * shapes[i][1]);
            bias[l][i] = buf(TERN_F32, (size_t)shapes[i][1]);
        }
    double *t[2] = {malloc((size_t)rounds * sizeof(double)), malloc((size_t)rounds * sizeof(double))};
    if (!t[0] || !t[1]) die_on(tern_errorf("out of memory"), "times");
    for (int r = -1; r < rounds; r++) /* a warm-up round, then the measured ones */
        for (int v = 0; v < 2; v++) {
            die_on(cpu_device_force_isa(dev, isa[v]), "table");
            double t0 = now();
            for (int l = 0; l < LAYERS; l++)
                for (int i = 0; i < 4; i++) {
                    tern_matmul mm = {0};
                    mm.m = M;
                    mm.k = shapes[i][0];
                    mm.n = shapes[i][1];
                    mm.trans_b = nk;
                    mm.alpha = 1;
                    mm.beta = i % 2 ? 1.0f : 0.0f; /* the projections update the residual */
                    mm.bias = bias[l][i];
                    mm.epilogue = i == 2 ? TERN_EPILOGUE_GELU : TERN_EPILOGUE_NONE;
                    tern_buf out = i % 2 ? res : tern_view(y, 0, (size_t)M * mm.n);
                    die_on(o->matmul(dev, out, tern_view(x, 0, (size_t)M * mm.k), w[l][i], &mm), "matmul");
                }
            if (r >= 0) t[v][r] = now() - t0;
        }
    for (int v = 0; v < 2; v++) {
        qsort(t[v], (size_t)rounds, sizeof(double), by_value);
        printf("prompt_ab %s %s %-10s best %8.2f  median %8.2f  worst %8.2f ms (%d rounds)\n", argv[1], argv[2],
               v ? (argc > 5 ? argv[5] : "avx2") : (argc > 4 ? argv[4] : "portable"), t[v][0] * 1e3,
               t[v][rounds / 2] * 1e3, t[v][rounds - 1] * 1e3, rounds);
        free(t[v]);
    }
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < 4; i++) o->free(dev, &w[l][i]), o->free(dev, &bias[l][i]);
    o->free(dev, &x), o->free(dev, &y), o->free(dev, &res);
    o->close(dev);
    return 0;
}
