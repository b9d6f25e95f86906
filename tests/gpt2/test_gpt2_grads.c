/* GPT-2's gradients around zero_grad, on every built handler with a device (TERN_TEST_HANDLER
 * picks one). zero_grad clears only what the next backward pass adds into (wpe's gradient):
 * that pass writes every other gradient instead of adding to it (models/gpt2/state.c). These
 * check what a user sees:
 *  - the gradient norm update reports is the norm of the gradients read_grad gives: nothing
 *    outside the tensors (the gaps between them, the vocabulary's padding rows) is non-zero;
 *  - right after zero_grad every gradient reads as zero and update sees a zero norm, though
 *    the step before left gradients;
 *  - accumulation: zero_grad, then passes a and b, gives the sum of a's and b's gradients on
 *    their own, and the same again on the next step (on cuda, replayed graphs);
 *  - a pass over fewer positions than the one before: wpe's rows past them are zero.
 * Two small configurations: C = 40 (tensors of 40 elements leave gaps in the 64-aligned
 * flat layout; a GPU layer norm takes its loop path) and C = 64 (no gaps; the register
 * path). update runs with lr 0, so the parameters, and the passes' gradients, stay as they
 * are. Tolerances: a + b against the accumulated sum, 1e-5 of each tensor's norm in fp32 (two
 * summation orders), 2e-2 in bf16 (the accumulated gradient is rounded after the sum); a
 * step against the same step repeated, 1e-6 (the same operations; every handler is
 * deterministic); the norms, 1e-5 relative (norm2 sums in double, so does the host). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "handler_probe.h"
#include "tern/gpt2.h"
#include "tern/handlers.h"
#include "tern/rng.h"

#define B 2
#define T 24

/* Parameter i's name ("wte.weight", ...), or NULL past the last; its length in *count. */
static const char *param(const tern_gpt2_config *cfg, int i, char *buf, size_t cap, size_t *count) {
    static const char *const layer_kinds[] = {
        "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
        "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
        "mlp.c_proj.weight", "mlp.c_proj.bias"};
    static const int layer_sizes[] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 4, 1}; /* times C (matrices: C^2) */
    size_t C = (size_t)cfg->n_embd;
    if (i == 0) return *count = (size_t)cfg->vocab_size * C, "wte.weight";
    if (i == 1) return *count = (size_t)cfg->max_seq * C, "wpe.weight";
    if (i == 2) return *count = C, "ln_f.weight";
    if (i == 3) return *count = C, "ln_f.bias";
    i -= 4;
    if (i >= 12 * cfg->n_layer) return NULL;
    int k = i % 12;
    bool matrix = strstr(layer_kinds[k], ".weight") && strncmp(layer_kinds[k], "ln_", 3) != 0;
    *count = (size_t)layer_sizes[k] * C * (matrix ? C : 1);
    snprintf(buf, cap, "h.%d.%s", i / 12, layer_kinds[k]);
    return buf;
}

/* Every gradient, concatenated ([*total]). */
static float *read_grads(tern_gpt2 *m, size_t *total) {
    const tern_gpt2_config *cfg = tern_gpt2_get_config(m);
    char buf[96];
    size_t n, all = 0;
    for (int i = 0; param(cfg, i, buf, sizeof buf, &n); i++) all += n;
    float *g = malloc(all * sizeof *g);
    size_t at = 0;
    const char *name;
    for (int i = 0; g && (name = param(cfg, i, buf, sizeof buf, &n)); i++) {
        CHECK_OK(tern_gpt2_read_grad(m, name, g + at, n));
        at += n;
    }
    *total = all;
    return g;
}

/* The worst norm-wise relative difference of got from want over the tensors; its tensor's
 * name into worst_name [96]. */
static double worst_tensor_error(const tern_gpt2_config *cfg, const float *got, const float *want,
                                 char *worst_name) {
    char buf[96];
    size_t n, at = 0;
    double worst = 0;
    const char *name;
    strcpy(worst_name, "-");
    for (int i = 0; (name = param(cfg, i, buf, sizeof buf, &n)); i++) {
        double e = check_rel_error(got + at, want + at, n);
        if (e > worst) {
            worst = e;
            snprintf(worst_name, 96, "%s", name);
        }
        at += n;
    }
    return worst;
}

static double host_norm(const float *g, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    return sqrt(s);
}

