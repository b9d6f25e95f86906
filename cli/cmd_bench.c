/* tern bench: the timings behind docs/PERFORMANCE.md (bench/ holds the scripts that run it).
 *
 *   tern bench train    a training step (forward, backward, AdamW) on random tokens
 *   tern bench generate generation with the KV cache: prefill, then ms per new token
 *
 * Either model family: --init names a GPT-2 or a Llama-family shape (random weights), --model
 * a folder whose config.json picks the family (cli/model.h). Each prints one summary line
 * starting with "bench:" that the scripts parse, the same for both families. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "model.h"
#include "tern/rng.h"

static const char usage[] =
    "usage: tern bench train    [--init CONFIG | --model DIR] [--batch B] [--seq T] [--steps N]\n"
    "                           [--warmup N] [--backend ...] [--device N] [--precision fp32|bf16]\n"
    "                           [--logit-rows N] [--recompute gelu,layernorm|none]\n"
    "       tern bench generate [--init CONFIG | --model DIR] [--batch B] [--prompt-tokens N] [--tokens N]\n"
    "                           [--warmup N] [--backend ...] [--device N] [--precision fp32|bf16]\n"
    "                           [--weights q8|q8-all]\n"
    "  CONFIG: gpt2, gpt2-medium, ... (tern_gpt2_config_named) or a Llama-family shape:\n"
    "  smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, llama-tiny. defaults: --init gpt2 (124M,\n"
    "  random weights), batch 4 (generate: 1), seq 64, steps 5, warmup 1, prompt-tokens 16,\n"
    "  tokens 64; generation is greedy, decodes the batch's B prompts together (tokens/s: B\n"
    "  per step) and never stops at an eos token. --logit-rows and --recompute trade a GPT-2\n"
    "  training step's memory for time (tern_gpt2_set_memory; default: chosen, none).\n";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct bench_options {
    const char *init, *model_dir, *backend;
    int B, T, steps, warmup, prompt_tokens, tokens;
    tern_precision precision;
    const char *weights;     /* generate: NULL (the precision's), "q8" or "q8-all" */
    tern_gpt2_memory memory; /* training steps only */
} bench_options;

static tern_error *open_model(const bench_options *o, cli_model *m) {
    if (o->model_dir) return cli_model_load(o->backend, o->model_dir, o->precision, m);
    return cli_model_init(o->backend, o->init, 1, o->precision, m);
}

static void random_tokens(int32_t *ids, size_t n, int V, uint64_t seed) {
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)(tern_random_bits(seed, (uint32_t)i) % (uint32_t)V);
}

/* Weights a token passes through in matrix products: GPT-2 counts every parameter (as its
 * published FLOP figures do); the Llama family counts its projections and the output head
 * [V, C], tied or not (the embedding lookup is no product; the norm gains are left out). */
static double matmul_weights(const cli_model *m) {
    if (!m->llama) return (double)cli_model_param_count(m);
    const tern_llama_config *c = tern_llama_get_config(m->llama);
    double q = (double)c->n_head * c->head_dim, kv = (double)c->n_kv_head * c->head_dim;
    double layer = c->hidden * (2 * q + 2 * kv) + 3.0 * c->hidden * c->intermediate; /* q, o; k, v; MLP */
    return c->n_layer * layer + (double)c->vocab_size * c->hidden;
}

/* FLOPs of one training step: 6 per weight per token for the matrix products (forward and
 * backward), plus attention's QK^T and AV, 6 * 2 * B * T * T * (heads * head size) per layer
 * counted over the full square (as PyTorch's and llm.c's MFU figures do). */
static double train_flops(const cli_model *m, int B, int T) {
    double tokens = (double)B * T;
    int n_layer, attn_width;
    if (m->llama) {
        const tern_llama_config *c = tern_llama_get_config(m->llama);
        n_layer = c->n_layer, attn_width = c->n_head * c->head_dim;
    } else {
        const tern_gpt2_config *c = tern_gpt2_get_config(m->gpt2);
        n_layer = c->n_layer, attn_width = c->n_embd;
    }
    return 6.0 * matmul_weights(m) * tokens + 12.0 * n_layer * (double)B * T * T * attn_width;
}

/* The Llama family's line naming the shape (GPT-2's output stays as it was). */
static void print_model(const cli_model *m, tern_precision precision) {
    if (!m->llama) return;
    char shape[256];
    cli_model_describe(m, shape, sizeof shape);
    printf("model: %s; %s\n", shape, tern_precision_name(precision));
}

