#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tern/file.h"
#include "tern/safetensors.h"
#include "train_guard.h"
#include "train_run.h"
#include "train_support.h"

void train_options_default(train_options *o) {
    *o = (train_options){
        .steps = 0, .B = 4, .T = 64, .warmup = 0, .grad_accum = 1, .save_every = 0,
        .val_every = 0, .val_batches = 20, .procs = 1, .rank = 0, .world = 1, .seed = 1337, .schedule = SCHEDULE_CONSTANT,
        .adamw = {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f,
                  .clip = 1.0f, .decay_all = true},
        .precision = TERN_PRECISION_FP32,
        .save_dtype = TERN_F32,
    };
}

tern_error *train_schedule_parse(const char *text, train_schedule *out) {
    if (!strcmp(text, "constant")) *out = SCHEDULE_CONSTANT;
    else if (!strcmp(text, "cosine")) *out = SCHEDULE_COSINE;
    else return tern_errorf("--schedule: '%s' is not constant or cosine", text);
    return NULL;
}

float train_lr(const train_options *o, int step) {
    float lr = o->adamw.lr;
    if (step < o->warmup) return lr * (float)(step + 1) / (float)o->warmup;
    if (o->schedule == SCHEDULE_CONSTANT || o->steps - o->warmup <= 1) return lr;
    double done = (double)(step - o->warmup) / (double)(o->steps - o->warmup - 1);
    double min_lr = lr * 0.1;
    return (float)(min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(3.14159265358979323846 * done)));
}

tern_error *train_history_add(train_history *h, int step, float loss, float val_loss) {
    /* A resumed run replaces entries from its first step on. */
    while (h->n && h->step[h->n - 1] >= step) h->n--;
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 256;
        int *s = realloc(h->step, (size_t)cap * sizeof *s);
        if (s) h->step = s;
        float *l = realloc(h->loss, (size_t)cap * sizeof *l);
        if (l) h->loss = l;
        float *v = realloc(h->val, (size_t)cap * sizeof *v);
        if (v) h->val = v;
        if (!s || !l || !v) return tern_errorf("out of memory for the loss history");
        h->cap = cap;
    }
    h->step[h->n] = step;
    h->loss[h->n] = loss;
    h->val[h->n] = val_loss;
    h->n++;
    return NULL;
}

void train_history_free(train_history *h) {
    free(h->step);
    free(h->loss);
    free(h->val);
    *h = (train_history){0};
}

/* A step number at p (digits only, no sign or space), ending at the first non-digit. */
static bool read_step(const char *p, const char **end, int *out) {
    long v = 0;
    const char *q = p;
    for (; *q >= '0' && *q <= '9'; q++) {
        v = v * 10 + (*q - '0');
        if (v > 1L << 30) return false;
    }
    *end = q;
    *out = (int)v;
    return q > p && v > 0;
}

/* A finite number at p: it must start like one (strtof alone would skip white space, even
 * newlines, and read "nan"). */
static bool read_number(const char *p, const char **end, float *out) {
    if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == '.')) return false;
    char *e = NULL;
    float v = strtof(p, &e);
    *end = e;
    *out = v;
    return e > p && isfinite(v);
}

