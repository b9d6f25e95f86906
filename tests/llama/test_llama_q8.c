/* The Llama family's decoding with q8_0 matrices (tern_llama_quantize_q8) on the cpu handler,
 * against the float64 references of ../shared/fixtures/llama-tiny-a (transformers, float
 * weights). Its q|k|v, o and gate|up matrices reduce over 64 channels (whole q8_0 blocks);
 * its down projection reduces over 176 (five and a half blocks) and stays f32, as the
 * contract says.
 *
 *  - logits: for row 0 of the fixture's batch, the cached path's logits at positions 60..63
 *    against `logits_b0_last4`, the largest absolute difference over the 4 x 4096 logits.
 *    Measured (2026-12-03, the 2-core AMD EPYC of docs/PERFORMANCE.md): float weights
 *    3.8e-6; the layers' matrices in q8_0, the tied head f32: 0.0116; the head too: 0.0595.
 *    Bounds about 3x the measured: 0.035 and 0.18. Since the decoding kernels (m <= 8)
 *    quantize the activations per block too (llama.cpp's q8_0 x q8_0; the same machine,
 *    2026-12-03): 0.0116 (the prefill's layers run on sgemm, f32 activations) and 0.0918
 *    (the head's 4 rows take the int8 kernel), within the same bounds.
 *  - greedy continuations: the fixture's four prompts, 32 greedy tokens each (top-1/top-2
 *    margins down to 0.0032 in the reference, well under the q8_0 head's logit error). Measured:
 *    128 of 128 tokens equal with the head f32; 102 with it in q8_0 (one prompt diverges
 *    after 6 tokens); with int8 activations, 128 and 128. Checked: over 3/4 and over half.
 *  - training with q8_0 weights is refused with one line.
 * The float weights' own accuracy is test_llama_model's. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture_refs.h"
#include "tern/file.h"
#include "tern/llama.h"
#include "tern/safetensors.h"

static fixture_refs refs;

static tern_error *prefill_one(void *m, const int32_t *prompt, int T0, float *out) {
    return tern_llama_prefill_logits(m, prompt, 1, T0, out);
}

/* The largest |cached-path logit - reference| over positions 60..63 of batch row 0. */
static double logit_error(tern_llama *m) {
    return fixture_last4_error(&refs, tern_llama_get_config(m)->vocab_size, prefill_one, m);
}

/* Greedy continuations of the fixture's prompts (not stopping at eos, as the reference):
 * how many tokens equal the reference's, of *total. */
static int greedy_matches(tern_llama *m, int *total) {
    cJSON *cases = cJSON_GetObjectItem(refs.json, "greedy"), *item;
    int same = 0;
    *total = 0;
    cJSON_ArrayForEach(item, cases) {
        cJSON *p = cJSON_GetObjectItem(item, "prompt_ids"), *want = cJSON_GetObjectItem(item, "new_ids"), *id;
        int32_t prompt[64];
        int T0 = 0, n = cJSON_GetArraySize(want);
        cJSON_ArrayForEach(id, p) if (T0 < 64) prompt[T0++] = id->valueint;
        collected got = {0};
        tern_gpt2_sampling greedy = {.temperature = 0};
        CHECK_OK(tern_llama_generate(m, prompt, 1, T0, n, &greedy, false, collect, &got));
        int prefix = 0;
        while (prefix < n && prefix < got.n && got.ids[prefix] == cJSON_GetArrayItem(want, prefix)->valueint) prefix++;
        for (int i = 0; i < n; i++) same += i < got.n && got.ids[i] == cJSON_GetArrayItem(want, i)->valueint;
        *total += n;
        printf("  '%s': the first %d of %d tokens equal\n", cJSON_GetObjectItem(item, "prompt")->valuestring, prefix, n);
    }
    return same;
}

int main(void) {
    if (!fixture_refs_open(&refs, "llama-tiny-a")) return check_summary("llama q8");
    const char *dir = refs.dir;

    for (int head = 1; head >= 0; head--) {
        tern_llama *m = NULL;
        CHECK_OK(tern_llama_load("cpu", dir, TERN_PRECISION_FP32, &m));
        if (!m) break;
        double e_float = logit_error(m);
        CHECK_OK(tern_llama_quantize_q8(m, head));
        double e = logit_error(m);
        int total = 0, same = greedy_matches(m, &total);
        printf("q8_0 matrices%s: max |logit - reference| %.4g (float weights %.3g); greedy %d of %d tokens equal\n",
               head ? " and lm head" : "", e, e_float, same, total);
        double bound = head ? 0.18 : 0.035;
        CHECKF(e <= bound, "q8_0 logits differ from the reference by %.4g > %g", e, bound);
        CHECKF(head ? same * 2 > total : same * 4 > total * 3, "q8_0 greedy%s: %d of %d tokens equal",
               head ? " (lm head too)" : "", same, total);
        int32_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        float loss;
        CHECK_ERR(tern_llama_forward_backward(m, x, x, 1, 8, 1.0f, &loss),
                  "training with q8_0 weights is not supported");
        tern_llama_free(m);
    }
    fixture_refs_close(&refs);
    return check_summary("llama q8");
}
