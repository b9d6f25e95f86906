/* tern train for the Llama family: the same options and step line as GPT-2's (cmd_train.c),
 * on tern/llama.h. What GPT-2's run has and this one does not yet (resume, ranks, ZeRO-1,
 * the optimizer state and run.json in checkpoints) is refused with one line, never ignored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "model.h"
#include "train_llama.h"
#include "tern/data.h"
#include "tern/dist.h"
#include "tern/file.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

tern_error *train_is_llama(const train_options *o, bool *out) {
    *out = false;
    if (o->init) *out = cli_llama_init_name(o->init) != NULL;
    else if (o->model_dir || o->resume) {
        /* a folder without a readable config.json is GPT-2's path to report (a resume's
         * checks name what is missing) */
        tern_error_free(cli_model_is_llama(o->model_dir ? o->model_dir : o->resume, out));
    }
    return NULL;
}

/* The tokenizer files of `from` that a model folder carries, copied into `to`. */
static tern_error *copy_tokenizer(const char *from, const char *to) {
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                        "generation_config.json"};
    char src[4200], dst[4200];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(src, sizeof src, "%s/%s", from, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", to, files[i]);
        char *bytes = NULL;
        size_t len = 0;
        tern_error *err = tern_read_file(src, &bytes, &len);
        if (err) { /* a file the folder does not have */
            tern_error_free(err);
            continue;
        }
        err = tern_write_file(dst, bytes, len);
        free(bytes);
        TERN_TRY(err);
    }
    return NULL;
}

static tern_error *validate(tern_llama *m, const tern_dataset *val, const train_options *o, int32_t *x,
                            int32_t *y, float *out) {
    double sum = 0;
    for (int k = 0; k < o->val_batches; k++) {
        float loss;
        TERN_TRY(tern_dataset_batch(val, (size_t)k, o->B, o->T, x, y));
        TERN_TRY(tern_llama_forward(m, x, y, o->B, o->T, &loss));
        sum += loss;
    }
    *out = (float)(sum / o->val_batches);
    return NULL;
}

static tern_error *save(tern_llama *m, const train_options *o, int step) {
    TERN_TRY(tern_llama_save(m, o->out));
    if (o->model_dir) TERN_TRY(copy_tokenizer(o->model_dir, o->out));
    char *shown = tern_printable_copy(o->out);
    printf("checkpoint: %s (step %d)\n", shown ? shown : "?", step);
    free(shown);
    fflush(stdout);
    return NULL;
}

static tern_error *refuse_unsupported(const train_options *o) {
    const char *what = o->resume                                                ? "--resume"
                       : o->procs > 1 || o->world > 1 || tern_dist_launched()   ? "several ranks"
                       : o->zero1                                               ? "--zero1"
                       : o->stop_after                                          ? "--stop-after"
                       : o->save_dtype != TERN_F32                              ? "--save-dtype bf16"
                       : o->memory.recompute_gelu || o->memory.recompute_layernorm ? "--recompute"
                                                                                : NULL;
    if (what) return tern_errorf("train: %s is not supported for the Llama family yet", what);
    return NULL;
}

tern_error *train_llama(const train_options *o) {
    TERN_TRY(refuse_unsupported(o));
    char backend_buf[256];
    const char *backend = cli_backend_on_device(o->backend, o->device, backend_buf, sizeof backend_buf);
    tern_tokenizer *tok = NULL;
    tern_llama *m = NULL;
    tern_dataset *data = NULL, *val = NULL;
    int32_t *x = NULL, *y = NULL;
    tern_error *err = NULL;
    if (o->init) {
        tern_llama_config cfg;
        if ((err = tern_llama_config_named(cli_llama_init_name(o->init), &cfg)) ||
            (err = tern_llama_init(backend, &cfg, o->seed, o->precision, &m)))
            goto done;
    } else if ((err = tern_llama_load(backend, o->model_dir, o->precision, &m))) {
        goto done;
    }
    const tern_llama_config *cfg = tern_llama_get_config(m);
    if (o->T > cfg->max_seq) {
        err = tern_errorf("--seq %d exceeds the model's context of %d", o->T, cfg->max_seq);
        goto done;
    }
    if ((err = cli_open_tokenizer(o->model_dir, &tok))) goto done;
    if ((err = tern_dataset_open(o->data, tok, (size_t)cfg->vocab_size, &data))) goto done;
    if (o->val && (err = tern_dataset_open(o->val, tok, (size_t)cfg->vocab_size, &val))) goto done;
    size_t batch_tokens = (size_t)o->B * o->T;
    x = malloc(batch_tokens * sizeof *x);
    y = malloc(batch_tokens * sizeof *y);
    if (!x || !y) {
        err = tern_errorf("out of memory for a batch of %d x %d", o->B, o->T);
        goto done;
    }
    printf("backend: %s (%s)\n", tern_llama_backend(m), tern_llama_device_name(m));
    printf("model: %s, %d layers, %d heads (%d key/value), %d channels, context %d, %lld parameters; %s\n",
           tern_llama_family_name(cfg->family), cfg->n_layer, cfg->n_head, cfg->n_kv_head, cfg->hidden,
           cfg->max_seq, (long long)tern_llama_config_param_count(cfg), tern_precision_name(o->precision));
    printf("data: %zu tokens; batch %d x %d x %d accumulated; steps 1 to %d\n", tern_dataset_tokens(data), o->B,
           o->T, o->grad_accum, o->steps);
    fflush(stdout);
    for (int step = 0; step < o->steps && !err; step++) {
        double t0 = now_seconds();
        float lr = train_lr(o, step), loss_sum = 0, norm = 0;
        if ((err = tern_llama_zero_grad(m))) break;
        for (int micro = 0; micro < o->grad_accum && !err; micro++) {
            float loss = 0;
            size_t k = (size_t)step * o->grad_accum + micro; /* the data position, as GPT-2's */
            if (!(err = tern_dataset_batch(data, k, o->B, o->T, x, y)) &&
                !(err = tern_llama_forward_backward(m, x, y, o->B, o->T, 1.0f / o->grad_accum, &loss)) &&
                !isfinite(loss))
                err = tern_errorf("the loss is %g: training diverged", loss);
            loss_sum += loss;
        }
        tern_gpt2_adamw hp = o->adamw;
        hp.lr = lr;
        if (err || (err = tern_llama_update(m, &hp, &norm))) break;
        double dt = now_seconds() - t0;
        float val_loss = NAN;
        bool last = step + 1 == o->steps;
        if (val && o->val_every && ((step + 1) % o->val_every == 0 || last) &&
            (err = validate(m, val, o, x, y, &val_loss)))
            break;
        printf("step %d/%d | loss %.4f", step + 1, o->steps, loss_sum / o->grad_accum);
        if (!isnan(val_loss)) printf(" | val %.4f", val_loss);
        printf(" | lr %.3e | norm %.3f | %.1f ms | %.0f tok/s\n", lr, norm, dt * 1e3,
               (double)batch_tokens * o->grad_accum / dt);
        fflush(stdout);
        if (o->out && (last || (o->save_every && (step + 1) % o->save_every == 0))) err = save(m, o, step + 1);
    }
    if (err) err = tern_error_wrap(err, "train");
done:
    free(x);
    free(y);
    tern_dataset_close(data);
    tern_dataset_close(val);
    tern_llama_free(m);
    tern_tokenizer_free(tok);
    return err;
}
