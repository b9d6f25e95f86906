/* Strict field readers for config.json files (see core/config_json.h). */
#include "core/config_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/display.h"
#include "tern/file.h"

tern_error *tern_cj_parse(const char *json, size_t len, const char *source, cJSON **root) {
    *root = NULL;
    if (!json) return tern_errorf("%s: no text", source);
    const char *end = NULL;
    cJSON *r = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!r) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        return tern_errorf("%s: not valid JSON (near byte %zu)", source, at);
    }
    for (const char *p = end; p < json + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(r);
            return tern_errorf("%s: text after the JSON object (at byte %zu)", source,
                               (size_t)(p - json));
        }
    if (!cJSON_IsObject(r)) {
        cJSON_Delete(r);
        return tern_errorf("%s: not a JSON object", source);
    }
    *root = r;
    return NULL;
}

tern_error *tern_cj_read(const char *path, cJSON **root) {
    *root = NULL;
    char *text;
    size_t len;
    TERN_TRY(tern_read_file(path, &text, &len));
    tern_error *e;
    if (len > TERN_CONFIG_MAX_BYTES)
        e = tern_errorf("%s: %zu bytes is too large for a config.json", path, len);
    else
        e = tern_cj_parse(text, len, path, root);
    free(text);
    return e;
}

tern_error *tern_cj_find(const cJSON *obj, const char *source, const char *key, const cJSON **out) {
    *out = NULL;
    for (const cJSON *item = obj->child; item; item = item->next) {
        if (strcmp(item->string, key) != 0) continue;
        if (*out) return tern_errorf("%s: %s: given twice", source, key);
        *out = item;
    }
    return NULL;
}

const char *tern_cj_describe(const cJSON *item, char *buf, size_t size, bool quote) {
    if (cJSON_IsNumber(item)) {
        snprintf(buf, size, "%.17g", item->valuedouble);
        return buf;
    }
    if (cJSON_IsString(item) && quote) {
        snprintf(buf, size, "\"%s\"", tern_display_of(item->valuestring).s);
        return buf;
    }
    if (cJSON_IsString(item)) return "a string";
    if (cJSON_IsNull(item)) return "null";
    if (cJSON_IsBool(item)) return cJSON_IsTrue(item) ? "true" : "false";
    if (cJSON_IsArray(item)) return "an array";
    if (cJSON_IsObject(item)) return "an object";
    return "an invalid value";
}

tern_error *tern_cj_int(const cJSON *obj, const char *source, const char *key, const char *field,
                        long long lo, long long hi, bool required, bool null_is_absent,
                        long long *out, bool *present) {
    const cJSON *item;
    TERN_TRY(tern_cj_find(obj, source, key, &item));
    if (item && null_is_absent && cJSON_IsNull(item)) item = NULL;
    if (present) *present = item != NULL;
    if (!item) return required ? tern_errorf("%s: %s: missing", source, field) : NULL;
    char buf[40];
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    if (!cJSON_IsNumber(item) || v != floor(v) || v < (double)lo || v > (double)hi)
        return tern_errorf("%s: %s: must be an integer in [%lld, %lld], got %s", source, field, lo,
                           hi, tern_cj_describe(item, buf, sizeof buf, false));
    *out = (long long)v;
    return NULL;
}

tern_error *tern_cj_number(const cJSON *obj, const char *source, const char *key,
                           const char *field, double lo, bool lo_open, double hi, bool required,
                           double *out, bool *present) {
    const cJSON *item;
    TERN_TRY(tern_cj_find(obj, source, key, &item));
    if (item && cJSON_IsNull(item)) item = NULL;
    if (present) *present = item != NULL;
    if (!item) return required ? tern_errorf("%s: %s: missing", source, field) : NULL;
    char buf[40];
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    bool above = lo_open ? v > lo : v >= lo;
    if (!cJSON_IsNumber(item) || !above || !(v <= hi))
        return tern_errorf("%s: %s: must be a number in %c%.17g, %.17g], got %s", source, field,
                           lo_open ? '(' : '[', lo, hi,
                           tern_cj_describe(item, buf, sizeof buf, false));
    *out = v;
    return NULL;
}

tern_error *tern_cj_bool(const cJSON *obj, const char *source, const char *key, bool *out) {
    const cJSON *item;
    TERN_TRY(tern_cj_find(obj, source, key, &item));
    if (!item || cJSON_IsNull(item)) return NULL;
    char buf[40];
    if (!cJSON_IsBool(item))
        return tern_errorf("%s: %s: must be true or false, got %s", source, key,
                           tern_cj_describe(item, buf, sizeof buf, false));
    *out = cJSON_IsTrue(item);
    return NULL;
}