static void check_config(const char *handler, const tern_gpt2_config *cfg, tern_precision precision) {
    bool bf16 = precision == TERN_PRECISION_BF16;
    tern_gpt2 *m = NULL;
    CHECK_OK(tern_gpt2_init(handler, cfg, 5, precision, &m));
    if (!m) return;
    int32_t x[3][B * T + 1];
    for (int p = 0; p < 3; p++)
        for (int i = 0; i <= B * T; i++)
            x[p][i] = (int32_t)(tern_random_bits(11 + (uint64_t)p, (uint32_t)i) % (uint32_t)cfg->vocab_size);
    /* lr 0: AdamW leaves the parameters as they are */
    tern_gpt2_adamw keep = {.lr = 0, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                            .clip = 0, .decay_all = true};
    float loss, norm = -1;
    size_t total = 0;
    char where[96];

    /* pass a: the norm update sees is that of the tensors' gradients */
    CHECK_OK(tern_gpt2_zero_grad(m));
    CHECK_OK(tern_gpt2_forward_backward(m, x[0], x[0] + 1, B, T, 1.0f, &loss));
    float *ga = read_grads(m, &total);
    CHECK_OK(tern_gpt2_update(m, &keep, &norm));
    double want = host_norm(ga, total);
    CHECKF(want > 0 && fabs(norm - want) <= 1e-5 * want, "%s: gradient norm %.9g, the tensors' %.9g", handler,
           norm, want);

    /* right after zero_grad: zeros, as read_grad and update see them */
    CHECK_OK(tern_gpt2_zero_grad(m));
    float *gz = read_grads(m, &total);
    size_t nonzero = 0;
    for (size_t i = 0; gz && i < total; i++) nonzero += gz[i] != 0.0f;
    CHECKF(nonzero == 0, "%s: %zu gradient elements are not zero after zero_grad", handler, nonzero);
    CHECK_OK(tern_gpt2_zero_grad(m));
    CHECK_OK(tern_gpt2_update(m, &keep, &norm));
    CHECKF(norm == 0.0f, "%s: gradient norm %g right after zero_grad", handler, norm);

    /* pass b on its own, then a and b accumulated, twice */
    CHECK_OK(tern_gpt2_zero_grad(m));
    CHECK_OK(tern_gpt2_forward_backward(m, x[1], x[1] + 1, B, T, 1.0f, &loss));
    float *gb = read_grads(m, &total);
    float *gab[2];
    for (int step = 0; step < 2; step++) {
        CHECK_OK(tern_gpt2_zero_grad(m));
        CHECK_OK(tern_gpt2_forward_backward(m, x[0], x[0] + 1, B, T, 1.0f, &loss));
        CHECK_OK(tern_gpt2_forward_backward(m, x[1], x[1] + 1, B, T, 1.0f, &loss));
        gab[step] = read_grads(m, &total);
        CHECK_OK(tern_gpt2_update(m, &keep, &norm));
        want = host_norm(gab[step], total);
        CHECKF(fabs(norm - want) <= 1e-5 * want, "%s: accumulated gradient norm %.9g, the tensors' %.9g",
               handler, norm, want);
    }
    if (ga && gb && gab[0] && gab[1]) {
        for (size_t i = 0; i < total; i++) ga[i] += gb[i];
        double e = worst_tensor_error(cfg, gab[0], ga, where);
        CHECKF(e <= (bf16 ? 2e-2 : 1e-5), "%s: accumulated gradients off the sum of the passes' by %.3g (%s)",
               handler, e, where);
        double r = worst_tensor_error(cfg, gab[1], gab[0], where);
        CHECKF(r <= 1e-6, "%s: the second accumulating step's gradients differ from the first's by %.3g (%s)",
               handler, r, where);
        printf("  %s %s C=%d: accumulated within %.2g of the sum, repeated within %.2g\n", handler,
               bf16 ? "bf16" : "fp32", cfg->n_embd, e, r);
    }

    /* fewer positions than the pass before: wpe's gradient rows from T/2 on are zero */
    CHECK_OK(tern_gpt2_zero_grad(m));
    CHECK_OK(tern_gpt2_forward_backward(m, x[2], x[2] + 1, B, T / 2, 1.0f, &loss));
    size_t nwpe = (size_t)cfg->max_seq * cfg->n_embd;
    float *wpe = malloc(nwpe * sizeof *wpe);
    CHECK_OK(tern_gpt2_read_grad(m, "wpe.weight", wpe, nwpe));
    nonzero = 0;
    for (size_t i = (size_t)(T / 2) * cfg->n_embd; i < nwpe; i++) nonzero += wpe[i] != 0.0f;
    CHECKF(nonzero == 0, "%s: %zu elements of wpe's gradient past position %d are not zero", handler, nonzero,
           T / 2);
    CHECKF(host_norm(wpe, (size_t)(T / 2) * cfg->n_embd) > 0, "%s: wpe's gradient is zero", handler);

    free(ga), free(gz), free(gb), free(gab[0]), free(gab[1]), free(wpe);
    tern_gpt2_free(m);
}

int main(void) {
    /* C = 40: gaps in the flat layout; C = 64: none */
    const tern_gpt2_config cfgs[2] = {{.vocab_size = 300, .max_seq = 48, .n_layer = 2, .n_head = 4, .n_embd = 40,
                                       .ln_eps = 1e-5f},
                                      {.vocab_size = 300, .max_seq = 48, .n_layer = 2, .n_head = 4, .n_embd = 64,
                                       .ln_eps = 1e-5f}};
    size_t n;
    const char *const *handlers = tern_handler_names(&n);
    const char *only = getenv("TERN_TEST_HANDLER");
    for (size_t h = 0; h < n; h++) {
        if (only && *only && strcmp(only, handlers[h])) continue;
        if (!handler_has_device(tern_handler_ops(handlers[h]))) continue;
        printf("%s:\n", handlers[h]);
        for (int c = 0; c < 2; c++) {
            check_config(handlers[h], &cfgs[c], TERN_PRECISION_FP32);
            check_config(handlers[h], &cfgs[c], TERN_PRECISION_BF16);
        }
    }
    return check_summary("gpt2 gradients around zero_grad");
}
