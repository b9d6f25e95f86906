/* One model handle over the two families (see model.h). */
#include "model.h"

tern_error *cli_model_is_llama(const char *dir, bool *out) { return tern_llama_is_family(dir, out); }

tern_error *cli_model_load(const char *backend, const char *dir, tern_precision precision, cli_model *out) {
    *out = (cli_model){0};
    bool llama = false;
    TERN_TRY(cli_model_is_llama(dir, &llama));
    if (llama) return tern_llama_load(backend, dir, precision, &out->llama);
    return tern_gpt2_load(backend, dir, precision, &out->gpt2);
}

tern_error *cli_model_quantize_q8(cli_model *m, bool lm_head) {
    if (m->llama) return tern_llama_quantize_q8(m->llama, lm_head);
    return tern_gpt2_quantize_q8(m->gpt2, lm_head);
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

int64_t cli_model_param_count(const cli_model *m) {
    if (m->llama) return tern_llama_config_param_count(tern_llama_get_config(m->llama));
    return (int64_t)tern_gpt2_num_params(tern_gpt2_get_config(m->gpt2));
}
