/* The safetensors reader: maps the file and validates every field of its header
 * (see tern/safetensors.h for the rules). */
#include "tern/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/display.h"
#include "tern/file.h"
#include "core/json_check.h"
#include "core/safetensors_dtype.h"
#include "core/utf8.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tern reads safetensors data in place and needs a little-endian host"
#endif

struct tern_safetensors {
    const void *map; /* the mapping, or NULL when opened over caller memory */
    size_t map_len;
    tern_tensor_info *tensors; /* in data order */
    size_t count;
    const tern_tensor_info **by_name; /* the tensors sorted by name */
    char **meta;                      /* key, value, key, value, ... */
    size_t meta_count;
};

/* Offsets and dimensions are JSON numbers, which cJSON holds as doubles: integers are exact
 * up to 2^53, well past any real file. */
#define MAX_JSON_INTEGER 9007199254740992.0

/* Headers nest three deep; the reference reader (serde_json) stops at 128. */
#define MAX_JSON_DEPTH 128

void tern_safetensors_close(tern_safetensors *f) {
    if (!f) return;
    if (f->tensors)
        for (size_t i = 0; i < f->count; i++)
            free((char *)f->tensors[i].name);
    for (size_t i = 0; i < 2 * f->meta_count; i++)
        free(f->meta[i]);
    free(f->meta);
    free(f->tensors);
    free(f->by_name);
    tern_unmap_file(f->map, f->map_len);
    free(f);
}

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

/* A JSON number that is a non-negative integer within 2^53. */
static bool json_count(const cJSON *item, size_t *out) {
    if (!cJSON_IsNumber(item)) return false;
    double v = item->valuedouble;
    if (!(v >= 0) || v > MAX_JSON_INTEGER || v != floor(v)) return false;
    if (v > (double)SIZE_MAX) return false;
    *out = (size_t)v;
    return true;
}

static int compare_keys(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Duplicate keys are found by sorting a copy of the key list (n log n), not by comparing each
 * key with every earlier one: a header may hold millions of keys. */
static tern_error *read_metadata(const cJSON *meta, const char *name, tern_safetensors *f) {
    if (!cJSON_IsObject(meta)) return tern_errorf("%s: __metadata__ is not an object", name);
    size_t n = 0;
    for (const cJSON *kv = meta->child; kv; kv = kv->next)
        n++;
    f->meta = calloc(2 * n + 1, sizeof *f->meta);
    if (!f->meta) return tern_errorf("%s: out of memory", name);
    for (const cJSON *kv = meta->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv))
            return tern_errorf("%s: __metadata__ value of '%s' is not a string", name,
                               tern_display_of(kv->string).s);
        f->meta[2 * f->meta_count] = copy_string(kv->string);
        f->meta[2 * f->meta_count + 1] = copy_string(kv->valuestring);
        f->meta_count++;
        if (!f->meta[2 * f->meta_count - 2] || !f->meta[2 * f->meta_count - 1])
            return tern_errorf("%s: out of memory", name);
    }
    char **keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) return tern_errorf("%s: out of memory", name);
    for (size_t i = 0; i < n; i++)
        keys[i] = f->meta[2 * i];
    qsort(keys, n, sizeof *keys, compare_keys);
    tern_error *e = NULL;
    for (size_t i = 1; i < n && !e; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0)
            e = tern_errorf("%s: __metadata__ key '%s' appears twice", name,
                            tern_display_of(keys[i]).s);
    free(keys);
    return e;
}

