/* tern train: train a model (GPT-2 or the Llama family) from scratch or fine-tune one, with
 * checkpoints and resume. */
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "train_guard.h"
#include "train_run.h"
#include "train_support.h"
#include "tern/data.h"
#include "tern/dist.h"
#include "tern/gpt2.h"

static const char usage[] =
    "usage: tern train (--model DIR | --init CONFIG) --data FILE --steps N | --resume DIR\n"
    "                  [--batch B] [--seq T] [--lr X] [--warmup N] [--schedule constant|cosine]\n"
    "                  [--wd X] [--beta1 X] [--beta2 X] [--eps X] [--clip X] [--grad-accum N]\n"
    "                  [--seed S] [--out DIR] [--save-every N] [--stop-after N] [--val FILE]\n"
    "                  [--val-every N] [--val-batches N] [--backend cpu|cuda|opencl|interp]\n"
    "                  [--device N] [--precision fp32|bf16] [--procs N] [--zero1]\n"
    "                  [--recompute gelu,layernorm|none]\n"
    "  --init CONFIG   a fresh model: gpt2 (124M), gpt2-medium, -large, -xl, small, mini, tiny;\n"
    "                  Llama family: smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, llama-tiny\n"
    "  --model DIR     a GPT-2 or a Llama-family folder (config.json's model_type says which)\n"
    "  --resume DIR    continue a run from the checkpoint in DIR (written by --out), with the\n"
    "                  run's settings and data (DIR/run.json); a setting given differently is\n"
    "                  an error, except --steps, --stop-after, --save-every, --val,\n"
    "                  --val-every, --val-batches, --backend, --procs, --zero1, --recompute\n"
    "                  and --out\n"
    "  --steps N       optimizer steps in all (a resumed run counts the steps already done)\n"
    "  --stop-after N  stop after step N with a checkpoint (the schedule stays that of --steps),\n"
    "                  to continue later with --resume\n"
    "  defaults: batch 4, seq 64 (at most the context), lr 3e-4, warmup 0, schedule constant,\n"
    "  wd 0, beta1 0.9, beta2 0.95, eps 1e-8, clip 1 (0: none), grad-accum 1, seed 1337,\n"
    "  val-every 0 (never; else also at the end), val-batches 20, save-every 0 (only at the end)\n"
    "  --no-decay-1d   weight decay on matrices and embeddings only (default: every tensor,\n"
    "                  as PyTorch's AdamW)\n"
    "  --save-dtype D  weights in checkpoints as f32 (default; resumes exactly) or bf16 (half\n"
    "                  the size; a resume continues from the rounded weights)\n"
    "  --procs N       data-parallel training on N ranks of this host (cuda: one GPU each, NCCL;\n"
    "                  cpu, opencl: MPI); --batch is per rank, the global batch is N times it.\n"
    "                  Under mpirun, every rank is one process already (docs/distributed.md)\n"
    "  --zero1         ZeRO-1: each of the ranks keeps AdamW's moments (and in bf16 the f32\n"
    "                  master weights) for 1/ranks of the parameters only, then the ranks\n"
    "                  gather the updated weights; the same steps, less memory. Needs several\n"
    "                  ranks; checkpoints stay whole and resume with or without it\n"
    "  --recompute L   gelu: less memory for some more time, the GELU outputs recomputed in the\n"
    "                  backward pass instead of kept for every layer; layernorm: the layer norms'\n"
    "                  backward from their inputs, their outputs recomputed (the same memory as\n"
    "                  the default, which needs layer-norm weights away from zero, for a little\n"
    "                  more time; every choice's memory and cost in docs/PERFORMANCE.md)\n"
    "A checkpoint folder is locked while a run writes it. SIGINT or SIGTERM stops after the\n"
    "step with a checkpoint; a second signal stops at once.\n";

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static tern_error *parse_args(int argc, char **argv, train_options *o) {
    const char *v = NULL;
    tern_error *err = NULL;
    for (int i = 1; i < argc && !err; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->help = true;
        } else if (!strcmp(a, "--zero1")) {
            o->zero1 = true;
        } else if (train_setting_option(argc, argv, &i, o, &err)) { /* the run's settings */
        } else if (cli_option(argc, argv, &i, "--model", &v, &err)) { o->model_dir = v;
        } else if (cli_option(argc, argv, &i, "--init", &v, &err)) { o->init = v;
        } else if (cli_option(argc, argv, &i, "--resume", &v, &err)) { o->resume = v;
        } else if (cli_option(argc, argv, &i, "--data", &v, &err)) { o->data = v;
        } else if (cli_option(argc, argv, &i, "--val", &v, &err)) { o->val = v;
        } else if (cli_option(argc, argv, &i, "--out", &v, &err)) { o->out = v;
        } else if (cli_option(argc, argv, &i, "--backend", &v, &err)) {
            o->backend = v;
            o->backend_given = true;
        } else if (cli_option(argc, argv, &i, "--device", &v, &err)) { o->device = v;
        } else if (cli_option(argc, argv, &i, "--stop-after", &v, &err)) {
            if (!err) err = cli_parse_int(a, v, 1, 1 << 30, &o->stop_after);
        } else if (cli_option(argc, argv, &i, "--procs", &v, &err)) {
            if (!err) err = cli_parse_int(a, v, 1, 4096, &o->procs);
        } else if (cli_option(argc, argv, &i, "--recompute", &v, &err)) {
            if (!err) err = cli_parse_recompute(v, &o->memory);
        } else {
            err = tern_errorf("train: unknown option '%s' (see 'tern train --help')", a);
        }
    }
    if (err || o->help) return err;
    int sources = !!o->model_dir + !!o->init + !!o->resume;
    if (sources != 1) return tern_errorf("train: give exactly one of --model, --init and --resume");
    if (o->resume) return NULL; /* --data and --steps come from the run when not given */
    if (!o->data) return tern_errorf("train: --data FILE is required");
    if (!o->steps) return tern_errorf("train: --steps N is required");
    return NULL;
}

