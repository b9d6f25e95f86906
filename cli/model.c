/* One model handle over the two families (see model.h). */
#include "model.h"

#include <string.h>

const char *cli_llama_init_name(const char *init) {
    if (!strcmp(init, "llama-tiny")) return "tiny";
    if (!strcmp(init, "tiny")) return NULL;
    tern_llama_config cfg;
    tern_error *err = tern_llama_config_named(init, &cfg);
    tern_error_free(err);
    return err ? NULL : init;
}

tern_error *cli_model_is_llama(const char *dir, bool *out) { return tern_llama_is_family(dir, out); }

tern_error *cli_model_load(const char *backend, const char *dir, tern_precision precision, cli_model *out) {
    *out = (cli_model){0};
    bool llama = false;
    TERN_TRY(cli_model_is_llama(dir, &llama));
    if (llama) return tern_llama_load(backend, dir, precision, &out->llama);
    return tern_gpt2_load(backend, dir, precision, &out->gpt2);
}

tern_error *cli_model_init(const char *backend, const char *init, uint64_t seed, tern_precision precision,
                           cli_model *out) {
    *out = (cli_model){0};
    const char *llama = cli_llama_init_name(init);
    if (llama) {
        tern_llama_config cfg;
        TERN_TRY(tern_llama_config_named(llama, &cfg));
        return tern_llama_init(backend, &cfg, seed, precision, &out->llama);
    }
    tern_gpt2_config cfg;
    tern_error *err = tern_gpt2_config_named(init, &cfg);
    if (err) { /* GPT-2's message lists its names: add the family's */
        tern_error *named = tern_errorf("%s; the Llama family's: smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, "
                                        "llama-tiny", tern_error_message(err));
        tern_error_free(err);
        return named;
    }
    return tern_gpt2_init(backend, &cfg, seed, precision, &out->gpt2);
}

void cli_model_free(cli_model *m) {
    tern_gpt2_free(m->gpt2);
    tern_llama_free(m->llama);
    *m = (cli_model){0};
}

const char *cli_model_family(const cli_model *m) {
    return m->llama ? tern_llama_family_name(tern_llama_get_config(m->llama)->family) : "gpt2";
}

const char *cli_model_backend(const cli_model *m) {
    return m->llama ? tern_llama_backend(m->llama) : tern_gpt2_backend(m->gpt2);
}

const char *cli_model_device_name(const cli_model *m) {
    return m->llama ? tern_llama_device_name(m->llama) : tern_gpt2_device_name(m->gpt2);
}

int cli_model_vocab_size(const cli_model *m) {
    return m->llama ? tern_llama_get_config(m->llama)->vocab_size : tern_gpt2_get_config(m->gpt2)->vocab_size;
}

int cli_model_context(const cli_model *m) {
    return m->llama ? tern_llama_get_config(m->llama)->max_seq : tern_gpt2_get_config(m->gpt2)->max_seq;
}

int64_t cli_model_param_count(const cli_model *m) {
    if (m->llama) return tern_llama_config_param_count(tern_llama_get_config(m->llama));
    return (int64_t)tern_gpt2_num_params(tern_gpt2_get_config(m->gpt2));
}

tern_error *cli_model_zero_grad(cli_model *m) {
    return m->llama ? tern_llama_zero_grad(m->llama) : tern_gpt2_zero_grad(m->gpt2);
}

tern_error *cli_model_forward_backward(cli_model *m, const int32_t *x, const int32_t *y, int B, int T,
                                       float loss_scale, float *mean_loss) {
    if (m->llama) return tern_llama_forward_backward(m->llama, x, y, B, T, loss_scale, mean_loss);
    return tern_gpt2_forward_backward(m->gpt2, x, y, B, T, loss_scale, mean_loss);
}

tern_error *cli_model_update(cli_model *m, const tern_gpt2_adamw *h, float *grad_norm) {
    return m->llama ? tern_llama_update(m->llama, h, grad_norm) : tern_gpt2_update(m->gpt2, h, grad_norm);
}

tern_error *cli_model_forward(cli_model *m, const int32_t *x, const int32_t *y, int B, int T, float *mean_loss) {
    if (m->llama) return tern_llama_forward(m->llama, x, y, B, T, mean_loss);
    return tern_gpt2_forward(m->gpt2, x, y, B, T, mean_loss);
}

tern_error *cli_model_generate(cli_model *m, const int32_t *prompt, int T0, int n_new,
                               const tern_gpt2_sampling *s, bool stop_at_eos, tern_gpt2_on_token on_token,
                               void *user) {
    if (m->llama) return tern_llama_generate(m->llama, prompt, 1, T0, n_new, s, stop_at_eos, on_token, user);
    return tern_gpt2_generate(m->gpt2, prompt, 1, T0, n_new, s, on_token, user);
}