/* Fills t (except data) from a header entry; data_len is the size of the data section. */
static tern_error *read_entry(const cJSON *entry, const char *name, size_t data_len,
                              tern_tensor_info *t) {
    tern_display shown = tern_display_of(t->name);
    const char *tn = shown.s;
    if (!cJSON_IsObject(entry))
        return tern_errorf("%s: tensor '%s': entry is not an object", name, tn);
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (const cJSON *field = entry->child; field; field = field->next) {
        const cJSON **slot = strcmp(field->string, "dtype") == 0          ? &dtype
                             : strcmp(field->string, "shape") == 0        ? &shape
                             : strcmp(field->string, "data_offsets") == 0 ? &offsets
                                                                          : NULL;
        if (!slot) continue; /* unknown fields are ignored, as by the reference reader */
        if (*slot)
            return tern_errorf("%s: tensor '%s': field %s appears twice", name, tn, field->string);
        *slot = field;
    }
    if (!dtype) return tern_errorf("%s: tensor '%s': no dtype", name, tn);
    if (!shape) return tern_errorf("%s: tensor '%s': no shape", name, tn);
    if (!offsets) return tern_errorf("%s: tensor '%s': no data_offsets", name, tn);

    if (!cJSON_IsString(dtype))
        return tern_errorf("%s: tensor '%s': dtype is not a string", name, tn);
    const tern_st_dtype *dt = tern_st_dtype_lookup(dtype->valuestring);
    if (!dt)
        return tern_errorf("%s: tensor '%s': unknown or unsupported dtype '%s'", name, tn,
                           tern_display_of(dtype->valuestring).s);
    t->dtype_name = dt->name;
    t->supported = dt->supported;
    t->dtype = dt->dtype;
    t->elem_size = dt->size;

    if (!cJSON_IsArray(shape))
        return tern_errorf("%s: tensor '%s': shape is not an array", name, tn);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > TERN_SAFETENSORS_MAX_DIMS)
        return tern_errorf("%s: tensor '%s': %d dimensions (at most %d)", name, tn, ndim,
                           TERN_SAFETENSORS_MAX_DIMS);
    t->ndim = ndim;
    size_t count = 1;
    int d = 0;
    for (const cJSON *dim = shape->child; dim; dim = dim->next, d++) {
        size_t n;
        if (!json_count(dim, &n))
            return tern_errorf("%s: tensor '%s': shape[%d] is not a non-negative integer", name, tn,
                               d);
        if (n != 0 && count > SIZE_MAX / n)
            return tern_errorf("%s: tensor '%s': shape's element count overflows", name, tn);
        count *= n;
        t->shape[d] = (int64_t)n;
    }
    if (count > SIZE_MAX / t->elem_size)
        return tern_errorf("%s: tensor '%s': shape's byte size overflows", name, tn);
    t->count = count;
    t->nbytes = count * t->elem_size;

    size_t begin, end;
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
        return tern_errorf("%s: tensor '%s': data_offsets is not an array [begin, end]", name, tn);
    if (!json_count(offsets->child, &begin) || !json_count(offsets->child->next, &end))
        return tern_errorf("%s: tensor '%s': data_offsets are not non-negative integers", name, tn);
    if (end < begin)
        return tern_errorf("%s: tensor '%s': data_offsets [%zu, %zu] end before they begin", name,
                           tn, begin, end);
    if (end > data_len)
        return tern_errorf("%s: tensor '%s': data_offsets [%zu, %zu] run past the data section "
                           "(%zu bytes; is the file truncated?)",
                           name, tn, begin, end, data_len);
    if (end - begin != t->nbytes)
        return tern_errorf("%s: tensor '%s': data_offsets [%zu, %zu] hold %zu bytes but shape and "
                           "dtype %s need %zu",
                           name, tn, begin, end, end - begin, t->dtype_name, t->nbytes);
    t->offset = begin;
    return NULL;
}

