/* The run's settings: one table gives each option that shapes a run its flag, its key in
 * run.json, its parser and range, and whether a resume may change it. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tern/file.h"
#include "train_run.h"

#define RUN_FILE "run.json"
#define RUN_FORMAT "tern-run-1"
#define MAX_RUN_BYTES (64 * 1024)

typedef enum kind { K_INT, K_FLOAT, K_U64, K_SCHEDULE, K_PRECISION, K_DTYPE, K_NO_DECAY } kind;

typedef struct setting {
    const char *flag, *key;
    kind kind;
    size_t offset, size; /* of the value in train_options */
    double min, max;
    bool may_change; /* on resume: applied and printed, not refused */
} setting;

#define AT(field) offsetof(train_options, field), sizeof(((train_options *)0)->field)
static const setting settings[] = {
    {"--steps", "steps", K_INT, AT(steps), 1, 1 << 30, true},
    {"--batch", "batch", K_INT, AT(B), 1, 1 << 16, false}, /* per rank: see restore_batch */
    {"--seq", "seq", K_INT, AT(T), 1, 1 << 20, false},
    {"--grad-accum", "grad_accum", K_INT, AT(grad_accum), 1, 1 << 16, false},
    {"--lr", "lr", K_FLOAT, AT(adamw.lr), 0, 10, false},
    {"--schedule", "schedule", K_SCHEDULE, AT(schedule), 0, 0, false},
    {"--warmup", "warmup", K_INT, AT(warmup), 0, 1 << 30, false},
    {"--wd", "weight_decay", K_FLOAT, AT(adamw.weight_decay), 0, 10, false},
    {"--beta1", "beta1", K_FLOAT, AT(adamw.beta1), 0, 0.999999, false},
    {"--beta2", "beta2", K_FLOAT, AT(adamw.beta2), 0, 0.999999, false},
    {"--eps", "eps", K_FLOAT, AT(adamw.eps), 1e-30, 1, false},
    {"--clip", "clip", K_FLOAT, AT(adamw.clip), 0, 1e30, false},
    {"--no-decay-1d", "no_decay_1d", K_NO_DECAY, AT(adamw.decay_all), 0, 0, false},
    {"--seed", "seed", K_U64, AT(seed), 0, 0, false},
    {"--precision", "precision", K_PRECISION, AT(precision), 0, 0, false},
    {"--save-dtype", "save_dtype", K_DTYPE, AT(save_dtype), 0, 0, false},
    {"--save-every", "save_every", K_INT, AT(save_every), 0, 1 << 30, true},
    {"--val-every", "val_every", K_INT, AT(val_every), 0, 1 << 30, true},
    {"--val-batches", "val_batches", K_INT, AT(val_batches), 1, 1 << 20, true},
};
#define N_SETTINGS (sizeof settings / sizeof settings[0])
_Static_assert(N_SETTINGS <= 32, "train_options.given has 32 bits");

static void *field(train_options *o, const setting *s) { return (char *)o + s->offset; }
static const void *cfield(const train_options *o, const setting *s) {
    return (const char *)o + s->offset;
}

/* Parses text as the value of s into o, with the option's checks. */
static tern_error *parse_value(const setting *s, const char *text, train_options *o) {
    void *p = field(o, s);
    switch (s->kind) {
    case K_INT: return cli_parse_int(s->flag, text, (int)s->min, (int)s->max, p);
    case K_FLOAT: return cli_parse_float(s->flag, text, s->min, s->max, p);
    case K_U64: return cli_parse_u64(s->flag, text, p);
    case K_SCHEDULE: return train_schedule_parse(text, p);
    case K_PRECISION: return tern_precision_parse(text, p);
    case K_DTYPE:
        if (!strcmp(text, "f32")) *(tern_dtype *)p = TERN_F32;
        else if (!strcmp(text, "bf16")) *(tern_dtype *)p = TERN_BF16;
        else return tern_errorf("--save-dtype: '%s' is not f32 or bf16", text);
        return NULL;
    case K_NO_DECAY:
        if (!strcmp(text, "true")) *(bool *)p = false;
        else if (!strcmp(text, "false")) *(bool *)p = true;
        else return tern_errorf("%s: '%s' is not true or false", s->key, text);
        return NULL;
    }
    return tern_errorf("%s: unknown setting kind", s->key);
}