/* One pass over the text, each line parsed where it lies: linear in the file's size. */
tern_error *train_history_read(train_history *h, const char *dir, int last_step) {
    char path[4096];
    snprintf(path, sizeof path, "%s/losses.tsv", dir);
    if (access(path, F_OK) != 0) return NULL;
    char *text;
    size_t len;
    TERN_TRY(tern_read_file(path, &text, &len));
    static const char header[] = "step\tloss\tval_loss\n";
    tern_error *err = NULL;
    if (strlen(text) != len) err = tern_errorf("%s: holds a NUL byte", path);
    else if (strncmp(text, header, sizeof header - 1))
        err = tern_errorf("%s: does not start with the header 'step<TAB>loss<TAB>val_loss'", path);
    const char *p = text + sizeof header - 1;
    int lineno = 1, prev = 0;
    while (!err && p < text + len) {
        lineno++;
        int step = 0;
        float loss = 0, val = NAN;
        const char *q = p;
        bool ok = read_step(q, &q, &step) && *q++ == '\t' && read_number(q, &q, &loss) &&
                  *q++ == '\t';
        if (ok && q[0] == '-' && (q[1] == '\n' || q[1] == '\0')) q++;
        else if (ok) ok = read_number(q, &q, &val);
        ok = ok && (*q == '\n' || *q == '\0');
        if (!ok)
            err = tern_errorf("%s: line %d is not 'step<TAB>loss<TAB>val' (finite numbers, val "
                              "or '-')", path, lineno);
        else if (step <= prev)
            err = tern_errorf("%s: line %d: step %d does not follow step %d", path, lineno, step,
                              prev);
        else if (step <= last_step) /* later ones: a save interrupted before its model */
            err = train_history_add(h, step, loss, val);
        prev = step;
        p = *q ? q + 1 : q;
    }
    free(text);
    return err;
}

/* Each line is at most 11 + 2 * 47 + 3 bytes ("%.6f" of the largest float is 46 digits and
 * a sign), so a fixed buffer bounds it whatever the values. */
static tern_error *write_history(const train_history *h, const char *path) {
    tern_atomic_file *f;
    TERN_TRY(tern_atomic_open(path, &f));
    static const char header[] = "step\tloss\tval_loss\n";
    tern_error *err = tern_atomic_write(f, header, sizeof header - 1);
    for (int i = 0; i < h->n && !err; i++) {
        char line[160];
        int n = isnan(h->val[i])
                    ? snprintf(line, sizeof line, "%d\t%.6f\t-\n", h->step[i], h->loss[i])
                    : snprintf(line, sizeof line, "%d\t%.6f\t%.6f\n", h->step[i], h->loss[i],
                               h->val[i]);
        if (n < 0 || (size_t)n >= sizeof line) err = tern_errorf("writing %s: a line too long", path);
        else err = tern_atomic_write(f, line, (size_t)n);
    }
    if (err) {
        tern_atomic_abort(f);
        return err;
    }
    return tern_atomic_commit(f);
}

/* A data-parallel run reads rows [r*B, (r+1)*B) of each global batch of B*world rows, so a
 * resume continues the same data only with the same global batch. The optimizer file
 * records it ("global_batch", "ranks"); files without it are not checked. */
static tern_error *check_global_batch(const train_options *o, const char *path) {
    tern_safetensors *f = NULL;
    TERN_TRY(tern_safetensors_open(path, &f));
    const char *rows = tern_safetensors_metadata(f, "global_batch");
    const char *ranks = tern_safetensors_metadata(f, "ranks");
    long saved = 0, saved_ranks = 1;
    long now = (long)o->B * o->world;
    tern_error *err = NULL;
    if (rows) err = cli_parse_long("global_batch", rows, 1, 1L << 40, &saved);
    if (!err && ranks) err = cli_parse_long("ranks", ranks, 1, 1 << 20, &saved_ranks);
    if (err) err = tern_error_wrap(err, "%s: metadata", path);
    else if (saved > 0 && saved != now && (o->world > 1 || saved_ranks > 1))
        err = tern_errorf("the checkpoint was trained with a global batch of %ld rows (%ld ranks); "
                          "--batch %d on %d ranks makes %ld: give --batch %ld / ranks", saved,
                          saved_ranks, o->B, o->world, now, saved);
    tern_safetensors_close(f);
    return err;
}

/* The model's communicator, memory settings and, with --zero1, its sharded optimizer
 * state; frees the model on failure. */
static tern_error *attach_dist(const train_options *o, tern_dist *dist, cli_model *m) {
    tern_error *err = cli_model_attach(m, dist, &o->memory, o->zero1);
    if (err) cli_model_free(m);
    return err;
}

/* The optimizer file of a checkpoint: its step must be the model's, and its data position
 * (global batches read) the step's. */
