/* tern eval: the mean loss of a model on a data file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tern/data.h"
#include "model.h"

static const char usage[] =
    "usage: tern eval --model DIR --data FILE [--batch B] [--seq T] [--batches N]\n"
    "                 [--backend cpu|cuda|opencl|interp] [--device N] [--precision fp32|bf16]\n"
    "  --batch B     sequences per batch (default 4)\n"
    "  --seq T       tokens per sequence (default: the model's context, at most 1024)\n"
    "  --batches N   batches to evaluate (default: every whole batch in the data)\n"
    "FILE is an llm.c token shard or UTF-8 text (tokenized with the model's tokenizer).\n"
    "The model's family (GPT-2, or Llama / Qwen2 / SmolLM2) comes from DIR/config.json.\n";

int tern_cmd_eval(int argc, char **argv) {
    const char *model_dir = NULL, *data_path = NULL, *backend = cli_default_backend(), *value, *device = NULL;
    char backend_buf[256];
    int B = 4, T = 0;
    long n_batches = 0;
    tern_precision precision = TERN_PRECISION_FP32;
    tern_error *err = NULL;
    for (int i = 1; i < argc && !err; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (cli_option(argc, argv, &i, "--model", &value, &err)) {
            model_dir = value;
        } else if (cli_option(argc, argv, &i, "--data", &value, &err)) {
            data_path = value;
        } else if (cli_option(argc, argv, &i, "--backend", &value, &err)) {
            backend = value;
        } else if (cli_option(argc, argv, &i, "--device", &value, &err)) {
            device = value;
        } else if (cli_option(argc, argv, &i, "--batch", &value, &err)) {
            if (!err) err = cli_parse_int("--batch", value, 1, 1 << 16, &B);
        } else if (cli_option(argc, argv, &i, "--seq", &value, &err)) {
            if (!err) err = cli_parse_int("--seq", value, 1, 1 << 20, &T);
        } else if (cli_option(argc, argv, &i, "--batches", &value, &err)) {
            if (!err) err = cli_parse_long("--batches", value, 1, 1L << 40, &n_batches);
        } else if (cli_option(argc, argv, &i, "--precision", &value, &err)) {
            if (!err) err = tern_precision_parse(value, &precision);
        } else {
            err = tern_errorf("eval: unknown option '%s' (see 'tern eval --help')", argv[i]);
        }
    }
    if (err) return cli_fail(err);
    if (!model_dir) return cli_fail(tern_errorf("eval: --model DIR is required"));
    if (!data_path) return cli_fail(tern_errorf("eval: --data FILE is required"));

    tern_tokenizer *tok = NULL;
    tern_dataset *data = NULL;
    cli_model m = {0};
    int32_t *x = NULL, *y = NULL;
    backend = cli_backend_on_device(backend, device, backend_buf, sizeof backend_buf);
    if ((err = cli_model_load(backend, model_dir, precision, &m))) goto done;
    int context = cli_model_context(&m);
    if (!T) T = context < 1024 ? context : 1024;
    if (T > context) {
        err = tern_errorf("--seq %d exceeds the model's context of %d", T, context);
        goto done;
    }
    if ((err = cli_open_tokenizer(model_dir, &tok))) goto done;
    if ((err = tern_dataset_open(data_path, tok, (size_t)cli_model_vocab_size(&m), &data))) goto done;
    size_t whole = tern_dataset_batch_count(data, B, T);
    if (!n_batches) {
        if (!whole) {
            err = tern_errorf("%s has %zu tokens, fewer than one batch of %d x %d + 1; pass "
                              "--batches to wrap around", data_path, tern_dataset_tokens(data), B, T);
            goto done;
        }
        n_batches = (long)whole;
    }
    x = malloc((size_t)B * T * sizeof *x);
    y = malloc((size_t)B * T * sizeof *y);
    if (!x || !y) {
        err = tern_errorf("out of memory for a batch of %d x %d", B, T);
        goto done;
    }
    printf("backend: %s (%s)\n", cli_model_backend(&m), cli_model_device_name(&m));
    double sum = 0;
    for (long k = 0; k < n_batches; k++) {
        float loss;
        if ((err = tern_dataset_batch(data, (size_t)k, B, T, x, y))) goto done;
        if ((err = cli_model_forward(&m, x, y, B, T, &loss))) goto done;
        sum += loss;
        printf("batch %ld: loss %.6f\n", k, loss);
        if ((err = cli_check_stdout())) goto done;
    }
    printf("mean loss over %ld batches of %d x %d: %.6f\n", n_batches, B, T, sum / n_batches);
    err = cli_check_stdout();
done:
    free(x);
    free(y);
    cli_model_free(&m);
    tern_dataset_close(data);
    tern_tokenizer_free(tok);
    return err ? cli_fail(err) : 0;
}
