/* Every GPU handler against the cpu handler on the same randomly initialised Llama-family
 * model: loss, logits, every parameter's gradient, and the parameters after AdamW steps. The
 * configuration is TERN_CROSS_CONFIG (default "tiny", tern_llama_config_named's; the H200 check uses
 * "smollm2-135m", the shape issue 22 names), the batch TERN_CROSS_B x TERN_CROSS_T (default
 * 2 x 64).
 *
 * Tolerances as tests/gpt2/test_cross_handler.c's, for the same reasons: fp32 on both sides
 * differs in summation order only (loss 1e-4 relative, logits 1e-4 of their norm, gradients
 * 1e-3 of each tensor's norm, parameters after 2 AdamW steps 1e-3 of each tensor's norm:
 * Adam turns gradient elements below rounding noise into full steps); bf16 on the GPU
 * handler against fp32 on cpu: loss 2e-2 relative, logits 5e-2 of their norm. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "handler_probe.h"
#include "tern/handlers.h"
#include "tern/llama.h"
#include "tern/rng.h"

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

/* The i-th parameter tensor's Hugging Face name and element count; false past the last. */
static bool tensor_at(const tern_llama_config *c, int i, char *name, size_t cap, size_t *count) {
    size_t C = (size_t)c->hidden, I = (size_t)c->intermediate, hs = (size_t)c->head_dim;
    size_t q = (size_t)c->n_head * hs, kv = (size_t)c->n_kv_head * hs, V = (size_t)c->vocab_size;
    int globals = c->tie_word_embeddings ? 2 : 3; /* tied: no lm_head */
    if (i == 0) return snprintf(name, cap, "model.embed_tokens.weight"), *count = V * C, true;
    if (i == 1) return snprintf(name, cap, "model.norm.weight"), *count = C, true;
    if (i < globals) return snprintf(name, cap, "lm_head.weight"), *count = V * C, true;
    i -= globals;
    enum { PER_LAYER = 16 };
    if (i >= PER_LAYER * c->n_layer) return false;
    int l = i / PER_LAYER, k = i % PER_LAYER;
    static const char *const kinds[PER_LAYER] = {
        "input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
        "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
        "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
        "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
        "self_attn.o_proj.bias", "mlp.gate_proj.bias", "mlp.up_proj.bias", "mlp.down_proj.bias"};
    size_t counts[PER_LAYER] = {C, C, q * C, kv * C, kv * C, C * q, I * C, I * C, C * I,
                                q, kv, kv, C, I, I, C};
    bool present = k < 9 || (k < 12 && c->qkv_bias) || (k == 12 && c->o_bias) || (k > 12 && c->mlp_bias);
    snprintf(name, cap, "model.layers.%d.%s", l, kinds[k]);
    *count = present ? counts[k] : 0; /* 0: this config has no such tensor */
    return true;
}

typedef tern_error *(*reader)(tern_llama *, const char *, float *, size_t);

/* The worst relative error (to the cpu tensor's norm) over every parameter tensor. */
static double compare_all(tern_llama *ref, tern_llama *m, reader read, double tol, const char *what) {
    const tern_llama_config *cfg = tern_llama_get_config(ref);
    double worst = 0;
    char name[128];
    size_t n;
    for (int i = 0; tensor_at(cfg, i, name, sizeof name, &n); i++) {
        if (!n) continue;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        CHECK(a && b);
        if (a && b) {
            CHECK_OK(read(ref, name, a, n));
            CHECK_OK(read(m, name, b, n));
            double e = check_rel_error(b, a, n);
            CHECKF(e <= tol, "%s of %s differ by %.3g of the norm", what, name, e);
            if (e > worst) worst = e;
        }
        free(a), free(b);
    }
    return worst;
}

