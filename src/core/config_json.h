/* Reading fields of a Hugging Face config.json (private to src/core): strict lookups that
 * refuse a key given twice and name the file and the field in every error. */
#ifndef TERN_CORE_CONFIG_JSON_H
#define TERN_CORE_CONFIG_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "tern/error.h"

/* config.json files are a few kilobytes; anything this big is not one. */
#define TERN_CONFIG_MAX_BYTES (16u << 20)

/* Parses len bytes of JSON into *root (an object; nothing but whitespace after it). */
tern_error *tern_cj_parse(const char *json, size_t len, const char *source, cJSON **root);

/* Reads the file at path (at most TERN_CONFIG_MAX_BYTES) into *root. */
tern_error *tern_cj_read(const char *path, cJSON **root);

/* The key `key` of object `obj`, or NULL when absent; a key given twice is an error. cJSON's
 * own lookup is case-insensitive and takes the first copy, so it is not used. */
tern_error *tern_cj_find(const cJSON *obj, const char *source, const char *key, const cJSON **out);

/* What a JSON value is, for messages: "a string", "null", "2.5", ... (strings quoted and cut
 * short when `quote`). */
const char *tern_cj_describe(const cJSON *item, char *buf, size_t size, bool quote);

/* An integer in [lo, hi]. Absent (or null when null_is_absent): *present false and *out
 * unchanged, an error when `required`. `field` names it in messages (e.g.
 * "rope_scaling.factor"). */
tern_error *tern_cj_int(const cJSON *obj, const char *source, const char *key, const char *field,
                        long long lo, long long hi, bool required, bool null_is_absent,
                        long long *out, bool *present);

/* A number with lo < v <= hi (lo_open) or lo <= v <= hi; absent as for tern_cj_int. */
tern_error *tern_cj_number(const cJSON *obj, const char *source, const char *key,
                           const char *field, double lo, bool lo_open, double hi, bool required,
                           double *out, bool *present);

/* A boolean; absent (or null): *out unchanged. */
tern_error *tern_cj_bool(const cJSON *obj, const char *source, const char *key, bool *out);

#endif