static tern_error *check_optimizer_step(const train_options *o, cli_model *m, const char *path,
                                        int step) {
    if (cli_model_step(m) != step)
        return tern_errorf("%s is at step %d but model.safetensors at step %d: the checkpoint's "
                           "files disagree", path, cli_model_step(m), step);
    tern_safetensors *f = NULL;
    TERN_TRY(tern_safetensors_open(path, &f));
    const char *position = tern_safetensors_metadata(f, "data_batch");
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)step * o->grad_accum);
    tern_error *err = NULL;
    if (position && strcmp(position, want))
        err = tern_errorf("%s: data position %s is not step %d x --grad-accum %d", path,
                          position, step, o->grad_accum);
    tern_safetensors_close(f);
    return err;
}

tern_error *train_open_model(train_options *o, tern_dist *dist, cli_model *m, train_history *hist) {
    if (o->init) {
        TERN_TRY(cli_model_init(o->backend, o->init, o->seed, o->precision, m));
        return attach_dist(o, dist, m);
    }
    if (o->model_dir) {
        TERN_TRY(cli_model_load(o->backend, o->model_dir, o->precision, m));
        return attach_dist(o, dist, m);
    }

    int step;
    TERN_TRY(tern_error_wrap(cli_model_saved_step(o->resume, &step), "resuming from %s", o->resume));
    TERN_TRY(tern_error_wrap(cli_model_load(o->backend, o->resume, o->precision, m), "resuming from %s", o->resume));
    TERN_TRY(attach_dist(o, dist, m)); /* before the optimizer: --zero1 loads this rank's part */
    tern_error *err = NULL;
    if (step > 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/optimizer-%d.safetensors", o->resume, step);
        if (access(path, F_OK) != 0)
            err = tern_errorf("model.safetensors is at step %d but optimizer-%d.safetensors is "
                              "missing", step, step);
        if (!err) err = cli_model_load_optimizer(m, path);
        if (!err) err = check_optimizer_step(o, m, path, step);
        if (!err) err = check_global_batch(o, path);
    }
    if (!err) err = train_history_read(hist, o->resume, step);
    if (!err && step >= o->steps)
        err = tern_errorf("%s is at step %d already; --steps %d leaves nothing to do", o->resume,
                          step, o->steps);
    if (err) {
        cli_model_free(m);
        return tern_error_wrap(err, "resuming from %s", o->resume);
    }
    return NULL;
}

static tern_error *copy_file(const char *from, const char *to) {
    char *data;
    size_t len;
    TERN_TRY(tern_read_file(from, &data, &len));
    tern_error *err = tern_write_file(to, data, len);
    free(data);
    return err;
}

/* Whether name is optimizer-<n>.safetensors exactly, n a step written as tern writes it. */
static bool optimizer_file(const char *name, int *step) {
    static const char prefix[] = "optimizer-", suffix[] = ".safetensors";
    size_t n = strlen(name), p = sizeof prefix - 1, x = sizeof suffix - 1;
    if (n <= p + x || strncmp(name, prefix, p) || strcmp(name + n - x, suffix)) return false;
    long v = 0;
    for (size_t i = p; i < n - x; i++) {
        if (name[i] < '0' || name[i] > '9' || (i == p && name[i] == '0' && n - x - p > 1)) return false;
        v = v * 10 + (name[i] - '0');
        if (v > 1L << 30) return false;
    }
    *step = (int)v;
    return true;
}

/* Removes optimizer files of other steps than `keep`, and temporary files of interrupted
 * saves. */
static void remove_stale_files(const char *dir, int keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        int n;
        if (optimizer_file(e->d_name, &n) && n != keep) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
    train_remove_temporaries(dir);
}

/* The order makes every moment leave a checkpoint: model.safetensors, which records its
 * step S, lands last of the files a resume needs, so when it names step S the folder already
 * holds run.json, config.json (which the model's save writes before the weights), the
 * tokenizer, optimizer-S and a losses.tsv that covers step S (entries past the model's step
 * are dropped on resume); older optimizer files go only after the new model is in place. */
