/* GPT-2 on every built handler (or TERN_TEST_HANDLER) against the gpt2-tiny-a fixture:
 * values computed independently by PyTorch / Hugging Face transformers in float64.
 *
 * Tolerances (fp32), and why:
 *  - loss, per-position losses, logits: 1e-4 relative (the fixture README's bound for a float32
 *    implementation; f32 rounding over a 2-layer model lands near 1e-6).
 *  - gradients: 1e-3 of each tensor's norm (the README's bound; gradients pass through more
 *    f32 operations, and small tensors' norms are dominated by few elements).
 *  - parameters after three AdamW steps: each element within 1e-5 (1% of one step of lr 1e-3),
 *    except elements whose reference gradient is below 1e-3 of their tensor's RMS gradient:
 *    Adam's first step moves an element by lr * sign(g) whatever |g|, so where the true
 *    gradient is below float32's rounding noise (the key bias's gradient is exactly zero in
 *    exact arithmetic: softmax ignores a constant added to every score) the direction is
 *    arbitrary. Those elements must still lie within 3 lr of the reference (3 steps).
 *  - greedy continuations: identical ids (the fixture's smallest top-1/top-2 margin, 0.0077,
 *    is far above f32 logit error).
 * The interp handler (the GPU core on the DSL's interpreter) is held to the same fp32 bounds:
 * it runs the GPU handlers' kernels in f32 with their own summation orders, as opencl does.
 * With --precision bf16 (TERN_TEST_PRECISION=bf16) weights and activations are rounded to
 * bf16 (8 bits of mantissa, 0.4% relative), so the bounds are 3e-2 for losses and logits,
 * 5e-2 of the norm for gradients; greedy ids and AdamW are not checked in bf16 (near-ties
 * can flip and Adam amplifies gradient noise).
 *
 * TERN_TEST_PART picks a share of the checks ("forward": both layouts' forward; "decode":
 * the KV cache and greedy; "inference": those two; "training": gradients, accumulation,
 * AdamW), so that a slow handler's run can be several tests; unset, every check runs.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fixture_refs.h"
#include "handler_probe.h"
#include "tern/file.h"
#include "tern/gpt2.h"
#include "tern/handlers.h"
#include "tern/safetensors.h"

static char fixture_dir[1024];
static tern_safetensors *expected;
static cJSON *expected_json;
static bool bf16;

/* Fixture tensors converted to f32, kept until the end of the test. */
static float *ref_buffers[512];
static int ref_used;

static const float *ref(const char *name, size_t *count) {
    const tern_tensor_info *t = tern_safetensors_find(expected, name);
    if (!t) {
        fprintf(stderr, "fixture lacks %s\n", name);
        exit(1);
    }
    float *buf = malloc(t->count * sizeof *buf);
    if (!buf || ref_used == 512 || tern_tensor_convert(t, TERN_F32, buf)) exit(1);
    ref_buffers[ref_used++] = buf;
    if (count) *count = t->count;
    return buf;
}

static void ref_ids(const char *name, int32_t *out, size_t n) {
    const tern_tensor_info *t = tern_safetensors_find(expected, name);
    CHECK(t && t->count == n);
    if (t) CHECK_OK(tern_tensor_convert(t, TERN_I32, out));
}

static const char *param_names[] = {
    "wpe.weight", "ln_f.weight", "ln_f.bias",
    "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias",
    "h.0.attn.c_proj.weight", "h.0.attn.c_proj.bias", "h.0.ln_2.weight", "h.0.ln_2.bias",
    "h.0.mlp.c_fc.weight", "h.0.mlp.c_fc.bias", "h.0.mlp.c_proj.weight", "h.0.mlp.c_proj.bias",
    "h.1.ln_1.weight", "h.1.ln_1.bias", "h.1.attn.c_attn.weight", "h.1.attn.c_attn.bias",
    "h.1.attn.c_proj.weight", "h.1.attn.c_proj.bias", "h.1.ln_2.weight", "h.1.ln_2.bias",
    "h.1.mlp.c_fc.weight", "h.1.mlp.c_fc.bias", "h.1.mlp.c_proj.weight", "h.1.mlp.c_proj.bias",
};
#define N_PARAM_NAMES (sizeof param_names / sizeof param_names[0])