static tern_error *bench_train(const bench_options *o) {
    cli_model m;
    TERN_TRY(open_model(o, &m));
    size_t n = (size_t)o->B * o->T;
    int32_t *x = NULL;
    double *times = NULL;
    tern_error *err = NULL;
    if (m.llama && o->memory.logit_rows)
        err = tern_errorf("bench: --logit-rows is GPT-2's (the Llama family's loss takes every row at once)");
    else if (m.llama && o->T > cli_model_context(&m))
        err = tern_errorf("bench: --seq %d exceeds the model's context of %d", o->T, cli_model_context(&m));
    else
        err = cli_model_attach(&m, NULL, &o->memory, false); /* GPT-2's memory settings */
    if (err) goto done;
    x = malloc((n + 1) * sizeof *x);
    times = malloc((size_t)o->steps * sizeof *times);
    if (!x || !times) {
        err = tern_errorf("out of memory");
        goto done;
    }
    random_tokens(x, n + 1, cli_model_vocab_size(&m), 7);
    tern_gpt2_adamw hp = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                          .weight_decay = 0.1f, .clip = 1.0f, .decay_all = true};
    printf("backend: %s (%s)\n", cli_model_backend(&m), cli_model_device_name(&m));
    print_model(&m, o->precision);
    float loss = 0;
    for (int s = -o->warmup; s < o->steps; s++) {
        double t0 = now();
        if ((err = cli_model_zero_grad(&m)) ||
            (err = cli_model_forward_backward(&m, x, x + 1, o->B, o->T, 1.0f, &loss)) ||
            (err = cli_model_update(&m, &hp, NULL)))
            goto done;
        /* update synchronises (it reads the gradient norm back), so the clock is honest */
        double dt = now() - t0;
        if (s >= 0) times[s] = dt;
        printf("step %d: %.2f ms, loss %.4f\n", s, dt * 1e3, loss);
    }
    double med = median(times, o->steps), flops = train_flops(&m, o->B, o->T);
    printf("bench: train %s %s B=%d T=%d: median %.2f ms/step, %.0f tokens/s, %.2f TFLOP/s\n",
           cli_model_backend(&m), tern_precision_name(o->precision), o->B, o->T, med * 1e3,
           (double)n / med, flops / med / 1e12);
done:
    free(x);
    free(times);
    cli_model_free(&m);
    return err;
}

typedef struct token_clock {
    double *stamps;
    int n, cap;
} token_clock;

static tern_error *stamp(void *user, const int32_t *tokens, int B) {
    (void)tokens, (void)B;
    token_clock *c = user;
    if (c->n < c->cap) c->stamps[c->n++] = now();
    return NULL;
}

/* B prompts [B, T0] continued together (cli_model_generate takes one). */
static tern_error *generate_batch(cli_model *m, const int32_t *prompt, int B, int T0, int n_new,
                                  const tern_gpt2_sampling *s, tern_gpt2_on_token on_token, void *user) {
    if (m->llama) return tern_llama_generate(m->llama, prompt, B, T0, n_new, s, false, on_token, user);
    return tern_gpt2_generate(m->gpt2, prompt, B, T0, n_new, s, on_token, user);
}

static tern_error *bench_generate(const bench_options *o) {
    cli_model m;
    TERN_TRY(open_model(o, &m));
    bool q8 = o->weights != NULL, q8_head = q8 && !strcmp(o->weights, "q8-all");
    if (q8) {
        tern_error *qerr = cli_model_quantize_q8(&m, q8_head);
        if (qerr) {
            cli_model_free(&m);
            return qerr;
        }
    }
    size_t n_prompt = (size_t)o->B * o->prompt_tokens;
    int32_t *prompt = malloc(n_prompt * sizeof *prompt);
    token_clock c = {.stamps = malloc((size_t)(o->tokens + 1) * sizeof(double)), .cap = o->tokens + 1};
    double *steps = malloc((size_t)o->tokens * sizeof *steps);
    tern_error *err = NULL;
    if (!prompt || !c.stamps || !steps) {
        err = tern_errorf("out of memory");
        goto done;
    }
    random_tokens(prompt, n_prompt, cli_model_vocab_size(&m), 11);
    tern_gpt2_sampling greedy = {.temperature = 0};
    printf("backend: %s (%s)\n", cli_model_backend(&m), cli_model_device_name(&m));
    print_model(&m, o->precision);
    double first = 0, med = 0;
    int n_steps = 0;
    for (int r = -o->warmup; r < 1; r++) { /* warm-up runs, then the measured one */
        c.n = 0;
        double t0 = now();
        /* never stopping at eos: every run makes --tokens tokens */
        if ((err = generate_batch(&m, prompt, o->B, o->prompt_tokens, o->tokens, &greedy, stamp, &c)))
            goto done;
        first = c.stamps[0] - t0;
        n_steps = c.n - 1;
        for (int i = 0; i < n_steps; i++) steps[i] = c.stamps[i + 1] - c.stamps[i];
    }
    if (n_steps < 1) {
        err = tern_errorf("bench generate needs --tokens of at least 2");
        goto done;
    }
    med = median(steps, n_steps);
    /* With several steps a replayable section (the handler's replay_steps) the tokens come
     * in bursts: K - 1 of every K handed over one after another, microseconds apart, where
     * a step takes tens of them at least (a third of the intervals under 2 us is the
     * test). Then a step is the mean. */
    double mean = (c.stamps[n_steps] - c.stamps[0]) / n_steps;
    int short_ones = 0;
    for (int i = 0; i < n_steps; i++) short_ones += steps[i] < 2e-6;
    bool bursts = 3 * short_ones >= n_steps;
    double per = bursts ? mean : med;
    /* bytes a decode step must read: every weight of a product once, in the compute dtype */
    double elem = o->precision == TERN_PRECISION_BF16 ? 2 : 4, q8_elem = 34.0 / 32.0;
    double weight_bytes = matmul_weights(&m) * elem;
    if (q8) { /* the layers' matrices in q8_0; the tied lm head [V, C] too with q8-all */
        int C = m.llama ? tern_llama_get_config(m.llama)->hidden : tern_gpt2_get_config(m.gpt2)->n_embd;
        double head = (double)cli_model_vocab_size(&m) * C; /* (a Llama matrix with rows of
                                                             * part blocks stays float: none
                                                             * at the named shapes) */
        weight_bytes = (matmul_weights(&m) - head) * q8_elem + head * (q8_head ? q8_elem : elem);
    }
    /* a step makes one token of each sequence: "ms/token" at batch 1, "ms/step" above */
    char mean_note[48] = "";
    if (!bursts) snprintf(mean_note, sizeof mean_note, "; mean %.3f ms", mean * 1e3);
    printf("bench: generate %s %s%s%s batch=%d prompt=%d: prefill+first token %.2f ms, %s %.3f ms/%s "
           "(%.0f tokens/s, %.0f GB/s of weights%s)\n",
           cli_model_backend(&m), tern_precision_name(o->precision), q8 ? " weights " : "", q8 ? o->weights : "",
           o->B, o->prompt_tokens, first * 1e3, bursts ? "in bursts, mean" : "median",
           per * 1e3, o->B == 1 ? "token" : "step", o->B / per, weight_bytes / per / 1e9, mean_note);
done:
    free(prompt);
    free(c.stamps);
    free(steps);
    cli_model_free(&m);
    return err;
}