/* Mean loss over the first n batches of the validation data. */
static tern_error *validate(cli_model *m, const tern_dataset *val, const train_options *o,
                            int32_t *x, int32_t *y, float *out) {
    double sum = 0;
    for (int k = 0; k < o->val_batches; k++) {
        float loss;
        TERN_TRY(tern_dataset_batch(val, (size_t)k, o->B, o->T, x, y));
        TERN_TRY(cli_model_forward(m, x, y, o->B, o->T, &loss));
        sum += loss;
    }
    *out = (float)(sum / o->val_batches);
    return NULL;
}

/* How a run ended, beyond its error. */
typedef struct train_end {
    int signal; /* the SIGINT or SIGTERM that stopped it, or 0 */
    int step;   /* the last step taken */
    bool saved; /* that step is checkpointed in o->out */
} train_end;

/* Whether the job stops after this step: a signal reached this rank, or (with ranks) any
 * rank; every rank must stop after the same step, or the others would wait in the next
 * step's gradient sum. *sig: the signal (this rank's, else the one the others got). */
static tern_error *stop_requested(const train_options *o, cli_model *m, int *sig) {
    int mine = train_signal_pending();
    float sum = (float)mine; /* 2 (SIGINT) or 15 (SIGTERM) from each signalled rank */
    if (o->world > 1) TERN_TRY(cli_model_sum_across_ranks(m, &sum));
    *sig = mine ? mine : sum == 0 ? 0 : (int)sum % SIGTERM == 0 ? SIGTERM : SIGINT;
    return NULL;
}

/* The error of a failed step, saying what the checkpoint folder still holds. */
static tern_error *step_failed(tern_error *err, const train_options *o, int step, int kept) {
    err = tern_error_wrap(err, "step %d", step);
    if (!o->out || o->rank != 0) return err;
    tern_error *full = kept > 0 ? tern_errorf("%s (%s keeps its checkpoint of step %d)",
                                              tern_error_message(err), o->out, kept)
                                : tern_errorf("%s (nothing saved in %s)", tern_error_message(err), o->out);
    tern_error_free(err);
    return full;
}