/* Compares a model tensor (read by `read`) with the fixture tensor `prefix``name`; wte is
 * compared on the fixture's listed rows only. */
typedef tern_error *(*reader)(tern_gpt2 *, const char *, float *, size_t);

static double compare_tensor(tern_gpt2 *m, reader read, const char *prefix, const char *name) {
    char key[160];
    size_t n;
    int C = tern_gpt2_get_config(m)->n_embd;
    if (!strcmp(name, "wte.weight")) {
        snprintf(key, sizeof key, "%swte.weight.rows", prefix);
        const float *want = ref(key, &n);
        size_t rows = n / C, V = (size_t)tern_gpt2_get_config(m)->vocab_size;
        int32_t *ids = malloc(rows * sizeof *ids);
        float *all = malloc(V * C * sizeof *all), *got = malloc(n * sizeof *got);
        ref_ids("wte_rows", ids, rows);
        CHECK_OK(read(m, "wte.weight", all, V * C));
        for (size_t r = 0; r < rows; r++) memcpy(got + r * C, all + (size_t)ids[r] * C, C * sizeof *got);
        double e = check_rel_error(got, want, n);
        free(ids), free(all), free(got);
        return e;
    }
    snprintf(key, sizeof key, "%s%s", prefix, name);
    const float *want = ref(key, &n);
    float *got = malloc(n * sizeof *got);
    CHECK_OK(read(m, name, got, n));
    double e = check_rel_error(got, want, n);
    free(got);
    return e;
}

