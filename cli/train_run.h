/* A run's settings: the options that shape a training run, parsed from the command line and
 * saved with every checkpoint as run.json, so that --resume restores them.
 *
 * run.json is an object of strings, each spelled as the option's value would be on the
 * command line ("lr": "0.001"), read back through the same parsers and ranges as the
 * options, plus the run's data: its path and the identity of its tokens (their count and a
 * 64-bit FNV-1a fingerprint), so a resume given another path to the same tokens is accepted
 * and other tokens are refused. */
#ifndef TERN_CLI_TRAIN_RUN_H
#define TERN_CLI_TRAIN_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/data.h"
#include "tern/error.h"
#include "train_support.h"

/* At argv[*i]: when it is one of the run's settings (--batch, --lr, ...), parses its value
 * into o, marks it as given and returns true (*err on a bad value). */
bool train_setting_option(int argc, char **argv, int *i, train_options *o, tern_error **err);

/* What identifies the data a run reads. */
typedef struct train_data_id {
    size_t tokens;
    uint64_t fingerprint;
} train_data_id;

void train_data_identify(const tern_dataset *ds, train_data_id *id);

/* What a resume found in run.json, beyond the settings it put into the options. */
typedef struct train_saved_run {
    bool present;        /* false: a checkpoint from before run.json (settings as given) */
    char *data, *val;    /* the saved paths (owned), used when --data or --val is not given */
    train_data_id data_id;
    int ranks;           /* the run's ranks when saved */
    char backend[32];    /* the run's handler, used when neither --backend nor $TERN_BACKEND is */
    char changes[1024];  /* "--steps 6 -> 10; --backend cpu -> cuda" for the settings changed */
} train_saved_run;

/* Restores the settings of the run in DIR/run.json into o (after the job's ranks are known:
 * --batch is per rank and the global batch is kept). A setting given on the command line
 * that differs from the saved one is an error naming both, except those that may change
 * on purpose (--steps, --save-every, --val, --val-every, --val-batches, --backend, and the
 * ranks with --batch keeping the global batch), which are applied and listed in
 * saved->changes. */
tern_error *train_run_restore(train_options *o, const char *dir, train_saved_run *saved);
void train_saved_run_free(train_saved_run *saved);

/* Whether the data just opened for a resume is the run's: the same tokens. */
tern_error *train_run_check_data(const train_saved_run *saved, const char *path,
                                 const train_data_id *id);

/* Writes DIR/run.json atomically: o's settings and the data's path and identity. */
tern_error *train_run_write(const train_options *o, const char *dir, const train_data_id *data);

#endif
