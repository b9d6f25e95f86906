/* The pieces of `tern train` around its loop: options, the learning-rate schedule, opening or
 * resuming a model, checkpoints, the loss history and its plot, and the progress bar. */
#ifndef TERN_CLI_TRAIN_SUPPORT_H
#define TERN_CLI_TRAIN_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "tern/gpt2.h"

typedef enum train_schedule { SCHEDULE_CONSTANT, SCHEDULE_COSINE } train_schedule;

typedef struct train_options {
    const char *model_dir, *init, *resume, *data, *val, *out, *backend;
    const char *device; /* --device N: the handler's device option, or NULL */
    int steps, B, T, warmup, grad_accum, save_every, val_every, val_batches;
    int stop_after; /* --stop-after: stop (and checkpoint) after this step; 0: run to --steps */
    int procs;      /* --procs N: ranks this command starts on this host (1: none) */
    int rank, world; /* of the job this process belongs to (0 and 1 alone) */
    bool zero1;      /* --zero1: the optimizer state sharded across the ranks */
    uint64_t seed;
    train_schedule schedule;
    tern_gpt2_adamw adamw;
    tern_precision precision;
    tern_dtype save_dtype; /* of the weights in checkpoints */
    bool help;
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
/* Reads DIR/losses.tsv written by a checkpoint (absent: empty history). */
tern_error *train_history_read(train_history *h, const char *dir);

/* Opens the model of --model, --init or --resume and attaches the job's communicator (dist
 * may be NULL), sharding the optimizer state with --zero1; a resume then restores the
 * optimizer (this rank's part with --zero1) and the loss history, and sets o->out to the
 * resumed folder when --out is not given. A resume checks that --batch times the ranks gives
 * the global batch the checkpoint was trained with (when either run had several ranks). */
tern_error *train_open_model(train_options *o, tern_dist *dist, tern_gpt2 **m, train_history *hist);

/* Writes a checkpoint into o->out: the optimizer state (optimizer-<step>.safetensors), the
 * model (config.json, model.safetensors), the tokenizer files, losses.tsv and loss.svg. Each
 * file is written atomically, the optimizer before the model, and older optimizer files are
 * removed last, so a run killed at any moment leaves a model whose step has its optimizer.
 * Rank 0 writes; with --zero1 every rank calls it, since the optimizer state (and in bf16 the
 * f32 weights) is gathered from the ranks. */
tern_error *train_save_checkpoint(const train_options *o, tern_gpt2 *m, const char *tokenizer_dir,
                                  const train_history *hist);

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