/* The model in `dir` (config.json and model.safetensors), which is then removed. */
static tern_gpt2 *load_and_remove(const char *handler, const char *dir) {
    tern_gpt2 *m = NULL;
    CHECK_OK(tern_gpt2_load(handler, dir, bf16 ? TERN_PRECISION_BF16 : TERN_PRECISION_FP32, &m));
    char path[1200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
    return m;
}

static tern_gpt2 *load(const char *handler, const char *weights_file) {
    /* A model directory: the fixture's config.json and the chosen weights file. */
    char dir[] = "/tmp/tern-fixture-XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    char src[1200], dst[1200];
    snprintf(src, sizeof src, "%s/config.json", fixture_dir);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    if (symlink(src, dst)) return NULL;
    snprintf(src, sizeof src, "%s/%s", fixture_dir, weights_file);
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    if (symlink(src, dst)) return NULL;
    return load_and_remove(handler, dir);
}

static void test_forward(tern_gpt2 *m, const char *layout) {
    int B = 4, T = 64, V = tern_gpt2_get_config(m)->vocab_size;
    int32_t x[256], y[256];
    ref_ids("inputs", x, 256);
    ref_ids("targets", y, 256);
    float loss = 0;
    CHECK_OK(tern_gpt2_forward(m, x, y, B, T, &loss));
    double want = cJSON_GetObjectItem(cJSON_GetObjectItem(expected_json, "forward"), "loss")->valuedouble;
    double tol = bf16 ? 3e-2 : 1e-4;
    CHECKF(fabs(loss - want) <= tol * want, "%s: loss %.8f, expected %.8f", layout, loss, want);

    float losses[256];
    CHECK_OK(tern_gpt2_read_losses(m, losses));
    double e = check_max_rel(losses, ref("losses", NULL), 256, 1.0);
    CHECKF(e <= tol, "%s: per-position losses off by %.3g", layout, e);

    float *logits = malloc(4 * (size_t)V * sizeof *logits);
    CHECK_OK(tern_gpt2_read_logits(m, 60, 4, logits)); /* row 0, positions 60..63 */
    e = check_rel_error(logits, ref("logits_b0_last4", NULL), 4 * (size_t)V);
    CHECKF(e <= tol, "%s: logits of row 0 off by %.3g", layout, e);
    CHECK_OK(tern_gpt2_read_logits(m, 3 * 64, 4, logits)); /* row 3, positions 0..3 */
    e = check_rel_error(logits, ref("logits_blast_first4", NULL), 4 * (size_t)V);
    CHECKF(e <= tol, "%s: logits of row 3 off by %.3g", layout, e);
    printf("  %s: loss %.6f (expected %.6f), logits rel. error %.2g\n", layout, loss, want, e);
    free(logits);
}

static void test_gradients(tern_gpt2 *m) {
    int32_t x[256], y[256];
    ref_ids("inputs", x, 256);
    ref_ids("targets", y, 256);
    float loss;
    CHECK_OK(tern_gpt2_zero_grad(m));
    CHECK_OK(tern_gpt2_forward_backward(m, x, y, 4, 64, 1.0f, &loss));
    double tol = bf16 ? 5e-2 : 1e-3, worst = 0;
    const char *worst_name = "";
    for (size_t i = 0; i <= N_PARAM_NAMES; i++) {
        const char *name = i < N_PARAM_NAMES ? param_names[i] : "wte.weight";
        double e = compare_tensor(m, tern_gpt2_read_grad, "grad.", name);
        CHECKF(e <= tol, "gradient of %s off by %.3g of its norm", name, e);
        if (e > worst) worst = e, worst_name = name;
    }
    printf("  gradients: worst %.2g of the norm (%s)\n", worst, worst_name);
}

/* err is a refusal whose message names `reason`; freed. */
static void expect_refusal(tern_error *err, const char *reason, const char *what) {
    CHECKF(err != NULL && strstr(tern_error_message(err), reason) != NULL, "%s: %s", what,
           err ? tern_error_message(err) : "accepted");
    tern_error_free(err);
}

/* Token ids from outside are refused before any handler sees them, each with its reason
 * (models/common/batch_check.c): an id or a target outside the vocabulary, a sequence past
 * the context, an empty batch. x and y hold 256 valid ids, put back as they were. */
static void check_batch_refusals(tern_gpt2 *m, int32_t *x, int32_t *y) {
    const tern_gpt2_config *cfg = tern_gpt2_get_config(m);
    float loss = 0;
    int32_t x7 = x[7], y9 = y[9];
    x[7] = cfg->vocab_size;
    expect_refusal(tern_gpt2_forward(m, x, y, 4, 64, &loss), "outside the vocabulary", "token = vocab_size");
    x[7] = x7;
    y[9] = -1;
    expect_refusal(tern_gpt2_forward(m, x, y, 4, 64, &loss), "outside the vocabulary", "target -1");
    y[9] = y9;
    expect_refusal(tern_gpt2_forward(m, x, y, 1, cfg->max_seq + 1, &loss), "exceeds the model's context",
                   "T past the context");
    expect_refusal(tern_gpt2_forward(m, x, y, 0, 64, &loss), "must be positive", "B = 0");
}

/* The memory settings (tern_gpt2_set_memory) change where values live, not the maths: with
 * the logits and the loss's gradient in chunks of 48 rows (five chunks and a part one of the
 * 256 rows) and the GELU and layer norms recomputed in the backward pass, the gradients still match the
 * fixture within test_gradients' tolerances. A pass with targets then keeps only the last
 * chunk's logits and says so; a pass without targets keeps them all. */
static void test_memory_settings(tern_gpt2 *m) {
    tern_gpt2_memory small = {.logit_rows = 48, .recompute_gelu = true, .recompute_layernorm = true};
    tern_gpt2_memory none = {0};
    CHECK_OK(tern_gpt2_set_memory(m, &small));
    printf("  logits in chunks of 48 rows, GELU and layer norms recomputed:\n");
    test_gradients(m);
    int32_t x[256], y[256];
    ref_ids("inputs", x, 256);
    ref_ids("targets", y, 256);
    float loss = 0, *logits = malloc(4 * (size_t)tern_gpt2_get_config(m)->vocab_size * sizeof *logits);
    CHECK(logits != NULL);
    CHECK_OK(tern_gpt2_forward(m, x, y, 4, 64, &loss));
    double want = cJSON_GetObjectItem(cJSON_GetObjectItem(expected_json, "forward"), "loss")->valuedouble;
    CHECKF(fabs(loss - want) <= (bf16 ? 3e-2 : 1e-4) * want, "chunked: loss %.8f, expected %.8f", loss, want);
    tern_error *err = tern_gpt2_read_logits(m, 60, 4, logits);
    CHECKF(err != NULL, "chunked: rows 60..63 read back although the pass kept rows 240..255 only");
    tern_error_free(err);
    free(logits);
    tern_gpt2_memory bad = {.logit_rows = -1};
    err = tern_gpt2_set_memory(m, &bad);
    CHECKF(err != NULL, "set_memory took logit_rows -1");
    tern_error_free(err);
    CHECK_OK(tern_gpt2_set_memory(m, &none));
    check_batch_refusals(m, x, y);
}

/* Gradients accumulate: two passes without zero_grad between them give the sum of each
 * pass's gradients on its own (a pass right after zero_grad writes its products' gradients
 * rather than adding them: models/gpt2/forward.c). Two halves of the fixture's batch, every
 * parameter. Tolerance: fp32 1e-5 of the norm (two f32 summation orders); bf16 2e-2 (the
 * gradients are held in bf16: the accumulated one is rounded after the sum, the reference
 * sum adds two rounded halves, 2^-8 relative each). */
/* Every parameter's gradient, concatenated ([total]), and each one's length (n[i]). */
static float *read_all_grads(tern_gpt2 *m, size_t *n, size_t total) {
    float *all = malloc(total * sizeof *all);
    size_t at = 0;
    for (size_t i = 0; i <= N_PARAM_NAMES && all; i++) {
        CHECK_OK(tern_gpt2_read_grad(m, i < N_PARAM_NAMES ? param_names[i] : "wte.weight", all + at, n[i]));
        at += n[i];
    }
    return all;
}

/* Each parameter's length (n[i], wte's last) and their total. */
static size_t grad_lengths(tern_gpt2 *m, size_t n[N_PARAM_NAMES + 1]) {
    const tern_gpt2_config *cfg = tern_gpt2_get_config(m);
    size_t total = 0;
    for (size_t i = 0; i <= N_PARAM_NAMES; i++) {
        char key[160];
        snprintf(key, sizeof key, "grad.%s", i < N_PARAM_NAMES ? param_names[i] : "");
        if (i < N_PARAM_NAMES) ref(key, &n[i]);
        else n[i] = (size_t)cfg->vocab_size * cfg->n_embd;
        total += n[i];
    }
    return total;
}

static void test_grad_accumulation(tern_gpt2 *m) {
    int32_t x[256], y[256];
    ref_ids("inputs", x, 256);
    ref_ids("targets", y, 256);
    float loss;
    size_t n[N_PARAM_NAMES + 1], total = grad_lengths(m, n);
    CHECK_OK(tern_gpt2_zero_grad(m));
    CHECK_OK(tern_gpt2_forward_backward(m, x, y, 2, 64, 1.0f, &loss));
    CHECK_OK(tern_gpt2_forward_backward(m, x + 128, y + 128, 2, 64, 1.0f, &loss));
    float *both = read_all_grads(m, n, total);
    float *halves[2];
    for (int half = 0; half < 2; half++) {
        CHECK_OK(tern_gpt2_zero_grad(m));
        CHECK_OK(tern_gpt2_forward_backward(m, x + 128 * half, y + 128 * half, 2, 64, 1.0f, &loss));
        halves[half] = read_all_grads(m, n, total);
    }
    double worst = 0;
    const char *worst_name = "";
    size_t at = 0;
    for (size_t i = 0; i <= N_PARAM_NAMES && both && halves[0] && halves[1]; i++) {
        const char *name = i < N_PARAM_NAMES ? param_names[i] : "wte.weight";
        for (size_t k = at; k < at + n[i]; k++) halves[0][k] += halves[1][k];
        double e = check_rel_error(both + at, halves[0] + at, n[i]);
        CHECKF(e <= (bf16 ? 2e-2 : 1e-5), "accumulated gradient of %s off by %.3g of its norm", name, e);
        if (e > worst) worst = e, worst_name = name;
        at += n[i];
    }
    printf("  accumulated gradients: worst %.2g of the norm (%s)\n", worst, worst_name);
    free(both), free(halves[0]), free(halves[1]);
}

/* The fixture batch's loss and gradients (n[] each tensor's length, total their sum: see
 * grad_lengths) twice: [0] at the default memory settings, [1] with recompute_layernorm;
 * the settings are left at the default. */
static void grads_both_layernorm_forms(tern_gpt2 *m, size_t *n, size_t total, float loss[2], float *grads[2]) {
    int32_t x[256], y[256];
    ref_ids("inputs", x, 256);
    ref_ids("targets", y, 256);
    for (int pass = 0; pass < 2; pass++) {
        tern_gpt2_memory memory = {.recompute_layernorm = pass == 1};
        CHECK_OK(tern_gpt2_set_memory(m, &memory));
        CHECK_OK(tern_gpt2_zero_grad(m));
        CHECK_OK(tern_gpt2_forward_backward(m, x, y, 4, 64, 1.0f, &loss[pass]));
        grads[pass] = read_all_grads(m, n, total);
    }
    tern_gpt2_memory none = {0};
    CHECK_OK(tern_gpt2_set_memory(m, &none));
}

/* The layer norms' two backwards: from their outputs (the default: xhat = (y - b) / w) and
 * from their inputs (recompute_layernorm, which writes the output again for the weight
 * gradient after it, bit for bit as the forward wrote it: test_ops_layernorm). Both are held
 * to the fixture elsewhere; here they agree with each other per tensor, to 1e-5 of its norm
 * in fp32 (y's rounding over the fixture's layer norm weights, 0.44 to 1.72 in magnitude,
 * against two summation orders' 1e-6) and 2e-2 in bf16 (a bf16 y's 2^-9 over w, and the
 * bf16 gradients' own rounding), the loss bit for bit (the forward is the same). */
static void test_layernorm_backward_modes(tern_gpt2 *m) {
    size_t n[N_PARAM_NAMES + 1], total = grad_lengths(m, n);
    float loss[2], *grads[2];
    grads_both_layernorm_forms(m, n, total, loss, grads);
    double worst = 0;
    const char *worst_name = "";
    size_t at = 0;
    for (size_t i = 0; i <= N_PARAM_NAMES && grads[0] && grads[1]; i++) {
        const char *name = i < N_PARAM_NAMES ? param_names[i] : "wte.weight";
        double e = check_rel_error(grads[0] + at, grads[1] + at, n[i]);
        CHECKF(e <= (bf16 ? 2e-2 : 1e-5), "layer norms from outputs and from inputs: %s differs by %.3g of its norm",
               name, e);
        if (e > worst) worst = e, worst_name = name;
        at += n[i];
    }
    CHECKF(memcmp(&loss[0], &loss[1], sizeof(float)) == 0, "layer norms from outputs and from inputs: losses %.9g, %.9g",
           loss[0], loss[1]);
    printf("  layer norms from outputs and from inputs: gradients within %.2g of the norm (%s)\n", worst, worst_name);
    free(grads[0]), free(grads[1]);
}

/* A layer norm whose weights do not suit the backward from its output (here one weight of
 * h.0.ln_1 set to 0, whose xhat its output no longer holds): the model keeps the layer
 * norms' inputs by itself, so its default pass and recompute_layernorm's give the same
 * gradients bit for bit (with the outputs' form they would differ, in that channel by far). */
static void test_layernorm_unsuited_weights(const char *handler) {
    char dir[] = "/tmp/tern-fixture-ln0-XXXXXX", src[1200], dst[1200];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(src, sizeof src, "%s/config.json", fixture_dir);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    CHECK(symlink(src, dst) == 0);
    char *bytes = NULL;
    size_t len = 0;
    snprintf(src, sizeof src, "%s/model.safetensors", fixture_dir);
    CHECK_OK(tern_read_file(src, &bytes, &len));
    tern_safetensors *f = NULL;
    CHECK_OK(tern_safetensors_open_memory(bytes, len, "the fixture's weights", &f));
    const tern_tensor_info *t = f ? tern_safetensors_find(f, "transformer.h.0.ln_1.weight") : NULL;
    CHECK(t != NULL && t->dtype == TERN_F32);
    if (t) memset(bytes + ((const char *)t->data - bytes) + 5 * sizeof(float), 0, sizeof(float)); /* weight 5 */
    tern_safetensors_close(f);
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    FILE *out = fopen(dst, "wb");
    CHECK(out && fwrite(bytes, 1, len, out) == len && fclose(out) == 0);
    free(bytes);
    tern_gpt2 *m = load_and_remove(handler, dir);
    if (!m) return;
    size_t n[N_PARAM_NAMES + 1], total = grad_lengths(m, n);
    float loss[2], *grads[2];
    grads_both_layernorm_forms(m, n, total, loss, grads);
    size_t differ = 0;
    for (size_t k = 0; k < total && grads[0] && grads[1]; k++)
        differ += memcmp(&grads[0][k], &grads[1][k], sizeof(float)) != 0;
    CHECKF(differ == 0 && memcmp(&loss[0], &loss[1], sizeof(float)) == 0,
           "a layer norm weight of 0: %zu of %zu gradient values and the loss (%.9g, %.9g) differ between the "
           "default and recompute_layernorm (the inputs kept for both)", differ, total, loss[0], loss[1]);
    printf("  a layer norm weight of 0: the inputs kept, gradients bit for bit as recompute_layernorm's\n");
    free(grads[0]), free(grads[1]);
    tern_gpt2_free(m);
}

/* Compares one parameter after the AdamW steps with the fixture (see the tolerance note at
 * the top); returns the largest difference among the elements held to 1e-5. */
static double check_after_adamw(tern_gpt2 *m, const char *name, float lr, int *exempt) {
    char key[160];
    size_t n;
    bool wte = !strcmp(name, "wte.weight");
    snprintf(key, sizeof key, wte ? "after3.%s.rows" : "after3.%s", name);
    const float *want = ref(key, &n);
    snprintf(key, sizeof key, wte ? "grad.%s.rows" : "grad.%s", name);
    const float *grad = ref(key, NULL);
    float *got = malloc(n * sizeof *got);
    if (wte) { /* the fixture lists some rows of wte */
        int C = tern_gpt2_get_config(m)->n_embd;
        size_t rows = n / C, V = (size_t)tern_gpt2_get_config(m)->vocab_size;
        int32_t *ids = malloc(rows * sizeof *ids);
        float *all = malloc(V * C * sizeof *all);
        ref_ids("wte_rows", ids, rows);
        CHECK_OK(tern_gpt2_read_param(m, name, all, V * C));
        for (size_t r = 0; r < rows; r++) memcpy(got + r * C, all + (size_t)ids[r] * C, C * sizeof *got);
        free(ids), free(all);
    } else {
        CHECK_OK(tern_gpt2_read_param(m, name, got, n));
    }
    double rms = 0, worst = 0;
    for (size_t i = 0; i < n; i++) rms += (double)grad[i] * grad[i];
    rms = sqrt(rms / n);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (fabs(grad[i]) < 1e-3 * rms) {
            if (d > 1e-5) (*exempt)++;
            CHECKF(d <= 3 * lr * 1.01, "%s[%zu] after 3 AdamW steps: %g, expected %g", name, i, got[i], want[i]);
        } else {
            worst = fmax(worst, d);
            CHECKF(d <= 1e-5, "%s[%zu] after 3 AdamW steps: %g, expected %g", name, i, got[i], want[i]);
        }
    }
    free(got);
    return worst;
}

