/* A folder of safetensors weights: one file, or shards listed by an index (tern/weights.h). */
#include "tern/weights.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/display.h"
#include "core/json_check.h"
#include "core/utf8.h"
#include "tern/file.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define MAX_PATH 4096

typedef struct shard {
    char *file; /* the name in the folder */
    tern_safetensors *st;
    size_t mapped; /* weight_map entries naming this shard */
} shard;

typedef struct entry {
    const char *name; /* owned by the index's tensor info or by `names` */
    size_t shard;
    const tern_tensor_info *t;
} entry;

struct tern_weights {
    char *dir;
    shard *shards;
    size_t n_shards;
    entry *entries; /* sorted by name */
    size_t n_entries;
};

void tern_weights_close(tern_weights *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_shards; i++) {
        tern_safetensors_close(w->shards[i].st);
        free(w->shards[i].file);
    }
    free(w->shards);
    free(w->entries);
    free(w->dir);
    free(w);
}

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static tern_error *join(const char *dir, const char *file, char *out) {
    int n = snprintf(out, MAX_PATH, "%s/%s", dir, file);
    if (n < 0 || n >= MAX_PATH) return tern_errorf("%s: path too long", dir);
    return NULL;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* A shard name from the index: a plain file name in the folder. */
static tern_error *check_shard_name(const char *index, const char *tensor, const char *file) {
    size_t n = strlen(file), bad;
    const char *why = NULL;
    if (n == 0) why = "is empty";
    else if (n > 255) why = "is longer than 255 bytes";
    else if (strchr(file, '/') || strchr(file, '\\')) why = "is not a plain file name (it has a path separator)";
    else if (file[0] == '.') why = "starts with '.'";
    else if (!tern_utf8_valid(file, n, &bad)) why = "is not UTF-8";
    for (size_t i = 0; !why && i < n; i++)
        if ((unsigned char)file[i] < 0x20 || file[i] == 0x7f) why = "has a control character";
    if (why)
        return tern_errorf("%s: weight_map: the shard of '%s' (\"%s\") %s", index,
                           tern_display_of(tensor).s, tern_display_of(file).s, why);
    return NULL;
}

static int compare_entries(const void *a, const void *b) {
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The shards named in weight_map (sorted, distinct) into w->shards, opened. */
static tern_error *open_shards(tern_weights *w, const cJSON *map, const char *index, size_t n) {
    const char **files = malloc(n * sizeof *files);
    if (!files) return tern_errorf("%s: out of memory", index);
    size_t i = 0;
    for (const cJSON *item = map->child; item; item = item->next) files[i++] = item->valuestring;
    qsort(files, n, sizeof *files, compare_strings);
    size_t distinct = 0;
    for (i = 0; i < n; i++)
        if (i == 0 || strcmp(files[i], files[i - 1]) != 0) files[distinct++] = files[i];
    w->shards = calloc(distinct, sizeof *w->shards);
    tern_error *e = w->shards ? NULL : tern_errorf("%s: out of memory", index);
    char path[MAX_PATH];
    for (i = 0; !e && i < distinct; i++) {
        w->shards[i].file = copy_string(files[i]);
        if (!w->shards[i].file) {
            e = tern_errorf("%s: out of memory", index);
            break;
        }
        w->n_shards++;
        e = join(w->dir, files[i], path);
        if (!e) e = tern_safetensors_open(path, &w->shards[i].st);
        if (e) e = tern_error_wrap(e, "%s names shard %s", index, tern_display_of(files[i]).s);
    }
    free(files);
    return e;
}

static size_t find_shard(const tern_weights *w, const char *file) {
    size_t lo = 0, hi = w->n_shards;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(file, w->shards[mid].file);
        if (c == 0) return mid;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return (size_t)-1;
}

static tern_error *read_index(tern_weights *w, const char *index) {
    char *text;
    size_t len, bad;
    const char *why;
    TERN_TRY(tern_read_file(index, &text, &len));
    cJSON *root = NULL;
    tern_error *e = NULL;
    if (len > TERN_WEIGHTS_MAX_INDEX)
        e = tern_errorf("%s: %zu bytes is too large for an index", index, len);
    else if (!tern_utf8_valid(text, len, &bad))
        e = tern_errorf("%s: not UTF-8 (byte %zu)", index, bad);
    else if (!tern_json_check(text, len, 64, &bad, &why))
        e = tern_errorf("%s: not valid JSON: %s at byte %zu", index, why, bad);
    else if (!(root = cJSON_ParseWithLength(text, len)))
        e = tern_errorf("%s: not valid JSON", index);
    free(text);
    if (e) return e;
    const cJSON *map = NULL, *meta = NULL;
    if (!cJSON_IsObject(root)) {
        e = tern_errorf("%s: not a JSON object", index);
        goto done;
    }
    for (const cJSON *item = root->child; item; item = item->next) {
        const cJSON **slot = strcmp(item->string, "weight_map") == 0 ? &map
                             : strcmp(item->string, "metadata") == 0 ? &meta : NULL;
        if (!slot) continue;
        if (*slot) {
            e = tern_errorf("%s: %s: given twice", index, item->string);
            goto done;
        }
        *slot = item;
    }
    if (meta && !cJSON_IsObject(meta)) {
        e = tern_errorf("%s: metadata: not an object", index);
        goto done;
    }
    if (!map || !cJSON_IsObject(map) || !map->child) {
        e = tern_errorf("%s: weight_map: %s", index, !map ? "missing" : !cJSON_IsObject(map) ? "not an object" : "empty");
        goto done;
    }
    size_t n = 0;
    for (const cJSON *item = map->child; item; item = item->next, n++) {
        if (!cJSON_IsString(item)) {
            e = tern_errorf("%s: weight_map: the shard of '%s' is not a string", index,
                            tern_display_of(item->string).s);
            goto done;
        }
        if ((e = check_shard_name(index, item->string, item->valuestring))) goto done;
    }
    if ((e = open_shards(w, map, index, n))) goto done;
    w->entries = calloc(n, sizeof *w->entries);
    if (!w->entries) {
        e = tern_errorf("%s: out of memory", index);
        goto done;
    }
    for (const cJSON *item = map->child; item; item = item->next) {
        size_t s = find_shard(w, item->valuestring);
        shard *sh = &w->shards[s];
        const tern_tensor_info *t = tern_safetensors_find(sh->st, item->string);
        if (!t) {
            e = tern_errorf("%s: weight_map: tensor '%s' is not in its shard %s", index,
                            tern_display_of(item->string).s, tern_display_of(sh->file).s);
            goto done;
        }
        /* the name lives as long as the shard */
        w->entries[w->n_entries++] = (entry){t->name, s, t};
        sh->mapped++;
    }
    qsort(w->entries, w->n_entries, sizeof *w->entries, compare_entries);
    for (size_t i = 1; i < w->n_entries; i++)
        if (strcmp(w->entries[i - 1].name, w->entries[i].name) == 0) {
            e = tern_errorf("%s: weight_map: tensor '%s' given twice", index,
                            tern_display_of(w->entries[i].name).s);
            goto done;
        }
    /* every tensor of a shard is mapped to it: each mapped one exists and names are unique
     * within a shard, so the counts agree exactly when there is no other */
    for (size_t s = 0; s < w->n_shards; s++) {
        size_t count = tern_safetensors_count(w->shards[s].st);
        for (size_t i = 0; count != w->shards[s].mapped && i < count; i++) {
            const tern_tensor_info *t = tern_safetensors_at(w->shards[s].st, i);
            const entry key = {t->name, 0, NULL};
            const entry *hit = bsearch(&key, w->entries, w->n_entries, sizeof key, compare_entries);
            if (!hit || hit->shard != s) {
                e = tern_errorf("%s: shard %s holds tensor '%s', which weight_map %s", index,
                                tern_display_of(w->shards[s].file).s, tern_display_of(t->name).s,
                                hit ? "puts in another shard" : "does not list");
                goto done;
            }
        }
    }
done:
    cJSON_Delete(root);
    return e;
}

static tern_error *read_single(tern_weights *w, const char *path) {
    w->shards = calloc(1, sizeof *w->shards);
    if (!w->shards || !(w->shards[0].file = copy_string(SINGLE_NAME)))
        return tern_errorf("%s: out of memory", path);
    w->n_shards = 1;
    TERN_TRY(tern_safetensors_open(path, &w->shards[0].st));
    size_t n = tern_safetensors_count(w->shards[0].st);
    w->entries = calloc(n ? n : 1, sizeof *w->entries);
    if (!w->entries) return tern_errorf("%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        const tern_tensor_info *t = tern_safetensors_at(w->shards[0].st, i);
        w->entries[w->n_entries++] = (entry){t->name, 0, t};
    }
    qsort(w->entries, w->n_entries, sizeof *w->entries, compare_entries);
    return NULL;
}

tern_error *tern_weights_open(const char *dir, tern_weights **out) {
    *out = NULL;
    if (!dir) return tern_errorf("no weights folder given");
    char single[MAX_PATH], index[MAX_PATH];
    TERN_TRY(join(dir, SINGLE_NAME, single));
    TERN_TRY(join(dir, INDEX_NAME, index));
    bool has_single = exists(single);
    if (!has_single && !exists(index))
        return tern_errorf("%s: no weights (neither %s nor %s)", dir, SINGLE_NAME, INDEX_NAME);
    tern_weights *w = calloc(1, sizeof *w);
    if (!w || !(w->dir = copy_string(dir))) {
        free(w);
        return tern_errorf("%s: out of memory", dir);
    }
    tern_error *e = has_single ? read_single(w, single) : read_index(w, index);
    if (e) {
        tern_weights_close(w);
        return e;
    }
    *out = w;
    return NULL;
}

size_t tern_weights_count(const tern_weights *w) { return w ? w->n_entries : 0; }

const tern_tensor_info *tern_weights_at(const tern_weights *w, size_t i) {
    return w && i < w->n_entries ? w->entries[i].t : NULL;
}

size_t tern_weights_shard_count(const tern_weights *w) { return w ? w->n_shards : 0; }

const tern_tensor_info *tern_weights_find(const tern_weights *w, const char *name) {
    if (!w || !name) return NULL;
    const entry key = {name, 0, NULL};
    const entry *hit = bsearch(&key, w->entries, w->n_entries, sizeof key, compare_entries);
    return hit ? hit->t : NULL;
}

tern_error *tern_weights_get(const tern_weights *w, const char *name, const tern_tensor_info **out) {
    *out = NULL;
    if (!w) return tern_errorf("no weights given");
    const tern_tensor_info *t = tern_weights_find(w, name);
    if (!t)
        return tern_errorf("%s: tensor '%s' is not in the checkpoint", w->dir,
                           name ? tern_display_of(name).s : "(none)");
    if (!t->supported || !(t->dtype == TERN_F32 || t->dtype == TERN_F16 || t->dtype == TERN_BF16))
        return tern_errorf("%s: tensor '%s' is %s (tern reads F32, F16 and BF16 weights)", w->dir,
                           tern_display_of(name).s, t->dtype_name);
    *out = t;
    return NULL;
}