static tern_error *train(train_options *o, tern_dist *dist, const train_saved_run *saved,
                         train_end *result) {
    cli_model model = {0}, *m = &model;
    tern_tokenizer *tok = NULL;
    tern_dataset *data = NULL, *val = NULL;
    int32_t *x = NULL, *y = NULL;
    train_history hist = {0};
    progress bar = {0};
    train_data_id data_id = {0};
    tern_error *err = NULL;
    /* Rank 0 alone validates, prints and writes checkpoints; the others wait for it in the
     * next step's gradient sum. */
    bool lead = o->rank == 0;

    /* --out first: a folder that cannot be written is an error now, not after the run. */
    if (lead && o->out && (err = train_prepare_out(o->out, o->resume))) goto done;
    bool out_is_resumed = o->resume && o->out && train_same_folder(o->out, o->resume);
    if (lead && o->resume && !out_is_resumed && (err = train_check_not_written(o->resume))) goto done;
    const char *tokenizer_dir = o->resume ? o->resume : o->model_dir;
    if ((err = cli_open_tokenizer(tokenizer_dir, &tok))) goto done;
    if ((err = train_open_model(o, dist, m, &hist))) goto done;
    train_release_resume_lock();
    int context = cli_model_context(m);
    size_t vocab = (size_t)cli_model_vocab_size(m);
    if (o->T > context) {
        err = tern_errorf("--seq %d exceeds the model's context of %d", o->T, context);
        goto done;
    }
    if ((err = tern_dataset_open(o->data, tok, vocab, &data))) goto done;
    if (lead) {
        train_data_identify(data, &data_id);
        if (o->resume && (err = train_run_check_data(saved, o->data, &data_id))) goto done;
    }
    if (lead && o->val && (err = tern_dataset_open(o->val, tok, vocab, &val)))
        goto done;
    size_t batch_tokens = (size_t)o->B * o->T;
    x = malloc(batch_tokens * sizeof *x);
    y = malloc(batch_tokens * sizeof *y);
    if (!x || !y) {
        err = tern_errorf("out of memory for a batch of %d x %d", o->B, o->T);
        goto done;
    }

    int start = cli_model_step(m);
    /* --stop-after: the same run (schedule and all), cut short with a checkpoint to resume */
    int end = o->stop_after && o->stop_after < o->steps ? o->stop_after : o->steps;
    if (end <= start) {
        err = tern_errorf("--stop-after %d: the run is at step %d already", o->stop_after, start);
        goto done;
    }
    int kept = out_is_resumed ? start : 0; /* the step checkpointed in o->out */
    result->step = start;
    if (lead) {
        char *shown = o->resume ? tern_printable_copy(saved->present ? saved->changes : o->resume) : NULL;
        if (o->resume && !saved->present)
            printf("resume: %s has no run.json (from an older tern): the settings are the ones "
                   "given now\n", shown ? shown : "?");
        else if (o->resume && saved->changes[0])
            printf("resume: the run's settings, changed: %s\n", shown ? shown : "?");
        else if (o->resume)
            printf("resume: the run's settings, unchanged\n");
        free(shown);
        char described[256];
        cli_model_describe(m, described, sizeof described);
        printf("backend: %s (%s)\n", cli_model_backend(m), cli_model_device_name(m));
        printf("model: %s; %s\n", described, tern_precision_name(o->precision));
        if (o->world > 1)
            printf("ranks: %d (%s); global batch %d x %d\n", o->world,
                   tern_dist_engine_for(cli_model_backend(m)) == TERN_DIST_ENGINE_NCCL ? "NCCL" : "MPI",
                   o->B * o->world, o->T);
        if (o->zero1)
            printf("ZeRO-1: optimizer state sharded over %d ranks, %.1f MB per rank\n", o->world,
                   (double)cli_model_optimizer_bytes(m) / 1e6);
        printf("data: %zu tokens; batch %d x %d x %d accumulated; steps %d to %d\n",
               tern_dataset_tokens(data), o->B * o->world, o->T, o->grad_accum, start + 1, o->steps);
        fflush(stdout);
        progress_start(&bar, start, o->steps);
    }

    int current = start; /* the step being taken, for the error of a failed one */
    for (int step = start; step < end; step++) {
        current = step + 1;
        double t0 = now_seconds();
        float lr = train_lr(o, step), loss_sum = 0, norm = 0;
        float scale = 1.0f / o->grad_accum;
        if ((err = cli_model_zero_grad(m))) goto failed;
        for (int micro = 0; micro < o->grad_accum; micro++) {
            size_t k = (size_t)step * o->grad_accum + micro; /* the data position */
            float loss;
            /* Batch k of the global B*world rows; this rank's rows r*B .. r*B+B-1 of it are
             * batch k*world + r of B rows (the data is read the same way, wrap included). */
            if ((err = tern_dataset_batch(data, k * (size_t)o->world + (size_t)o->rank, o->B, o->T, x, y)))
                goto failed;
            if ((err = cli_model_forward_backward(m, x, y, o->B, o->T, scale, &loss))) goto failed;
            if (!isfinite(loss)) {
                err = tern_errorf("the loss is %g: training diverged", loss);
                goto failed;
            }
            loss_sum += loss;
        }
        tern_gpt2_adamw hp = o->adamw;
        hp.lr = lr;
        if (o->hook.diverge_at == step + 1) hp.lr = FLT_MAX; /* test hook: weights blow up */
        /* a non-finite gradient norm is an error here, before any weight changes */
        if ((err = cli_model_update(m, &hp, &norm))) goto failed;
        result->step = step + 1;
        double dt = now_seconds() - t0;
        float loss = loss_sum / o->grad_accum;
        float val_loss = NAN;
        bool last = step + 1 == o->steps;
        if (val && o->val_every && ((step + 1) % o->val_every == 0 || last)) {
            if ((err = validate(m, val, o, x, y, &val_loss))) goto failed;
        }
        if ((err = train_history_add(&hist, step + 1, loss, val_loss))) goto failed;
        if (o->hook.stop_at == step + 1) raise(SIGSTOP); /* test hook: a pause at a known step */
        int stop = 0;
        if ((err = stop_requested(o, m, &stop))) goto failed;
        bool save = o->out && (step + 1 == end || stop ||
                               (o->save_every && (step + 1) % o->save_every == 0));
        if (lead) {
            progress_clear(&bar);
            printf("step %d/%d | loss %.4f", step + 1, o->steps, loss);
            if (!isnan(val_loss)) printf(" | val %.4f", val_loss);
            printf(" | lr %.3e | norm %.3f | %.1f ms | %.0f tok/s\n", lr, norm, dt * 1e3,
                   (double)batch_tokens * o->grad_accum * o->world / dt);
            fflush(stdout);
            progress_update(&bar, step + 1, loss);
        }
        /* ZeRO-1: rank 0's checkpoint gathers every rank's part of the optimizer state, so
         * every rank takes part in it. */
        if (save && (lead || o->zero1)) {
            if ((err = train_save_checkpoint(o, m, tokenizer_dir, &hist, &data_id))) goto failed;
            kept = step + 1;
            result->saved = true;
            if (lead) {
                progress_clear(&bar);
                char *shown = tern_printable_copy(o->out);
                printf("checkpoint: %s (step %d)\n", shown ? shown : "?", step + 1);
                free(shown);
                fflush(stdout);
            }
        } else {
            result->saved = false;
        }
        if (stop) {
            result->signal = stop;
            break;
        }
    }
    goto done;
failed:
    err = step_failed(err, o, current, kept);
done:
    progress_clear(&bar);
    train_history_free(&hist);
    free(x);
    free(y);
    tern_dataset_close(data);
    tern_dataset_close(val);
    cli_model_free(m);
    tern_tokenizer_free(tok);
    return err;
}