static void compare(const char *handler, const tern_llama_config *cfg, tern_precision precision) {
    bool bf16 = precision == TERN_PRECISION_BF16;
    int B = env_int("TERN_CROSS_B", 2), T = env_int("TERN_CROSS_T", 64);
    if (T > cfg->max_seq) T = cfg->max_seq;
    int BT = B * T;
    tern_llama *ref = NULL, *m = NULL;
    CHECK_OK(tern_llama_init("cpu", cfg, 42, TERN_PRECISION_FP32, &ref));
    CHECK_OK(tern_llama_init(handler, cfg, 42, precision, &m));
    size_t V = (size_t)cfg->vocab_size;
    int32_t *x = malloc((size_t)(BT + 1) * sizeof *x);
    float *la = malloc(2 * V * sizeof *la), *lb = malloc(2 * V * sizeof *lb);
    if (!ref || !m || !x || !la || !lb) goto done;
    for (int i = 0; i <= BT; i++) x[i] = (int32_t)(tern_random_bits(9, (uint32_t)i) % (uint32_t)V);

    float loss_ref = 0, loss = 0;
    CHECK_OK(tern_llama_forward(ref, x, x + 1, B, T, &loss_ref));
    CHECK_OK(tern_llama_forward(m, x, x + 1, B, T, &loss));
    double tol = bf16 ? 2e-2 : 1e-4;
    CHECKF(fabs(loss - loss_ref) <= tol * loss_ref, "%s loss %.6f, cpu %.6f", handler, loss, loss_ref);
    CHECK_OK(tern_llama_read_logits(ref, BT - 2, 2, la));
    CHECK_OK(tern_llama_read_logits(m, BT - 2, 2, lb));
    double e = check_rel_error(lb, la, 2 * V);
    CHECKF(e <= (bf16 ? 5e-2 : 1e-4), "%s logits differ by %.3g of the norm", handler, e);
    printf("  %s %s: loss %.6f (cpu %.6f), logits %.2g\n", handler, bf16 ? "bf16" : "fp32", loss,
           loss_ref, e);

    if (!bf16) {
        tern_gpt2_adamw hp = {.lr = 1e-5f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                              .weight_decay = 0.1f, .clip = 1.0f, .decay_all = true};
        for (int step = 0; step < 2; step++) {
            CHECK_OK(tern_llama_zero_grad(ref));
            CHECK_OK(tern_llama_zero_grad(m));
            CHECK_OK(tern_llama_forward_backward(ref, x, x + 1, B, T, 1.0f, &loss_ref));
            CHECK_OK(tern_llama_forward_backward(m, x, x + 1, B, T, 1.0f, &loss));
            if (step == 0) {
                double g = compare_all(ref, m, tern_llama_read_grad, 1e-3, "gradients");
                printf("  %s: gradients within %.2g of their norms\n", handler, g);
            }
            CHECK_OK(tern_llama_update(ref, &hp, NULL));
            CHECK_OK(tern_llama_update(m, &hp, NULL));
        }
        double p = compare_all(ref, m, tern_llama_read_param, 1e-3, "parameters after AdamW");
        printf("  %s: parameters after 2 AdamW steps within %.2g of their norms\n", handler, p);
    }
done:
    free(la), free(lb), free(x);
    tern_llama_free(ref);
    tern_llama_free(m);
}

int main(void) {
    const char *config = getenv("TERN_CROSS_CONFIG");
    tern_llama_config cfg;
    tern_error *err = tern_llama_config_named(config && *config ? config : "tiny", &cfg);
    bool named = err == NULL;
    CHECK_OK(err);
    if (!named) return check_summary("llama cross-handler");
    size_t n;
    const char *const *handlers = tern_handler_names(&n);
    const char *only = getenv("TERN_TEST_HANDLER");
    int compared = 0;
    for (size_t h = 0; h < n; h++) {
        if (!strcmp(handlers[h], "cpu") || (only && strcmp(only, handlers[h]))) continue;
        if (!handler_has_device(tern_handler_ops(handlers[h]))) continue;
        printf("%s against cpu, %d layers, %d channels, %d heads (%d key/value):\n", handlers[h],
               cfg.n_layer, cfg.hidden, cfg.n_head, cfg.n_kv_head);
        compare(handlers[h], &cfg, TERN_PRECISION_FP32);
        compare(handlers[h], &cfg, TERN_PRECISION_BF16);
        compared++;
    }
    if (!compared) printf("no GPU handler with a device here: nothing compared\n");
    return check_summary("llama cross-handler");
}
