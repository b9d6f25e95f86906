/* Every GPU handler against the cpu handler on the same randomly initialised GPT-2: loss,
 * logits, every gradient, and the parameters after AdamW steps. The configuration is
 * TERN_CROSS_CONFIG (default "tiny", the fixture's size; the H200 checks use "gpt2", 124M),
 * the batch TERN_CROSS_B x TERN_CROSS_T (default 2 x 64).
 *
 * Tolerances, fp32 (both sides f32 with f32 accumulation; they differ in summation order
 * only): loss 1e-4 relative, logits 1e-4 of their norm, gradients 1e-3 of each tensor's norm,
 * parameters after 2 AdamW steps 1e-3 of each tensor's norm: Adam turns a gradient below
 * rounding noise into a full lr step in an arbitrary direction, and small tensors whose
 * true gradient is mostly zero (the key bias, some late projection biases) carry several
 * such elements (measured on the H200 at 124M: 3.3e-4 for h.11.mlp.c_proj.bias; every
 * weight matrix within 1e-5).
 * bf16 on the GPU handler against fp32 on cpu: loss 2e-2 relative, logits 5e-2 of their
 * norm (bf16 keeps 8 bits of mantissa: 0.4% per rounding, over a dozen roundings). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "handler_probe.h"
#include "tern/gpt2.h"
#include "tern/handlers.h"
#include "tern/rng.h"

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

static const char *tensor_names(const tern_gpt2_config *cfg, int i, char *buf, size_t cap) {
    static const char *const layer_kinds[] = {
        "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
        "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
        "mlp.c_proj.weight", "mlp.c_proj.bias"};
    static const char *const globals[] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
    if (i < 4) return globals[i];
    i -= 4;
    if (i >= 12 * cfg->n_layer) return NULL;
    snprintf(buf, cap, "h.%d.%s", i / 12, layer_kinds[i % 12]);
    return buf;
}

static size_t tensor_count(const tern_gpt2_config *cfg, const char *name) {
    size_t C = (size_t)cfg->n_embd;
    if (!strcmp(name, "wte.weight")) return (size_t)cfg->vocab_size * C;
    if (!strcmp(name, "wpe.weight")) return (size_t)cfg->max_seq * C;
    if (strstr(name, "c_attn.weight")) return C * 3 * C;
    if (strstr(name, "c_attn.bias")) return 3 * C;
    if (strstr(name, "attn.c_proj.weight")) return C * C;
    if (strstr(name, "c_fc.weight")) return C * 4 * C;
    if (strstr(name, "c_fc.bias")) return 4 * C;
    if (strstr(name, "mlp.c_proj.weight")) return 4 * C * C;
    return C;
}

typedef tern_error *(*reader)(tern_gpt2 *, const char *, float *, size_t);

/* The worst relative error (to the cpu tensor's norm) over every parameter tensor. */
static double compare_all(tern_gpt2 *ref, tern_gpt2 *m, reader read, double tol, const char *what) {
    const tern_gpt2_config *cfg = tern_gpt2_get_config(ref);
    double worst = 0;
    char buf[96];
    const char *name;
    for (int i = 0; (name = tensor_names(cfg, i, buf, sizeof buf)); i++) {
        size_t n = tensor_count(cfg, name);
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        CHECK_OK(read(ref, name, a, n));
        CHECK_OK(read(m, name, b, n));
        double e = check_rel_error(b, a, n);
        CHECKF(e <= tol, "%s of %s differ by %.3g of the norm", what, name, e);
        if (e > worst) worst = e;
        free(a), free(b);
    }
    return worst;
}