/* --procs N: this process starts the N ranks (the same command without --procs) and waits. */
static int launch_ranks(const train_options *o, int argc, char **argv) {
    if (tern_dist_launched())
        return cli_fail(tern_errorf("train: --procs inside a job that is already started (by "
                                    "mpirun or --procs): drop one of them"));
    char program[4096];
    ssize_t n = readlink("/proc/self/exe", program, sizeof program - 1);
    if (n <= 0) return cli_fail(tern_errorf("train: --procs: cannot find this program's path"));
    program[n] = 0;
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) return cli_fail(tern_errorf("out of memory"));
    int k = 0;
    args[k++] = program;
    args[k++] = "train";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--procs")) {
            i++; /* and its value */
            continue;
        }
        args[k++] = argv[i];
    }
    tern_dist_launch_options lo = {.procs = o->procs, .program = program, .argv = args,
                                   .engine = tern_dist_engine_for(o->backend), .grace_seconds = 10};
    tern_error *err = tern_dist_launch(&lo);
    free(args);
    return err ? cli_fail(err) : 0;
}

/* Each rank of a cuda job takes the GPU of its rank on the host, unless --device says. */
static void pick_gpu(const tern_dist *dist, train_options *o, char *index, size_t index_cap, char *buf, size_t cap) {
    if (!o->device && tern_dist_world(dist) > 1 && tern_dist_engine_for(o->backend) == TERN_DIST_ENGINE_NCCL) {
        snprintf(index, index_cap, "%d", tern_dist_local_rank(dist));
        o->device = index;
    }
    o->backend = cli_backend_on_device(o->backend, o->device, buf, cap);
}

