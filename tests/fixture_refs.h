/* A fixture's references as the tests read them (../shared/fixtures/NAME, or under
 * TERN_SHARED_DIR): expected.safetensors and expected.json, opened together; and a collector
 * of the first sequence's generated token ids, for the greedy checks. Header-only, for the
 * test programs (each links cJSON). */
#ifndef TERN_TESTS_FIXTURE_REFS_H
#define TERN_TESTS_FIXTURE_REFS_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "tern/file.h"
#include "tern/safetensors.h"

typedef struct fixture_refs {
    char dir[1024];
    tern_safetensors *tensors; /* expected.safetensors */
    cJSON *json;               /* expected.json */
} fixture_refs;

/* Opens fixture `name`'s references; false (with a failed check) when either is missing. */
static inline bool fixture_refs_open(fixture_refs *r, const char *name) {
    const char *shared = getenv("TERN_SHARED_DIR");
    char path[1200];
    *r = (fixture_refs){0};
    snprintf(r->dir, sizeof r->dir, "%s/fixtures/%s", shared ? shared : "../shared", name);
    snprintf(path, sizeof path, "%s/expected.safetensors", r->dir);
    CHECK_OK(tern_safetensors_open(path, &r->tensors));
    char *text = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/expected.json", r->dir);
    CHECK_OK(tern_read_file(path, &text, &len));
    r->json = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECKF(r->json != NULL, "%s/expected.json: not JSON", r->dir);
    return r->tensors && r->json;
}

static inline void fixture_refs_close(fixture_refs *r) {
    cJSON_Delete(r->json);
    tern_safetensors_close(r->tensors);
    *r = (fixture_refs){0};
}

/* Logits [1, V] of a prompt's last position through a model's cached path
 * (tern_gpt2_prefill_logits, tern_llama_prefill_logits over one prompt). */
typedef tern_error *(*fixture_prefill)(void *model, const int32_t *prompt, int T0, float *out);

/* The largest |cached-path logit - reference| over positions 60..63 of the fixture's batch
 * row 0 (`inputs`, `logits_b0_last4`). */
static inline double fixture_last4_error(const fixture_refs *r, int V, fixture_prefill prefill, void *model) {
    const tern_tensor_info *ti = tern_safetensors_find(r->tensors, "inputs");
    const tern_tensor_info *tl = tern_safetensors_find(r->tensors, "logits_b0_last4");
    CHECK(ti && tl && tl->count == 4 * (size_t)V);
    if (!ti || !tl) return INFINITY;
    int32_t *x = malloc(ti->count * sizeof *x);
    float *want = malloc(tl->count * sizeof *want), *got = malloc((size_t)V * sizeof *got);
    CHECK_OK(tern_tensor_convert(ti, TERN_I32, x));
    CHECK_OK(tern_tensor_convert(tl, TERN_F32, want));
    double worst = 0;
    for (int p = 0; p < 4; p++) {
        CHECK_OK(prefill(model, x, 61 + p, got)); /* last position 60 + p */
        for (int v = 0; v < V; v++) {
            double e = fabs((double)got[v] - want[(size_t)p * V + v]);
            if (!(e <= worst)) worst = e;
        }
    }
    free(x), free(want), free(got);
    return worst;
}

/* The first sequence's tokens as generation hands them over (an on_token callback); with
 * stop_after > 0, the callback of that many tokens stops generation with an error. */
typedef struct collected {
    int32_t ids[64];
    int n, stop_after;
} collected;

static inline tern_error *collect(void *user, const int32_t *tokens, int B) {
    collected *c = user;
    (void)B;
    if (c->n < 64) c->ids[c->n++] = tokens[0];
    if (c->stop_after > 0 && c->n == c->stop_after) return tern_errorf("stopped by on_token after %d tokens", c->n);
    return NULL;
}

#endif