static void test_adamw(tern_gpt2 *m) {
    int32_t x[256], y[256];
    ref_ids("inputs", x, 256);
    ref_ids("targets", y, 256);
    cJSON *h = cJSON_GetObjectItem(expected_json, "adamw");
    tern_gpt2_adamw hp = {
        .lr = (float)cJSON_GetObjectItem(h, "lr")->valuedouble,
        .beta1 = (float)cJSON_GetObjectItem(h, "beta1")->valuedouble,
        .beta2 = (float)cJSON_GetObjectItem(h, "beta2")->valuedouble,
        .eps = (float)cJSON_GetObjectItem(h, "eps")->valuedouble,
        .weight_decay = (float)cJSON_GetObjectItem(h, "weight_decay")->valuedouble,
        .clip = 0, .decay_all = true,
    };
    cJSON *losses = cJSON_GetObjectItem(h, "loss_before_each_step_and_after_last");
    for (int step = 0; step < 4; step++) {
        float loss;
        CHECK_OK(tern_gpt2_zero_grad(m));
        CHECK_OK(tern_gpt2_forward_backward(m, x, y, 4, 64, 1.0f, &loss));
        double want = cJSON_GetArrayItem(losses, step)->valuedouble;
        CHECKF(fabs(loss - want) <= 1e-4 * want, "loss before step %d: %.8f, expected %.8f",
               step + 1, loss, want);
        if (step < 3) CHECK_OK(tern_gpt2_update(m, &hp, NULL));
    }
    /* The last forward_backward left gradients but the parameters are those after 3 steps. */
    double worst = 0;
    int exempt = 0;
    for (size_t i = 0; i <= N_PARAM_NAMES; i++) {
        const char *name = i < N_PARAM_NAMES ? param_names[i] : "wte.weight";
        worst = fmax(worst, check_after_adamw(m, name, hp.lr, &exempt));
    }
    printf("  AdamW: 3 steps, elements within %.2g (%d below gradient noise within 3 lr)\n", worst, exempt);
}