static void compare(const char *handler, const tern_gpt2_config *cfg, tern_precision precision) {
    bool bf16 = precision == TERN_PRECISION_BF16;
    int B = env_int("TERN_CROSS_B", 2), T = env_int("TERN_CROSS_T", 64), BT = B * T;
    if (T > cfg->max_seq) T = cfg->max_seq, BT = B * T;
    tern_gpt2 *ref = NULL, *m = NULL;
    CHECK_OK(tern_gpt2_init("cpu", cfg, 42, TERN_PRECISION_FP32, &ref));
    CHECK_OK(tern_gpt2_init(handler, cfg, 42, precision, &m));
    if (!ref || !m) goto done;
    int32_t *x = malloc((size_t)(BT + 1) * sizeof *x);
    for (int i = 0; i <= BT; i++) x[i] = (int32_t)(tern_random_bits(9, (uint32_t)i) % (uint32_t)cfg->vocab_size);

    float loss_ref = 0, loss = 0;
    CHECK_OK(tern_gpt2_forward(ref, x, x + 1, B, T, &loss_ref));
    CHECK_OK(tern_gpt2_forward(m, x, x + 1, B, T, &loss));
    double tol = bf16 ? 2e-2 : 1e-4;
    CHECKF(fabs(loss - loss_ref) <= tol * loss_ref, "%s loss %.6f, cpu %.6f", handler, loss, loss_ref);
    size_t V = (size_t)cfg->vocab_size;
    float *la = malloc(2 * V * sizeof *la), *lb = malloc(2 * V * sizeof *lb);
    CHECK_OK(tern_gpt2_read_logits(ref, BT - 2, 2, la));
    CHECK_OK(tern_gpt2_read_logits(m, BT - 2, 2, lb));
    double e = check_rel_error(lb, la, 2 * V);
    CHECKF(e <= (bf16 ? 5e-2 : 1e-4), "%s logits differ by %.3g of the norm", handler, e);
    printf("  %s %s: loss %.6f (cpu %.6f), logits %.2g\n", handler, bf16 ? "bf16" : "fp32", loss,
           loss_ref, e);

    if (!bf16) {
        tern_gpt2_adamw hp = {.lr = 1e-5f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                              .weight_decay = 0.1f, .clip = 1.0f, .decay_all = true};
        for (int step = 0; step < 2; step++) {
            CHECK_OK(tern_gpt2_zero_grad(ref));
            CHECK_OK(tern_gpt2_zero_grad(m));
            CHECK_OK(tern_gpt2_forward_backward(ref, x, x + 1, B, T, 1.0f, &loss_ref));
            CHECK_OK(tern_gpt2_forward_backward(m, x, x + 1, B, T, 1.0f, &loss));
            if (step == 0) {
                double g = compare_all(ref, m, tern_gpt2_read_grad, 1e-3, "gradients");
                printf("  %s: gradients within %.2g of their norms\n", handler, g);
            }
            CHECK_OK(tern_gpt2_update(ref, &hp, NULL));
            CHECK_OK(tern_gpt2_update(m, &hp, NULL));
        }
        double p = compare_all(ref, m, tern_gpt2_read_param, 1e-3, "parameters after AdamW");
        printf("  %s: parameters after 2 AdamW steps within %.2g of their norms\n", handler, p);
    }
    free(la), free(lb), free(x);
done:
    tern_gpt2_free(ref);
    tern_gpt2_free(m);
}

int main(void) {
    const char *config = getenv("TERN_CROSS_CONFIG");
    tern_gpt2_config cfg;
    CHECK_OK(tern_gpt2_config_named(config && *config ? config : "tiny", &cfg));
    size_t n;
    const char *const *handlers = tern_handler_names(&n);
    const char *only = getenv("TERN_TEST_HANDLER");
    int compared = 0;
    for (size_t h = 0; h < n; h++) {
        if (!strcmp(handlers[h], "cpu") || (only && strcmp(only, handlers[h]))) continue;
        if (!handler_has_device(tern_handler_ops(handlers[h]))) continue;
        printf("%s against cpu, %d layers, %d channels:\n", handlers[h], cfg.n_layer, cfg.n_embd);
        compare(handlers[h], &cfg, TERN_PRECISION_FP32);
        compare(handlers[h], &cfg, TERN_PRECISION_BF16);
        compared++;
    }
    if (!compared) printf("no GPU handler with a device here: nothing compared\n");
    return check_summary("cross-handler");
}