/* The value of s in o, spelled as parse_value reads it back to the same value. */
static void format_value(const setting *s, const train_options *o, char *out, size_t cap) {
    const void *p = cfield(o, s);
    switch (s->kind) {
    case K_INT: snprintf(out, cap, "%d", *(const int *)p); return;
    case K_FLOAT: {
        float v = *(const float *)p;
        for (int digits = 6; digits <= 9; digits++) { /* the shortest that reads back exactly */
            snprintf(out, cap, "%.*g", digits, (double)v);
            if (strtof(out, NULL) == v) return;
        }
        return;
    }
    case K_U64: snprintf(out, cap, "%llu", (unsigned long long)*(const uint64_t *)p); return;
    case K_SCHEDULE:
        snprintf(out, cap, "%s", *(const train_schedule *)p == SCHEDULE_COSINE ? "cosine" : "constant");
        return;
    case K_PRECISION: snprintf(out, cap, "%s", tern_precision_name(*(const tern_precision *)p)); return;
    case K_DTYPE: snprintf(out, cap, "%s", *(const tern_dtype *)p == TERN_BF16 ? "bf16" : "f32"); return;
    case K_NO_DECAY: snprintf(out, cap, "%s", *(const bool *)p ? "false" : "true"); return;
    }
}

bool train_setting_option(int argc, char **argv, int *i, train_options *o, tern_error **err) {
    for (size_t k = 0; k < N_SETTINGS; k++) {
        const setting *s = &settings[k];
        if (strcmp(argv[*i], s->flag) != 0) continue;
        o->given |= 1u << k;
        if (s->kind == K_NO_DECAY) {
            o->adamw.decay_all = false;
            return true;
        }
        const char *v = NULL;
        if (cli_option(argc, argv, i, s->flag, &v, err) && !*err) *err = parse_value(s, v, o);
        return true;
    }
    return false;
}

/* ---- the data's identity ---- */

void train_data_identify(const tern_dataset *ds, train_data_id *id) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, over the ids as 16-bit little-endian */
    size_t n = tern_dataset_tokens(ds);
    for (size_t i = 0; i < n; i++) {
        uint32_t t = (uint32_t)tern_dataset_token(ds, i);
        h = (h ^ (t & 0xff)) * 0x100000001b3ull;
        h = (h ^ (t >> 8)) * 0x100000001b3ull;
    }
    id->tokens = n;
    id->fingerprint = h;
}

tern_error *train_run_check_data(const train_saved_run *saved, const char *path,
                                 const train_data_id *id) {
    if (!saved->present) return NULL;
    if (id->tokens == saved->data_id.tokens && id->fingerprint == saved->data_id.fingerprint)
        return NULL;
    return tern_errorf("--data %s holds other tokens (%zu, fingerprint %016llx) than the run's "
                       "data %s (%zu, fingerprint %016llx): a resume reads the same data", path,
                       id->tokens, (unsigned long long)id->fingerprint, saved->data,
                       saved->data_id.tokens, (unsigned long long)saved->data_id.fingerprint);
}

/* ---- run.json ---- */

static char *absolute_path(const char *path) {
    char *full = realpath(path, NULL);
    if (full) return full;
    size_t n = strlen(path) + 1;
    char *copy = malloc(n);
    if (copy) memcpy(copy, path, n);
    return copy;
}

tern_error *train_run_write(const train_options *o, const char *dir, const train_data_id *data) {
    cJSON *root = cJSON_CreateObject();
    char value[64], *text = NULL, *data_path = absolute_path(o->data);
    char *val_path = o->val ? absolute_path(o->val) : NULL;
    tern_error *err = NULL;
    bool ok = root && data_path && (!o->val || val_path);
    ok = ok && cJSON_AddStringToObject(root, "format", RUN_FORMAT);
    for (size_t k = 0; ok && k < N_SETTINGS; k++) {
        format_value(&settings[k], o, value, sizeof value);
        ok = cJSON_AddStringToObject(root, settings[k].key, value) != NULL;
    }
    snprintf(value, sizeof value, "%d", o->world);
    ok = ok && cJSON_AddStringToObject(root, "ranks", value);
    ok = ok && cJSON_AddStringToObject(root, "backend", o->backend);
    ok = ok && cJSON_AddStringToObject(root, "data", data_path);
    snprintf(value, sizeof value, "%zu", data->tokens);
    ok = ok && cJSON_AddStringToObject(root, "data_tokens", value);
    snprintf(value, sizeof value, "%016llx", (unsigned long long)data->fingerprint);
    ok = ok && cJSON_AddStringToObject(root, "data_fingerprint", value);
    if (ok && val_path) ok = cJSON_AddStringToObject(root, "val", val_path) != NULL;
    if (ok) ok = (text = cJSON_Print(root)) != NULL;
    if (!ok) {
        err = tern_errorf("writing %s/%s: out of memory", dir, RUN_FILE);
    } else {
        size_t n = strlen(text) + 1;
        char *path = malloc(strlen(dir) + sizeof "/" RUN_FILE);
        text[n - 1] = '\n'; /* the NUL becomes the final newline */
        if (!path) {
            err = tern_errorf("writing %s/%s: out of memory", dir, RUN_FILE);
        } else {
            sprintf(path, "%s/%s", dir, RUN_FILE);
            err = tern_write_file(path, text, n);
            free(path);
        }
    }
    cJSON_free(text);
    cJSON_Delete(root);
    free(data_path);
    free(val_path);
    return err;
}

