/* tern generate: continue a prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model.h"

static const char usage[] =
    "usage: tern generate --model DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K]\n"
    "                     [--seed S] [--backend cpu|cuda|opencl|interp] [--device N]\n"
    "                     [--precision fp32|bf16] [--weights q8|q8-all] [--ids] [--no-stop]\n"
    "  --tokens N        new tokens to generate (default 64)\n"
    "  --temperature T   0 is greedy decoding (default 0.8)\n"
    "  --top-k K         sample among the K likeliest tokens; 0: all (default 40)\n"
    "  --seed S          sampling seed (default 42): the same seed gives the same text\n"
    "  --weights q8      decode with the layers' matrices in 8-bit blocks (q8_0: 32 weights\n"
    "                    per f16 scale, as llama.cpp's); the tied lm head keeps the precision\n"
    "                    (more accurate); q8-all: the lm head too (faster). cpu; both\n"
    "                    families (Llama: matrices whose rows are whole blocks of 32)\n"
    "  --ids             print the generated token ids instead of text\n"
    "  --no-stop         go on past the model's end-of-sequence token (Llama family: the\n"
    "                    eos_token_id of config.json; GPT-2 never stops early)\n"
    "The model's family (GPT-2, or Llama / Qwen2 / SmolLM2) comes from DIR/config.json.\n";

typedef struct printer {
    const tern_tokenizer *tok;
    bool ids;
    int printed;
} printer;

static tern_error *print_token(void *user, const int32_t *tokens, int B) {
    printer *p = user;
    (void)B;
    if (p->ids) {
        printf(p->printed++ ? " %d" : "%d", tokens[0]);
        return ferror(stdout) ? cli_check_stdout() : NULL;
    }
    const char *bytes;
    size_t len;
    TERN_TRY(tern_tokenizer_token_bytes(p->tok, tokens[0], &bytes, &len));
    fwrite(bytes, 1, len, stdout);
    return cli_check_stdout(); /* flushed: each token appears as it is made */
}

int tern_cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *prompt = NULL, *backend = cli_default_backend(), *device = NULL;
    char backend_buf[256];
    const char *value = NULL;
    int n_new = 64;
    bool ids = false, stop_at_eos = true, q8 = false, q8_head = false;
    tern_precision precision = TERN_PRECISION_FP32;
    tern_gpt2_sampling sampling = {.temperature = 0.8f, .top_k = 40, .seed = 42};
    tern_error *err = NULL;

    for (int i = 1; i < argc && !err; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--ids")) {
            ids = true;
        } else if (!strcmp(argv[i], "--no-stop")) {
            stop_at_eos = false;
        } else if (cli_option(argc, argv, &i, "--model", &value, &err)) {
            model_dir = value;
        } else if (cli_option(argc, argv, &i, "--prompt", &value, &err)) {
            prompt = value;
        } else if (cli_option(argc, argv, &i, "--backend", &value, &err)) {
            backend = value;
        } else if (cli_option(argc, argv, &i, "--device", &value, &err)) {
            device = value;
        } else if (cli_option(argc, argv, &i, "--tokens", &value, &err)) {
            if (!err) err = cli_parse_int("--tokens", value, 0, 1 << 20, &n_new);
        } else if (cli_option(argc, argv, &i, "--temperature", &value, &err)) {
            if (!err) err = cli_parse_float("--temperature", value, 0, 100, &sampling.temperature);
        } else if (cli_option(argc, argv, &i, "--top-k", &value, &err)) {
            if (!err) err = cli_parse_int("--top-k", value, 0, 1 << 30, &sampling.top_k);
        } else if (cli_option(argc, argv, &i, "--seed", &value, &err)) {
            if (!err) err = cli_parse_u64("--seed", value, &sampling.seed);
        } else if (cli_option(argc, argv, &i, "--weights", &value, &err)) {
            if (!err && strcmp(value, "q8") && strcmp(value, "q8-all"))
                err = tern_errorf("generate: --weights takes q8 or q8-all, got '%s' (without it the weights are the precision's)", value);
            q8 = true;
            q8_head = !err && !strcmp(value, "q8-all");
        } else if (cli_option(argc, argv, &i, "--precision", &value, &err)) {
            if (!err) err = tern_precision_parse(value, &precision);
        } else {
            err = tern_errorf("generate: unknown option '%s' (see 'tern generate --help')", argv[i]);
        }
    }
    if (err) return cli_fail(err);
    if (!model_dir) return cli_fail(tern_errorf("generate: --model DIR is required"));
    if (!prompt) return cli_fail(tern_errorf("generate: --prompt TEXT is required"));

    tern_tokenizer *tok = NULL;
    cli_model m = {0};
    int32_t *ids_in = NULL;
    size_t n_ids = 0;
    if ((err = cli_open_tokenizer(model_dir, &tok))) goto done;
    if ((err = tern_tokenizer_encode(tok, prompt, strlen(prompt), true, &ids_in, &n_ids))) goto done;
    if (n_ids == 0) { /* an empty prompt starts from <|endoftext|>, as GPT-2 samples unconditionally */
        free(ids_in);
        if (!(ids_in = malloc(sizeof *ids_in))) {
            err = tern_errorf("out of memory");
            goto done;
        }
        ids_in[0] = tern_tokenizer_eot(tok);
        n_ids = 1;
    }
    backend = cli_backend_on_device(backend, device, backend_buf, sizeof backend_buf);
    if ((err = cli_model_load(backend, model_dir, precision, &m))) goto done;
    if (q8 && (err = cli_model_quantize_q8(&m, q8_head))) goto done;
    size_t V = (size_t)cli_model_vocab_size(&m), tok_V = tern_tokenizer_vocab_size(tok);
    if (V < tok_V) {
        err = tern_errorf("the model's vocabulary (%zu) is smaller than the tokenizer's (%zu)", V, tok_V);
        goto done;
    }
    /* Text needs every id the model can emit to be the tokenizer's: known now, not at the
     * first such id, half way through the output. Llama-family checkpoints round their
     * embedding up past the tokenizer (Qwen2.5: 151936 rows for 151665 ids), rows that are
     * never trained: an id there is an error when it comes. */
    if (!ids && !m.llama && V > tok_V) {
        err = tern_errorf("the model emits %zu ids but the tokenizer has %zu: its text cannot be "
                          "written (--ids prints the ids)", V, tok_V);
        goto done;
    }
    if (n_ids > (size_t)cli_model_context(&m)) {
        err = tern_errorf("the prompt has %zu tokens; the model's context is %d", n_ids, cli_model_context(&m));
        goto done;
    }

    printf("backend: %s (%s)\n", cli_model_backend(&m), cli_model_device_name(&m));
    if (!ids) fputs(prompt, stdout);
    fflush(stdout);
    printer p = {.tok = tok, .ids = ids};
    err = cli_model_generate(&m, ids_in, (int)n_ids, n_new, &sampling, stop_at_eos, print_token, &p);
    putchar('\n');
    if (!err) err = cli_check_stdout();
done:
    cli_model_free(&m);
    tern_tokenizer_free(tok);
    free(ids_in);
    return err ? cli_fail(err) : 0;
}
