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

tern_error *train_history_read(train_history *h, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/losses.tsv", dir);
    if (access(path, F_OK) != 0) return NULL;
    char *text;
    size_t len;
    TERN_TRY(tern_read_file(path, &text, &len));
    tern_error *err = NULL;
    char *line = strchr(text, '\n'); /* skip the header */
    int lineno = 1;
    while (line && *++line && !err) {
        lineno++;
        int step;
        char val[32];
        float loss;
        if (sscanf(line, "%d\t%f\t%31s", &step, &loss, val) != 3)
            err = tern_errorf("%s: line %d is not 'step<TAB>loss<TAB>val'", path, lineno);
        else
            err = train_history_add(h, step, loss, strcmp(val, "-") ? strtof(val, NULL) : NAN);
        line = strchr(line, '\n');
    }
    free(text);
    return err;
}

static tern_error *write_history(const train_history *h, const char *path) {
    size_t cap = 64 + (size_t)h->n * 48, used = 0;
    char *text = malloc(cap);
    if (!text) return tern_errorf("out of memory");
    used += (size_t)snprintf(text, cap, "step\tloss\tval_loss\n");
    for (int i = 0; i < h->n; i++) {
        if (isnan(h->val[i]))
            used += (size_t)snprintf(text + used, cap - used, "%d\t%.6f\t-\n", h->step[i], h->loss[i]);
        else
            used += (size_t)snprintf(text + used, cap - used, "%d\t%.6f\t%.6f\n", h->step[i],
                                     h->loss[i], h->val[i]);
    }
    tern_error *err = tern_write_file(path, text, used);
    free(text);
    return err;
}

/* A data-parallel run reads rows [r*B, (r+1)*B) of each global batch of B*world rows, so a
 * resume continues the same data only with the same global batch. The optimizer file
 * records it ("global_batch", "ranks"); files without it are not checked. */
static tern_error *check_global_batch(const train_options *o, const char *path) {
    tern_safetensors *f = NULL;
    TERN_TRY(tern_safetensors_open(path, &f));
    const char *rows = tern_safetensors_metadata(f, "global_batch");
    const char *ranks = tern_safetensors_metadata(f, "ranks");
    long saved = rows ? strtol(rows, NULL, 10) : 0, saved_ranks = ranks ? strtol(ranks, NULL, 10) : 1;
    long now = (long)o->B * o->world;
    tern_error *err = NULL;
    if (saved > 0 && saved != now && (o->world > 1 || saved_ranks > 1))
        err = tern_errorf("the checkpoint was trained with a global batch of %ld rows (%ld ranks); "
                          "--batch %d on %d ranks makes %ld: give --batch %ld / ranks", saved,
                          saved_ranks, o->B, o->world, now, saved);
    tern_safetensors_close(f);
    return err;
}

/* The model's communicator and, with --zero1, its sharded optimizer state; frees the model
 * on failure. */
static tern_error *attach_dist(const train_options *o, tern_dist *dist, tern_gpt2 **m) {
    tern_error *err = tern_gpt2_set_dist(*m, dist);
    if (!err && o->zero1) err = tern_gpt2_shard_optimizer(*m);
    if (err) {
        tern_gpt2_free(*m);
        *m = NULL;
    }
    return err;
}

tern_error *train_open_model(train_options *o, tern_dist *dist, tern_gpt2 **m, train_history *hist) {
    if (o->init) {
        tern_gpt2_config cfg;
        TERN_TRY(tern_gpt2_config_named(o->init, &cfg));
        TERN_TRY(tern_gpt2_init(o->backend, &cfg, o->seed, o->precision, m));
        return attach_dist(o, dist, m);
    }
    if (o->model_dir) {
        TERN_TRY(tern_gpt2_load(o->backend, o->model_dir, o->precision, m));
        return attach_dist(o, dist, m);
    }

    int step;
    TERN_TRY(tern_gpt2_saved_step(o->resume, &step));
    TERN_TRY(tern_gpt2_load(o->backend, o->resume, o->precision, m));
    TERN_TRY(attach_dist(o, dist, m)); /* before the optimizer: --zero1 loads this rank's part */
    tern_error *err = NULL;
    if (step > 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/optimizer-%d.safetensors", o->resume, step);
        err = tern_gpt2_load_optimizer(*m, path);
        if (!err) err = check_global_batch(o, path);
    }
    if (!err) err = train_history_read(hist, o->resume);
    if (!err && step >= o->steps)
        err = tern_errorf("%s is at step %d already; --steps %d leaves nothing to do", o->resume,
                          step, o->steps);
    if (err) {
        tern_gpt2_free(*m);
        *m = NULL;
        return tern_error_wrap(err, "resuming from %s", o->resume);
    }
    if (!o->out) o->out = o->resume;
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

/* Removes optimizer-<n>.safetensors files of other steps than `keep`. */
static void remove_stale_optimizers(const char *dir, int keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        int n;
        char tail[32];
        if (sscanf(e->d_name, "optimizer-%d.%31s", &n, tail) == 2 && !strcmp(tail, "safetensors") &&
            n != keep) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

tern_error *train_save_checkpoint(const train_options *o, tern_gpt2 *m, const char *tokenizer_dir,
                                  const train_history *hist) {
    const char *dir = o->out;
    char path[4096], from[4096], position[32], seed[32], global_batch[32], ranks[32];
    int step = tern_gpt2_step(m);
    bool lead = o->rank == 0; /* the others only give their parts of the state (--zero1) */
    if (lead) TERN_TRY(tern_make_dirs(dir));

    snprintf(position, sizeof position, "%lld", (long long)step * o->grad_accum);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    snprintf(global_batch, sizeof global_batch, "%ld", (long)o->B * o->world);
    snprintf(ranks, sizeof ranks, "%d", o->world);
    /* data_batch counts global batches: rank r read rows r*B .. r*B+B-1 of each */
    const char *metadata[] = {"data_batch", position, "seed", seed, "global_batch", global_batch,
                              "ranks", ranks, NULL};
    snprintf(path, sizeof path, "%s/optimizer-%d.safetensors", dir, step);
    TERN_TRY(tern_gpt2_save_optimizer(m, path, metadata));
    TERN_TRY(tern_gpt2_save_as(m, dir, o->save_dtype));
    if (!lead) return NULL;

    static const char *const tokenizer_files[] = {"vocab.json", "merges.txt"};
    const char *src_dir = cli_tokenizer_dir(tokenizer_dir);
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, tokenizer_files[i]);
        snprintf(from, sizeof from, "%s/%s", src_dir, tokenizer_files[i]);
        if (access(path, F_OK) != 0) TERN_TRY(copy_file(from, path));
    }
    snprintf(path, sizeof path, "%s/losses.tsv", dir);
    TERN_TRY(write_history(hist, path));
    snprintf(path, sizeof path, "%s/loss.svg", dir);
    TERN_TRY(train_plot_svg(hist, path));
    remove_stale_optimizers(dir, step);
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