void train_saved_run_free(train_saved_run *saved) {
    free(saved->data);
    free(saved->val);
    *saved = (train_saved_run){0};
}

/* Appends "; what" to the list of changes (cut short, never overflowing, when it is long). */
static void note_change(train_saved_run *saved, const char *flag, const char *was, const char *now) {
    size_t used = strlen(saved->changes);
    if (used + 1 >= sizeof saved->changes) return;
    snprintf(saved->changes + used, sizeof saved->changes - used, "%s%s %s -> %s",
             used ? "; " : "", flag, was, now);
}

/* The string value of key in root (NULL when absent); *err when it is there but no string. */
static const char *string_of(const cJSON *root, const char *key, const char *path, tern_error **err) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item) return NULL;
    if (!cJSON_IsString(item) || !item->valuestring) {
        *err = tern_errorf("%s: \"%s\" is not a string", path, key);
        return NULL;
    }
    return item->valuestring;
}

static const char *const extra_keys[] = {"format", "ranks", "backend", "data", "data_tokens",
                                         "data_fingerprint", "val"};

/* Every key known and present once (the keys are checked in one pass against the table). */
static tern_error *check_keys(const cJSON *root, const char *path) {
    enum { N_EXTRA = sizeof extra_keys / sizeof extra_keys[0] };
    int seen[N_SETTINGS + N_EXTRA] = {0};
    for (const cJSON *item = root->child; item; item = item->next) {
        size_t k = 0;
        for (; k < N_SETTINGS && strcmp(item->string, settings[k].key); k++) {}
        if (k == N_SETTINGS)
            for (size_t e = 0; e < N_EXTRA; e++, k++)
                if (!strcmp(item->string, extra_keys[e])) break;
        if (k == N_SETTINGS + N_EXTRA)
            return tern_errorf("%s: unknown key \"%s\"", path, item->string);
        if (seen[k]++) return tern_errorf("%s: key \"%s\" appears twice", path, item->string);
    }
    for (size_t k = 0; k < N_SETTINGS + N_EXTRA - 1; k++) /* all but "val" are required */
        if (!seen[k])
            return tern_errorf("%s: \"%s\" is missing", path,
                               k < N_SETTINGS ? settings[k].key : extra_keys[k - N_SETTINGS]);
    return NULL;
}

/* The global batch stays; the ranks may change, --batch following them. */
static tern_error *restore_batch(train_options *o, int saved_batch, int saved_ranks,
                                 train_saved_run *saved) {
    long global = (long)saved_batch * saved_ranks;
    bool given = o->given & (1u << 1);
    if (!given) {
        if (global % o->world)
            return tern_errorf("the run's global batch of %ld rows (%d ranks x --batch %d) does "
                               "not divide among %d ranks", global, saved_ranks, saved_batch,
                               o->world);
        o->B = (int)(global / o->world);
    } else if ((long)o->B * o->world != global) {
        return tern_errorf("--batch %d on %d rank%s makes a global batch of %ld rows; the run "
                           "trains with a global batch of %ld rows (%d rank%s x --batch %d): on "
                           "%d rank%s that is --batch %ld", o->B, o->world, o->world == 1 ? "" : "s",
                           (long)o->B * o->world, global, saved_ranks, saved_ranks == 1 ? "" : "s",
                           saved_batch, o->world, o->world == 1 ? "" : "s",
                           global % o->world ? 0L : global / o->world);
    }
    if (o->world != saved_ranks) {
        char was[48], now[48];
        snprintf(was, sizeof was, "%d (--batch %d)", saved_ranks, saved_batch);
        snprintf(now, sizeof now, "%d (--batch %d)", o->world, o->B);
        note_change(saved, "ranks", was, now);
    }
    return NULL;
}