static void test_greedy(tern_gpt2 *m) {
    cJSON *cases = cJSON_GetObjectItem(expected_json, "greedy"), *item;
    bool stopped_once = false;
    cJSON_ArrayForEach(item, cases) {
        cJSON *p = cJSON_GetObjectItem(item, "prompt_ids"), *want = cJSON_GetObjectItem(item, "new_ids");
        int32_t prompt[64];
        int T0 = 0, n = cJSON_GetArraySize(want);
        cJSON *id;
        cJSON_ArrayForEach(id, p) prompt[T0++] = id->valueint;
        collected got = {0};
        tern_gpt2_sampling greedy = {.temperature = 0};
        CHECK_OK(tern_gpt2_generate(m, prompt, 1, T0, n, &greedy, collect, &got));
        int same = got.n == n;
        for (int i = 0; same && i < n; i++) same = got.ids[i] == cJSON_GetArrayItem(want, i)->valueint;
        CHECKF(same, "greedy continuation of '%s' differs", cJSON_GetObjectItem(item, "prompt")->valuestring);
        /* once: on_token stopping after 3 of n: generation (which queues the next step
         * before it hands a token over) returns that error with exactly 3 tokens delivered,
         * and the next generation (5 tokens) is whole again */
        if (stopped_once || n < 5) continue;
        stopped_once = true;
        collected part = {.stop_after = 3};
        CHECK_ERR(tern_gpt2_generate(m, prompt, 1, T0, n, &greedy, collect, &part), "stopped by on_token after 3");
        CHECKF(part.n == 3 && !memcmp(part.ids, got.ids, 3 * sizeof *part.ids), "a stopped generation handed over %d tokens",
               part.n);
        collected again = {0};
        CHECK_OK(tern_gpt2_generate(m, prompt, 1, T0, 5, &greedy, collect, &again));
        CHECKF(again.n == 5 && !memcmp(again.ids, got.ids, 5 * sizeof *got.ids), "generation after a stopped one differs");
    }
}

