/* tern info: the handlers built in (with their devices), and a model's configuration. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tern/dist.h"
#include "tern/gpt2.h"
#include "model.h"
#include "tern/handlers.h"
#include "tern/tern.h"

static const char usage[] = "usage: tern info [--model DIR]\n";

/* Opens each built-in handler's device to name it; a handler whose device is missing (no
 * GPU, no driver) says why. */
static void print_handlers(void) {
    static const char *const all[] = {"cpu", "cuda", "opencl", "metal", "interp"};
    printf("handlers:\n");
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const tern_ops *ops = tern_handler_ops(all[i]);
        if (!ops) {
            printf("  %-7s not built in\n", all[i]);
            continue;
        }
        tern_dev *dev = NULL;
        tern_error *err = ops->open(NULL, &dev);
        const char *name = NULL;
        if (!err) err = ops->device_name(dev, &name);
        if (err) printf("  %-7s built in; no device: %s\n", all[i], tern_error_message(err));
        else printf("  %-7s built in; device: %s\n", all[i], name);
        tern_error_free(err);
        char list[4096];
        tern_error *list_err = tern_handler_list_devices(all[i], list, sizeof list);
        for (char *line = list; !list_err && *line;) { /* each device, indented */
            char *end = strchr(line, '\n');
            printf("          OpenCL device %.*s\n", end ? (int)(end - line) : (int)strlen(line), line);
            line = end ? end + 1 : line + strlen(line);
        }
        tern_error_free(list_err);
        if (dev) tern_error_free(ops->close(dev));
    }
}

/* The collective engines of multi-process training (docs/distributed.md). */
static void print_distributed(void) {
    const char *mpi = tern_dist_mpi_library();
    printf("distributed training (tern train --procs N, mpirun):\n");
    if (mpi) printf("  MPI     built in (%s): cpu and opencl ranks\n", mpi);
    else printf("  MPI     not built in: cpu and opencl train in one process\n");
    int version = 0;
    tern_error *err = tern_dist_nccl_version(&version);
    if (err) printf("  NCCL    not available: %s\n", tern_error_message(err));
    else printf("  NCCL    %d.%d.%d (loaded at run time): cuda ranks\n", version / 10000,
                version / 100 % 100, version % 100);
    tern_error_free(err);
}

/* A Llama-family config: its family, shapes, rotary settings and parameter count. */
static int print_llama(const char *dir, const char *path) {
    tern_llama_config c;
    tern_error *err = tern_llama_config_read(path, &c);
    if (err) return cli_fail(err);
    printf("model: %s (%s)\n", dir, tern_llama_family_name(c.family));
    printf("  layers %d, heads %d (key/value heads %d, head size %d), channels %d, MLP %d, context %d, "
           "vocabulary %d, rms-norm eps %g\n", c.n_layer, c.n_head, c.n_kv_head, c.head_dim, c.hidden,
           c.intermediate, c.max_seq, c.vocab_size, c.rms_eps);
    printf("  rope theta %g, scaling %s; embeddings %s; biases:%s%s%s%s\n", c.rope_theta,
           c.rope_scaling.llama3 ? "llama3" : "none", c.tie_word_embeddings ? "tied" : "untied",
           c.qkv_bias ? " q/k/v" : "", c.o_bias ? " o" : "", c.mlp_bias ? " mlp" : "",
           c.qkv_bias || c.o_bias || c.mlp_bias ? "" : " none");
    printf("  parameters: %lld\n", (long long)tern_llama_config_param_count(&c));
    return 0;
}

int tern_cmd_info(int argc, char **argv) {
    const char *model_dir = NULL, *value = NULL;
    tern_error *err = NULL;
    for (int i = 1; i < argc && !err; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (cli_option(argc, argv, &i, "--model", &value, &err)) {
            model_dir = value;
        } else {
            err = tern_errorf("info: unknown option '%s'", argv[i]);
        }
    }
    if (err) return cli_fail(err);

    printf("tern %s\n", tern_version());
    print_handlers();
    print_distributed();
    if (!model_dir) return 0;

    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    bool llama = false;
    if ((err = cli_model_is_llama(model_dir, &llama))) return cli_fail(err);
    if (llama) return print_llama(model_dir, path);
    tern_gpt2_config cfg;
    if ((err = tern_gpt2_config_read(path, &cfg))) return cli_fail(err);
    printf("model: %s (gpt2)\n", model_dir);
    printf("  layers %d, heads %d, channels %d, context %d, vocabulary %d, layer-norm eps %g\n",
           cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.max_seq, cfg.vocab_size, cfg.ln_eps);
    printf("  parameters: %zu\n", tern_gpt2_num_params(&cfg));
    return 0;
}