tern_error *train_save_checkpoint(const train_options *o, cli_model *m, const char *tokenizer_dir,
                                  const train_history *hist, const train_data_id *data) {
    const char *dir = o->out;
    char path[4096], from[4096], position[32], seed[32], global_batch[32], ranks[32];
    int step = cli_model_step(m);
    bool lead = o->rank == 0; /* the others only give their parts of the state (--zero1) */
    const train_hook *hook = &o->hook;
    if (lead) {
        TERN_TRY(tern_make_dirs(dir));
        TERN_TRY(train_run_write(o, dir, data));
        train_hook_point(hook, "run.json", step);
        /* The tokenizer the run reads (GPT-2's vocab.json and merges.txt, or a tokenizer.json)
         * and the files that travel with a Hugging Face one, as far as the source has them. */
        static const char *const tokenizer_files[] = {"vocab.json", "merges.txt", "tokenizer.json",
                                                      "tokenizer_config.json", "special_tokens_map.json",
                                                      "generation_config.json"};
        const char *src_dir = cli_tokenizer_dir(tokenizer_dir);
        for (size_t i = 0; i < sizeof tokenizer_files / sizeof tokenizer_files[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, tokenizer_files[i]);
            snprintf(from, sizeof from, "%s/%s", src_dir, tokenizer_files[i]);
            if (access(path, F_OK) != 0 && access(from, F_OK) == 0) TERN_TRY(copy_file(from, path));
        }
        train_hook_point(hook, "tokenizer", step);
    }

    snprintf(position, sizeof position, "%lld", (long long)step * o->grad_accum);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    snprintf(global_batch, sizeof global_batch, "%ld", (long)o->B * o->world);
    snprintf(ranks, sizeof ranks, "%d", o->world);
    /* data_batch counts global batches: rank r read rows r*B .. r*B+B-1 of each */
    const char *metadata[] = {"data_batch", position, "seed", seed, "global_batch", global_batch,
                              "ranks", ranks, NULL};
    snprintf(path, sizeof path, "%s/optimizer-%d.safetensors", dir, step);
    TERN_TRY(cli_model_save_optimizer(m, path, metadata));
    if (lead) {
        train_hook_point(hook, "optimizer", step);
        snprintf(path, sizeof path, "%s/losses.tsv", dir);
        TERN_TRY(write_history(hist, path));
        train_hook_point(hook, "losses.tsv", step);
    }
    tern_error *err = cli_model_save_as(m, dir, o->save_dtype);
    if (err) {
        /* The model stays at its last step: the optimizer file of this one would only wait
         * for the next save's cleanup. */
        snprintf(path, sizeof path, "%s/optimizer-%d.safetensors", dir, step);
        if (lead) unlink(path);
        return err;
    }
    if (!lead) return NULL;
    train_hook_point(hook, "model.safetensors", step);
    snprintf(path, sizeof path, "%s/loss.svg", dir);
    TERN_TRY(train_plot_svg(hist, path));
    train_hook_point(hook, "loss.svg", step);
    remove_stale_files(dir, step);
    train_hook_point(hook, "cleanup", step);
    return NULL;
}

/* ---- progress bar ---- */

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void progress_start(progress *p, int start, int total) {
    *p = (progress){.tty = isatty(STDERR_FILENO) && isatty(STDOUT_FILENO), .start = start,
                    .total = total, .t0 = seconds_now()};
}

void progress_update(progress *p, int done, float loss) {
    if (!p->tty) return;
    const int width = 30;
    int filled = (int)((double)done / p->total * width);
    double elapsed = seconds_now() - p->t0;
    double left = done > p->start ? elapsed / (done - p->start) * (p->total - done) : 0;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %d/%d loss %.4f, %dm%02ds left\033[K", bar, done, p->total, loss,
            (int)left / 60, (int)left % 60);
    fflush(stderr);
    p->drawn = true;
}

void progress_clear(progress *p) {
    if (!p->drawn) return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    p->drawn = false;
}
