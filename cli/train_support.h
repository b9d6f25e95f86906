/* The pieces of `tern train` around its loop: options, the learning-rate schedule, opening or
 * resuming a model, checkpoints, the loss history and its plot, and the progress bar. */
#ifndef TERN_CLI_TRAIN_SUPPORT_H
#define TERN_CLI_TRAIN_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "tern/gpt2.h"

typedef enum train_schedule { SCHEDULE_CONSTANT, SCHEDULE_COSINE } train_schedule;

/* Test-only faults at exact moments, from $TERN_TEST_HOOK (read once, at start; see
 * docs/RELIABILITY.md): "kill-after=FILE@STEP" (SIGKILL right after FILE lands in the
 * checkpoint of STEP; FILE is run.json, tokenizer, optimizer, losses.tsv, model.safetensors,
 * loss.svg or cleanup), "stop-at=STEP" (SIGSTOP after STEP), "diverge-at=STEP"
 * (that step's gradients overflow, as a diverged step's), separated by commas. */
typedef struct train_hook {
    char kill_after[24];
    int kill_step, stop_at, diverge_at;
} train_hook;

typedef struct train_options {
    const char *model_dir, *init, *resume, *data, *val, *out, *backend;
    const char *device; /* --device N: the handler's device option, or NULL */
    int steps, B, T, warmup, grad_accum, save_every, val_every, val_batches;
    int stop_after; /* --stop-after: stop (and checkpoint) after this step; 0: run to --steps */
    int procs;      /* --procs N: ranks this command starts on this host (1: none) */
    int rank, world; /* of the job this process belongs to (0 and 1 alone) */
    bool zero1;      /* --zero1: the optimizer state sharded across the ranks */
    tern_gpt2_memory memory; /* --recompute (not a run setting: the same steps either way) */
    uint64_t seed;
    train_schedule schedule;
    tern_gpt2_adamw adamw;
    tern_precision precision;
    tern_dtype save_dtype; /* of the weights in checkpoints */
    bool help;
    uint32_t given;     /* the run's settings given on the command line (train_run.c's table) */
    bool backend_given; /* by --backend or $TERN_BACKEND */
    train_hook hook;
} train_options;

void train_options_default(train_options *o);
tern_error *train_schedule_parse(const char *text, train_schedule *out);

/* The learning rate of step `step` (0-based): linear warmup from lr/warmup to lr over the
 * first `warmup` steps, then constant, or cosine decay to lr/10 at the last step. */
float train_lr(const train_options *o, int step);

/* One entry per step: the training loss and, when measured, the validation loss (NaN). */
typedef struct train_history {
    int *step;
    float *loss, *val;
    int n, cap;
} train_history;

tern_error *train_history_add(train_history *h, int step, float loss, float val_loss);
void train_history_free(train_history *h);
/* Reads DIR/losses.tsv written by a checkpoint (absent: empty history), strictly (steps
 * increasing, finite losses), keeping the entries up to last_step, the checkpoint's. */
tern_error *train_history_read(train_history *h, const char *dir, int last_step);

/* Opens the model of --model, --init or --resume and attaches the job's communicator (dist
 * may be NULL), sharding the optimizer state with --zero1; a resume then restores the
 * optimizer (this rank's part with --zero1) and the loss history, after checking that the
 * checkpoint's files agree: optimizer-<S> of the model's step S, whose own step and data
 * position are S's, with finite moments (the weights' are checked as they load). A resume
 * also checks that --batch times the ranks gives the global batch the checkpoint was
 * trained with (when either run had several ranks). */
tern_error *train_open_model(train_options *o, tern_dist *dist, cli_model *m, train_history *hist);

/* Writes a checkpoint into o->out: run.json, the tokenizer files, the optimizer state
 * (optimizer-<step>.safetensors), losses.tsv, the model (config.json, then
 * model.safetensors, which records the step), loss.svg; then removes older optimizer files
 * and temporary files of interrupted saves. Each file is written atomically and in that
 * order, so a run killed at any moment leaves a folder whose model has all the rest (see
 * train_support.c). Rank 0 writes; with --zero1 every rank calls it, since the optimizer
 * state (and in bf16 the f32 weights) is gathered from the ranks. */
struct train_data_id;
tern_error *train_save_checkpoint(const train_options *o, cli_model *m, const char *tokenizer_dir,
                                  const train_history *hist, const struct train_data_id *data);

/* An SVG line plot of the training (and validation) loss against the step. */
tern_error *train_plot_svg(const train_history *h, const char *path);

/* A progress bar on stderr when it is a terminal; nothing otherwise. */
typedef struct progress {
    bool tty, drawn;
    int start, total;
    double t0;
} progress;

void progress_start(progress *p, int start, int total);
void progress_update(progress *p, int done, float loss);
void progress_clear(progress *p);

#endif