int tern_cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2;
    }
    bench_options o = {.init = "gpt2", .backend = cli_default_backend(), .B = 0, .T = 64,
                       .steps = 5, .warmup = 1, .prompt_tokens = 16, .tokens = 64,
                       .precision = TERN_PRECISION_FP32};
    const char *mode = argv[1], *v, *device = NULL;
    char backend_buf[256];
    tern_error *err = NULL;
    for (int i = 2; i < argc && !err; i++) {
        const char *a = argv[i];
        if (cli_option(argc, argv, &i, "--init", &v, &err)) o.init = v;
        else if (cli_option(argc, argv, &i, "--model", &v, &err)) o.model_dir = v;
        else if (cli_option(argc, argv, &i, "--backend", &v, &err)) o.backend = v;
        else if (cli_option(argc, argv, &i, "--device", &v, &err)) device = v;
        else if (cli_option(argc, argv, &i, "--batch", &v, &err)) { if (!err) err = cli_parse_int(a, v, 1, 1 << 16, &o.B); }
        else if (cli_option(argc, argv, &i, "--seq", &v, &err)) { if (!err) err = cli_parse_int(a, v, 1, 1 << 20, &o.T); }
        else if (cli_option(argc, argv, &i, "--steps", &v, &err)) { if (!err) err = cli_parse_int(a, v, 1, 1 << 20, &o.steps); }
        else if (cli_option(argc, argv, &i, "--warmup", &v, &err)) { if (!err) err = cli_parse_int(a, v, 0, 1 << 20, &o.warmup); }
        else if (cli_option(argc, argv, &i, "--prompt-tokens", &v, &err)) { if (!err) err = cli_parse_int(a, v, 1, 1 << 20, &o.prompt_tokens); }
        else if (cli_option(argc, argv, &i, "--tokens", &v, &err)) { if (!err) err = cli_parse_int(a, v, 1, 1 << 20, &o.tokens); }
        else if (cli_option(argc, argv, &i, "--precision", &v, &err)) { if (!err) err = tern_precision_parse(v, &o.precision); }
        else if (cli_option(argc, argv, &i, "--weights", &v, &err)) {
            if (!err && strcmp(v, "q8") && strcmp(v, "q8-all"))
                err = tern_errorf("bench: --weights takes q8 or q8-all, got '%s'", v);
            o.weights = v;
        }
        else if (cli_option(argc, argv, &i, "--logit-rows", &v, &err)) { if (!err) err = cli_parse_int(a, v, 1, 1 << 30, &o.memory.logit_rows); }
        else if (cli_option(argc, argv, &i, "--recompute", &v, &err)) { if (!err) err = cli_parse_recompute(v, &o.memory); }
        else err = tern_errorf("bench: unknown option '%s'", a);
    }
    o.backend = cli_backend_on_device(o.backend, device, backend_buf, sizeof backend_buf);
    if (!o.B) o.B = strcmp(mode, "generate") ? 4 : 1; /* --batch's default */
    if (!err) {
        if (!strcmp(mode, "train")) err = bench_train(&o);
        else if (!strcmp(mode, "generate")) err = bench_generate(&o);
        else err = tern_errorf("bench: unknown benchmark '%s' (train or generate)", mode);
    }
    return err ? cli_fail(err) : 0;
}
