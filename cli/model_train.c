/* The training calls of one model handle over the two families (model.h). */
#include <stdio.h>
#include <string.h>

#include "model.h"

bool cli_init_is_llama(const char *init) {
    if (!strcmp(init, "llama-tiny")) return true;
    if (!strcmp(init, "tiny")) return false; /* GPT-2's tiny */
    tern_llama_config cfg;
    tern_error *err = tern_llama_config_named(init, &cfg);
    tern_error_free(err);
    return !err;
}

tern_error *cli_model_dir_is_llama(const char *dir, bool *out) { return tern_llama_is_family(dir, out); }

tern_error *cli_model_init(const char *backend, const char *init, uint64_t seed, tern_precision precision,
                           cli_model *out) {
    *out = (cli_model){0};
    if (cli_init_is_llama(init)) {
        tern_llama_config cfg;
        TERN_TRY(tern_llama_config_named(strcmp(init, "llama-tiny") ? init : "tiny", &cfg));
        return tern_llama_init(backend, &cfg, seed, precision, &out->llama);
    }
    tern_gpt2_config cfg;
    TERN_TRY(tern_gpt2_config_named(init, &cfg));
    return tern_gpt2_init(backend, &cfg, seed, precision, &out->gpt2);
}

void cli_model_describe(const cli_model *m, char *buf, size_t cap) {
    if (m->llama) {
        const tern_llama_config *c = tern_llama_get_config(m->llama);
        snprintf(buf, cap, "%s, %d layers, %d heads (%d key/value), %d channels, context %d, %lld parameters",
                 tern_llama_family_name(c->family), c->n_layer, c->n_head, c->n_kv_head, c->hidden, c->max_seq,
                 (long long)tern_llama_config_param_count(c));
    } else {
        const tern_gpt2_config *c = tern_gpt2_get_config(m->gpt2);
        snprintf(buf, cap, "%d layers, %d heads, %d channels, context %d, %zu parameters", c->n_layer, c->n_head,
                 c->n_embd, c->max_seq, tern_gpt2_num_params(c));
    }
}

tern_error *cli_model_attach(cli_model *m, tern_dist *dist, const tern_gpt2_memory *memory, bool zero1) {
    if (m->llama) {
        if (memory->recompute_gelu || memory->recompute_layernorm)
            return tern_errorf("--recompute is GPT-2's (the Llama family keeps every activation)");
        if (dist) TERN_TRY(tern_llama_set_dist(m->llama, dist));
        return zero1 ? tern_llama_shard_optimizer(m->llama) : NULL;
    }
    TERN_TRY(tern_gpt2_set_memory(m->gpt2, memory));
    if (dist) TERN_TRY(tern_gpt2_set_dist(m->gpt2, dist));
    return zero1 ? tern_gpt2_shard_optimizer(m->gpt2) : NULL;
}

tern_error *cli_model_forward_backward(cli_model *m, const int32_t *x, const int32_t *y, int B, int T,
                                       float loss_scale, float *mean_loss) {
    if (m->llama) return tern_llama_forward_backward(m->llama, x, y, B, T, loss_scale, mean_loss);
    return tern_gpt2_forward_backward(m->gpt2, x, y, B, T, loss_scale, mean_loss);
}

tern_error *cli_model_zero_grad(cli_model *m) {
    return m->llama ? tern_llama_zero_grad(m->llama) : tern_gpt2_zero_grad(m->gpt2);
}

tern_error *cli_model_update(cli_model *m, const tern_gpt2_adamw *h, float *grad_norm) {
    return m->llama ? tern_llama_update(m->llama, h, grad_norm) : tern_gpt2_update(m->gpt2, h, grad_norm);
}

int cli_model_step(const cli_model *m) { return m->llama ? tern_llama_step(m->llama) : tern_gpt2_step(m->gpt2); }

tern_error *cli_model_sum_across_ranks(cli_model *m, float *value) {
    return m->llama ? tern_llama_sum_across_ranks(m->llama, value) : tern_gpt2_sum_across_ranks(m->gpt2, value);
}

size_t cli_model_optimizer_bytes(const cli_model *m) {
    return m->llama ? tern_llama_optimizer_bytes(m->llama) : tern_gpt2_optimizer_bytes(m->gpt2);
}

tern_error *cli_model_save_as(cli_model *m, const char *dir, tern_dtype dtype) {
    return m->llama ? tern_llama_save_as(m->llama, dir, dtype) : tern_gpt2_save_as(m->gpt2, dir, dtype);
}

tern_error *cli_model_save_optimizer(cli_model *m, const char *path, const char *const *metadata_kv) {
    if (m->llama) return tern_llama_save_optimizer(m->llama, path, metadata_kv);
    return tern_gpt2_save_optimizer(m->gpt2, path, metadata_kv);
}

tern_error *cli_model_load_optimizer(cli_model *m, const char *path) {
    return m->llama ? tern_llama_load_optimizer(m->llama, path) : tern_gpt2_load_optimizer(m->gpt2, path);
}

/* Both families record the step the same way (core/optimizer_file.h). */
tern_error *cli_model_saved_step(const char *dir, int *step) { return tern_gpt2_saved_step(dir, step); }