/* The settings from the parsed run.json into o. */
static tern_error *restore_settings(const cJSON *root, const char *path, train_options *o,
                                    train_saved_run *saved) {
    tern_error *err = NULL;
    train_options was = *o; /* the saved values are parsed into this copy */
    for (size_t k = 0; k < N_SETTINGS; k++) {
        const setting *s = &settings[k];
        const char *text = string_of(root, s->key, path, &err);
        if (err) return err;
        if ((err = parse_value(s, text, &was))) return tern_error_wrap(err, "%s", path);
        char saved_text[64], given_text[64];
        format_value(s, &was, saved_text, sizeof saved_text);
        format_value(s, o, given_text, sizeof given_text);
        if (k == 1) continue; /* --batch: with the ranks, below */
        if (!(o->given & (1u << k))) {
            memcpy(field(o, s), cfield(&was, s), s->size);
        } else if (strcmp(saved_text, given_text) != 0) {
            if (!s->may_change)
                return tern_errorf("%s %s differs from the run's %s (%s): a resume keeps the "
                                   "run's settings; only --steps, --stop-after, --save-every, "
                                   "--val, --val-every, --val-batches, --backend, --procs, "
                                   "--zero1 and --out may change", s->flag, given_text,
                                   saved_text, path);
            note_change(saved, s->flag, saved_text, given_text);
        }
    }
    const char *ranks = string_of(root, "ranks", path, &err);
    if (err) return err;
    int saved_ranks = 0;
    if ((err = cli_parse_int("ranks", ranks, 1, 4096, &saved_ranks))) return tern_error_wrap(err, "%s", path);
    saved->ranks = saved_ranks;
    /* The handler may change (a run moved to a GPU): the same maths, other rounding. */
    const char *backend = string_of(root, "backend", path, &err);
    if (err) return err;
    if (strlen(backend) >= sizeof saved->backend || !*backend)
        return tern_errorf("%s: \"backend\" is not a handler's name", path);
    strcpy(saved->backend, backend);
    if (!o->backend_given) o->backend = saved->backend;
    else if (strcmp(o->backend, saved->backend)) note_change(saved, "--backend", saved->backend, o->backend);
    return restore_batch(o, was.B, saved_ranks, saved);
}

static tern_error *restore_data(const cJSON *root, const char *path, train_options *o,
                                train_saved_run *saved) {
    tern_error *err = NULL;
    const char *data = string_of(root, "data", path, &err);
    const char *tokens = err ? NULL : string_of(root, "data_tokens", path, &err);
    const char *print = err ? NULL : string_of(root, "data_fingerprint", path, &err);
    const char *val = err ? NULL : string_of(root, "val", path, &err);
    if (err) return err;
    if (!*data) return tern_errorf("%s: \"data\" is empty", path);
    long count;
    if ((err = cli_parse_long("data_tokens", tokens, 2, LONG_MAX, &count)))
        return tern_error_wrap(err, "%s", path);
    char *end = NULL;
    errno = 0;
    unsigned long long fp = strtoull(print, &end, 16);
    if (strlen(print) != 16 || *end || errno)
        return tern_errorf("%s: \"data_fingerprint\" is not 16 hexadecimal digits", path);
    saved->data = strdup(data);
    saved->val = val && *val ? strdup(val) : NULL;
    if (!saved->data || (val && *val && !saved->val)) return tern_errorf("out of memory");
    saved->data_id = (train_data_id){.tokens = (size_t)count, .fingerprint = fp};
    if (!o->data) o->data = saved->data;
    if (!o->val) {
        o->val = saved->val;
        return NULL;
    }
    char *given = absolute_path(o->val);
    if (!given) return tern_errorf("out of memory");
    if (!saved->val || strcmp(saved->val, given))
        note_change(saved, "--val", saved->val ? saved->val : "(none)", o->val);
    free(given);
    return NULL;
}

tern_error *train_run_restore(train_options *o, const char *dir, train_saved_run *saved) {
    *saved = (train_saved_run){0};
    size_t n = strlen(dir) + sizeof "/" RUN_FILE;
    char *path = malloc(n);
    if (!path) return tern_errorf("out of memory");
    snprintf(path, n, "%s/%s", dir, RUN_FILE);
    char *text = NULL;
    size_t len = 0;
    tern_error *err = NULL;
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        free(path); /* a checkpoint from before run.json: the settings as given */
        if (!o->data || !(o->given & 1u))
            return tern_errorf("%s has no %s (it predates saved settings): give --data and "
                               "--steps, and the run's other settings", dir, RUN_FILE);
        return NULL;
    }
    if ((err = tern_read_file(path, &text, &len))) goto done;
    if (len > MAX_RUN_BYTES) {
        err = tern_errorf("%s: %zu bytes is too large for a run's settings", path, len);
        goto done;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    size_t rest = root && end ? strspn(end, " \t\r\n") : 0;
    if (!root || !cJSON_IsObject(root) || !end || end + rest != text + len) {
        err = tern_errorf("%s: not a JSON object", path);
    } else {
        const char *format = string_of(root, "format", path, &err);
        if (!err && (!format || strcmp(format, RUN_FORMAT)))
            err = tern_errorf("%s: not a tern run's settings (format \"%s\", expected \"%s\")",
                              path, format ? format : "", RUN_FORMAT);
        if (!err) err = check_keys(root, path);
        if (!err) err = restore_settings(root, path, o, saved);
        if (!err) err = restore_data(root, path, o, saved);
        if (!err) saved->present = true;
    }
    cJSON_Delete(root);
done:
    free(text);
    free(path);
    if (err) train_saved_run_free(saved);
    return err;
}
