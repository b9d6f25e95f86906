/* GPT-2 decoding with q8_0 matrices (tern_gpt2_quantize_q8) on the cpu handler, against the
 * float64 references of ../shared/fixtures/gpt2-tiny-a (PyTorch, float weights):
 *
 *  - logits: for row 0 of the fixture's batch, the prefill logits at positions 60..63 (the
 *    cached decoding path, which is what q8_0 changes) against `logits_b0_last4`, the
 *    largest absolute difference over the 4 x 50257 logits (float weights: 3.3e-6).
 *    Measured (2026-12-01, this machine, the Xeon of docs/PERFORMANCE.md): the layers'
 *    matrices in q8_0, the tied lm head f32: 0.0134; the lm head in q8_0 too: 0.121 (its
 *    k = 64 dot products meet the final layer norm's largest channels). Bounds: 0.05 and
 *    0.3, about 3x the measured. Since the decoding kernels (m <= 8) quantize the
 *    activations per block too (llama.cpp's q8_0 x q8_0; 2026-12-03, the Zen 5 of
 *    docs/PERFORMANCE.md): 0.0134 (these 64-token prefills run the layers on sgemm, f32
 *    activations) and 0.134 (the head's 4 rows take the int8 kernel); the bounds stand.
 *  - greedy continuations: the fixture's four prompts, 32 greedy tokens each. Measured:
 *    128 of 128 tokens equal the reference's with the lm head f32; with it in q8_0, 82 of
 *    128 (two prompts diverge, after 13 and 5 equal tokens: once a token differs the rest
 *    follow another text; the fixture warns of top-1/top-2 margins down to 0.0077, below
 *    that logit error). With int8 activations (every decoding product): 128 of 128, and 93
 *    of 128 with the head in q8_0. Checked: with the head f32, every prompt's first 8
 *    tokens equal and over 3/4 of all; with it q8_0, over half of all.
 *  - training with q8_0 weights is refused with one line.
 * The float weights' own accuracy is test_gpt2_fixture's. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture_refs.h"
#include "tern/file.h"
#include "tern/gpt2.h"
#include "tern/safetensors.h"

static fixture_refs refs;

static tern_error *prefill_one(void *m, const int32_t *prompt, int T0, float *out) {
    return tern_gpt2_prefill_logits(m, prompt, 1, T0, out);
}

/* The largest |cached-path logit - reference| over positions 60..63 of batch row 0. */
static double logit_error(tern_gpt2 *m) {
    return fixture_last4_error(&refs, tern_gpt2_get_config(m)->vocab_size, prefill_one, m);
}

/* Greedy continuations of the fixture's prompts: tokens equal to the reference's, and
 * whether every prompt's first 8 are. */
static int greedy_matches(tern_gpt2 *m, int *total, bool *first8) {
    cJSON *cases = cJSON_GetObjectItem(refs.json, "greedy"), *item;
    int same = 0;
    *total = 0;
    *first8 = true;
    cJSON_ArrayForEach(item, cases) {
        cJSON *p = cJSON_GetObjectItem(item, "prompt_ids"), *want = cJSON_GetObjectItem(item, "new_ids"), *id;
        int32_t prompt[64];
        int T0 = 0, n = cJSON_GetArraySize(want);
        cJSON_ArrayForEach(id, p) prompt[T0++] = id->valueint;
        collected got = {0};
        tern_gpt2_sampling greedy = {.temperature = 0};
        CHECK_OK(tern_gpt2_generate(m, prompt, 1, T0, n, &greedy, collect, &got));
        for (int i = 0; i < n; i++) {
            bool eq = i < got.n && got.ids[i] == cJSON_GetArrayItem(want, i)->valueint;
            same += eq;
            if (i < 8 && !eq) *first8 = false;
        }
        *total += n;
        int prefix = 0;
        while (prefix < n && prefix < got.n && got.ids[prefix] == cJSON_GetArrayItem(want, prefix)->valueint) prefix++;
        printf("  '%s': the first %d of %d tokens equal\n", cJSON_GetObjectItem(item, "prompt")->valuestring, prefix, n);
    }
    return same;
}

int main(void) {
    if (!fixture_refs_open(&refs, "gpt2-tiny-a")) return check_summary("gpt2 q8");
    const char *dir = refs.dir;

    for (int lm = 1; lm >= 0; lm--) {
        tern_gpt2 *m = NULL;
        CHECK_OK(tern_gpt2_load("cpu", dir, TERN_PRECISION_FP32, &m));
        if (!m) break;
        double e_float = logit_error(m);
        CHECK_OK(tern_gpt2_quantize_q8(m, lm));
        double e = logit_error(m);
        int total = 0;
        bool first8 = false;
        int same = greedy_matches(m, &total, &first8);
        printf("q8_0 matrices%s: max |logit - reference| %.4g (float weights %.3g); greedy %d of %d tokens equal\n",
               lm ? " and lm head" : "", e, e_float, same, total);
        double bound = lm ? 0.3 : 0.05;
        CHECKF(e <= bound, "q8_0 logits differ from the reference by %.4g > %g", e, bound);
        if (lm) CHECKF(same * 2 > total, "q8_0 greedy (lm head too): %d of %d tokens equal", same, total);
        else
            CHECKF(first8 && same * 4 > total * 3, "q8_0 greedy: %d of %d tokens equal, first 8 of each %s", same,
                   total, first8 ? "equal" : "not all equal");
        int32_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        float loss;
        CHECK_ERR(tern_gpt2_forward_backward(m, x, x, 1, 8, 1.0f, &loss), "training with q8_0 weights is not supported");
        tern_gpt2_free(m);
    }
    fixture_refs_close(&refs);
    return check_summary("gpt2 q8");
}