/* KV-cache decoding equals full recomputation: the prefill's last logits equal a full
 * forward's, and each greedy step's token is the argmax of a full forward over the sequence
 * so far. Prompts are random ids; 2 sequences at once. */
static void test_kv_cache(tern_gpt2 *m) {
    int V = tern_gpt2_get_config(m)->vocab_size, B = 2, T0 = 7, n_new = 12;
    int32_t prompt[2 * 7];
    uint32_t s = 12345;
    for (int i = 0; i < B * T0; i++) s = s * 1664525u + 1013904223u, prompt[i] = (int32_t)(s % (uint32_t)V);
    float *cached = malloc((size_t)B * V * sizeof *cached), *full = malloc((size_t)V * sizeof *full);
    CHECK_OK(tern_gpt2_prefill_logits(m, prompt, B, T0, cached));
    for (int b = 0; b < B; b++) {
        CHECK_OK(tern_gpt2_forward(m, prompt + b * T0, NULL, 1, T0, NULL));
        CHECK_OK(tern_gpt2_read_logits(m, T0 - 1, 1, full));
        double e = check_rel_error(cached + (size_t)b * V, full, (size_t)V);
        CHECKF(e <= (bf16 ? 1e-2 : 1e-5), "prefill logits of sequence %d differ from a full forward by %.3g", b, e);
    }

    /* Greedy with the cache, one sequence, then check each token against full recomputation. */
    collected got = {0};
    tern_gpt2_sampling greedy = {.temperature = 0};
    CHECK_OK(tern_gpt2_generate(m, prompt, 1, T0, n_new, &greedy, collect, &got));
    int32_t seq[64];
    memcpy(seq, prompt, T0 * sizeof *seq);
    for (int i = 0; i < got.n; i++) {
        int T = T0 + i;
        CHECK_OK(tern_gpt2_forward(m, seq, NULL, 1, T, NULL));
        CHECK_OK(tern_gpt2_read_logits(m, T - 1, 1, full));
        int best = 0;
        for (int v = 1; v < V; v++) if (full[v] > full[best]) best = v;
        CHECKF(best == got.ids[i], "cached step %d chose %d, full recomputation %d", i, got.ids[i], best);
        seq[T] = got.ids[i];
    }
    free(cached);
    free(full);
}