static int compare_offsets(const void *a, const void *b) {
    const tern_tensor_info *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

static int compare_names(const void *a, const void *b) {
    const tern_tensor_info *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Every tensor in data order must start where the previous one ended: together they cover
 * the data section exactly, with no overlaps and no unclaimed bytes. */
static tern_error *check_layout(const tern_safetensors *f, const char *name, size_t data_len) {
    size_t pos = 0;
    for (size_t i = 0; i < f->count; i++) {
        const tern_tensor_info *t = &f->tensors[i];
        if (t->offset < pos)
            return tern_errorf("%s: tensors '%s' and '%s' overlap", name,
                               tern_display_of(f->tensors[i - 1].name).s,
                               tern_display_of(t->name).s);
        if (t->offset > pos)
            return tern_errorf("%s: bytes [%zu, %zu) of the data section belong to no tensor "
                               "(before '%s')",
                               name, pos, t->offset, tern_display_of(t->name).s);
        pos = t->offset + t->nbytes;
    }
    if (pos != data_len)
        return tern_errorf("%s: the data section has %zu bytes but its tensors end at %zu", name,
                           data_len, pos);
    return NULL;
}

static tern_error *parse_header(const unsigned char *bytes, size_t len, const char *name,
                                tern_safetensors *f) {
    if (len < 8) return tern_errorf("%s: too short for a safetensors file (%zu bytes)", name, len);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | bytes[i];
    if (header_len > TERN_SAFETENSORS_MAX_HEADER)
        return tern_errorf("%s: header length %llu is over the %u-byte limit (not a "
                           "safetensors file?)",
                           name, (unsigned long long)header_len, TERN_SAFETENSORS_MAX_HEADER);
    if (header_len > len - 8)
        return tern_errorf("%s: header length %llu runs past the end of the file (%zu bytes; "
                           "truncated?)",
                           name, (unsigned long long)header_len, len);
    size_t hlen = (size_t)header_len;
    const char *header = (const char *)bytes + 8;
    size_t data_len = len - 8 - hlen;
    const unsigned char *data = bytes + 8 + hlen;
    size_t bad;
    const char *why;
    if (!tern_utf8_valid(header, hlen, &bad))
        return tern_errorf("%s: header is not UTF-8 (byte %zu)", name, bad);
    if (!tern_json_check(header, hlen, MAX_JSON_DEPTH, &bad, &why))
        return tern_errorf("%s: header is not valid JSON: %s at byte %zu of the header", name, why,
                           bad);

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(header, hlen, &end, 0);
    if (!root) {
        size_t at = end && end >= header && end <= header + hlen ? (size_t)(end - header) : 0;
        return tern_errorf("%s: header is not valid JSON (near byte %zu of the header)", name, at);
    }
    tern_error *e = NULL;
    for (const char *p = end; p < header + hlen; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            e = tern_errorf("%s: header has bytes after its JSON object (at byte %zu)", name,
                            (size_t)(p - header));
            goto done;
        }
    }
    if (!cJSON_IsObject(root)) {
        e = tern_errorf("%s: header is not a JSON object", name);
        goto done;
    }

    size_t n = 0;
    const cJSON *meta = NULL;
    for (const cJSON *item = root->child; item; item = item->next) {
        if (strcmp(item->string, "__metadata__") != 0) {
            n++;
        } else if (meta) {
            e = tern_errorf("%s: __metadata__ appears twice", name);
            goto done;
        } else {
            meta = item;
        }
    }
    if (meta && !cJSON_IsNull(meta) && (e = read_metadata(meta, name, f))) goto done;

    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
    if (!f->tensors || !f->by_name) {
        e = tern_errorf("%s: out of memory for %zu tensors", name, n);
        goto done;
    }
    for (const cJSON *item = root->child; item; item = item->next) {
        if (item == meta) continue;
        tern_tensor_info *t = &f->tensors[f->count];
        t->name = copy_string(item->string);
        if (!t->name) {
            e = tern_errorf("%s: out of memory", name);
            goto done;
        }
        f->count++;
        if ((e = read_entry(item, name, data_len, t))) goto done;
    }

    /* Data order for at() and the layout check; a name index for find() and uniqueness. */
    qsort(f->tensors, n, sizeof *f->tensors, compare_offsets);
    for (size_t i = 0; i < n; i++) {
        f->tensors[i].data = data + f->tensors[i].offset;
        f->by_name[i] = &f->tensors[i];
    }
    qsort(f->by_name, n, sizeof *f->by_name, compare_names);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            e = tern_errorf("%s: tensor '%s' appears twice", name,
                            tern_display_of(f->by_name[i]->name).s);
            goto done;
        }
    }
    e = check_layout(f, name, data_len);
done:
    cJSON_Delete(root);
    return e;
}

tern_error *tern_safetensors_open_memory(const void *bytes, size_t len, const char *name,
                                         tern_safetensors **out) {
    *out = NULL;
    if (!name) name = "safetensors data";
    tern_safetensors *f = calloc(1, sizeof *f);
    if (!f) return tern_errorf("%s: out of memory", name);
    tern_error *e = parse_header(bytes, len, name, f);
    if (e) {
        tern_safetensors_close(f);
        return e;
    }
    *out = f;
    return NULL;
}

tern_error *tern_safetensors_open(const char *path, tern_safetensors **out) {
    *out = NULL;
    const void *map;
    size_t len;
    TERN_TRY(tern_map_file(path, &map, &len));
    if (len < 8) {
        tern_unmap_file(map, len);
        return tern_errorf("%s: too short for a safetensors file (%zu bytes)", path, len);
    }
    tern_safetensors *f = calloc(1, sizeof *f);
    if (!f) {
        tern_unmap_file(map, len);
        return tern_errorf("%s: out of memory", path);
    }
    f->map = map;
    f->map_len = len;
    tern_error *e = parse_header(map, len, path, f);
    if (e) {
        tern_safetensors_close(f);
        return e;
    }
    *out = f;
    return NULL;
}

size_t tern_safetensors_count(const tern_safetensors *f) { return f ? f->count : 0; }

const tern_tensor_info *tern_safetensors_at(const tern_safetensors *f, size_t i) {
    return f && i < f->count ? &f->tensors[i] : NULL;
}

const tern_tensor_info *tern_safetensors_find(const tern_safetensors *f, const char *name) {
    if (!f || !name) return NULL;
    size_t lo = 0, hi = f->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const tern_tensor_info *t = f->by_name[mid];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *tern_safetensors_metadata(const tern_safetensors *f, const char *key) {
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->meta_count; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}