/* The line a run stopped by a signal ends with, on stderr. */
static void report_stop(const train_options *o, const train_end *e) {
    if (o->rank != 0) return;
    const char *name = e->signal == SIGINT ? "SIGINT" : "SIGTERM";
    char *out = o->out ? tern_printable_copy(o->out) : NULL;
    if (e->saved && out)
        fprintf(stderr, "tern: stopped by %s after step %d: the checkpoint is in %s (continue "
                "with: tern train --resume %s)\n", name, e->step, out, out);
    else
        fprintf(stderr, "tern: stopped by %s after step %d; nothing saved (no --out)\n", name,
                e->step);
    free(out);
}

int tern_cmd_train(int argc, char **argv) {
    train_options o;
    train_options_default(&o);
    o.backend = cli_default_backend();
    const char *env_backend = getenv("TERN_BACKEND");
    o.backend_given = env_backend && *env_backend;
    tern_error *err = parse_args(argc, argv, &o);
    if (!err) err = train_hook_parse(getenv("TERN_TEST_HOOK"), &o.hook);
    if (err) return cli_fail(err);
    if (o.help) {
        fputs(usage, stdout);
        return 0;
    }
    if (o.procs > 1) return launch_ranks(&o, argc, argv);
    tern_dist *dist = NULL;
    if ((err = tern_dist_open(&dist))) return cli_fail(err);
    o.rank = tern_dist_rank(dist);
    o.world = tern_dist_world(dist);
    if (o.zero1 && o.world < 2) {
        tern_dist_close(dist);
        return cli_fail(tern_errorf("train: --zero1 shards the optimizer state across ranks: run "
                                    "it with --procs N or under mpirun (this job has 1 rank)"));
    }
    train_saved_run saved = {0};
    if (o.resume) {
        if (!o.out) o.out = o.resume;
        err = train_run_restore(&o, o.resume, &saved);
        if (err) err = tern_error_wrap(err, "resuming from %s", o.resume);
    }
    train_end end = {0};
    char gpu_index[16], backend_buf[256];
    if (!err) {
        pick_gpu(dist, &o, gpu_index, sizeof gpu_index, backend_buf, sizeof backend_buf);
        train_signals_install();
        err = train(&o, dist, &saved, &end);
    }
    if (err && o.world > 1) {
        /* One line naming the rank, then every rank stops: none is left waiting. */
        cli_fail(tern_error_wrap(err, "rank %d of %d", o.rank, o.world));
        tern_dist_abort(dist, 1);
    }
    train_saved_run_free(&saved);
    tern_dist_close(dist);
    if (err) return cli_fail(err);
    if (end.signal) {
        report_stop(&o, &end);
        return 128 + end.signal;
    }
    return 0;
}