int main(void) {
    const char *shared = getenv("TERN_SHARED_DIR");
    snprintf(fixture_dir, sizeof fixture_dir, "%s/fixtures/gpt2-tiny-a", shared ? shared : "../shared");
    const char *precision = getenv("TERN_TEST_PRECISION");
    bf16 = precision && !strcmp(precision, "bf16");
    char path[1200];
    snprintf(path, sizeof path, "%s/expected.safetensors", fixture_dir);
    tern_error *err = tern_safetensors_open(path, &expected);
    if (err) {
        fprintf(stderr, "%s\n", tern_error_message(err));
        tern_error_free(err);
        return 1;
    }
    char *json;
    size_t len;
    snprintf(path, sizeof path, "%s/expected.json", fixture_dir);
    CHECK_OK(tern_read_file(path, &json, &len));
    expected_json = cJSON_Parse(json);
    free(json);
    CHECK(expected_json != NULL);

    size_t n_handlers;
    const char *const *handlers = tern_handler_names(&n_handlers);
    const char *only = getenv("TERN_TEST_HANDLER");
    const char *part = getenv("TERN_TEST_PART");
    bool all = !part || !*part, inference = all || !strcmp(part, "inference");
    bool forward = inference || !strcmp(part, "forward"), decode = inference || !strcmp(part, "decode");
    bool training = all || !strcmp(part, "training");
    CHECKF(forward || decode || training, "TERN_TEST_PART is '%s', not forward, decode, inference or training", part);
    for (size_t h = 0; h < n_handlers; h++) {
        if (only && strcmp(only, handlers[h])) continue;
        if (!handler_has_device(tern_handler_ops(handlers[h]))) continue;
        printf("%s (%s):\n", handlers[h], bf16 ? "bf16" : "fp32");
        tern_gpt2 *m = load(handlers[h], "model.safetensors");
        tern_gpt2 *hub = load(handlers[h], "model-hub-layout.safetensors");
        if (!m || !hub) {
            tern_gpt2_free(m);
            tern_gpt2_free(hub);
            continue;
        }
        if (forward) {
            test_forward(m, "save_pretrained layout");
            test_forward(hub, "hub layout");
        }
        tern_gpt2_free(hub);
        if (decode) test_kv_cache(m);
        if (training) {
            test_gradients(m);
            test_grad_accumulation(m);
            test_memory_settings(m);
            test_layernorm_backward_modes(m);
            test_layernorm_unsuited_weights(handlers[h]);
        }
        if (!bf16 && decode) test_greedy(m);
        if (!bf16 && training) test_adamw(m);
        tern_gpt2_free(m);
        /* decoding in sections of several steps (the replay_steps option; 3: sections of
         * 3, 3, .. and a shorter last one), on cpu and on the GPU core's interpreter */
        if (decode && (!strcmp(handlers[h], "cpu") || !strcmp(handlers[h], "interp"))) {
            char backend[64];
            snprintf(backend, sizeof backend, "%s:replay_steps=3", handlers[h]);
            printf("%s (%s):\n", backend, bf16 ? "bf16" : "fp32");
            tern_gpt2 *sections = load(backend, "model.safetensors");
            if (sections) {
                test_kv_cache(sections);
                if (!bf16) test_greedy(sections);
            }
            tern_gpt2_free(sections);
        }
    }
    for (int i = 0; i < ref_used; i++) free(ref_buffers[i]);
    cJSON_Delete(expected_json);
    tern_safetensors_close(expected);
    return check_summary("gpt2 fixture");
}
