#include "dsl/disk_cache.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/files.h"
#include "dsl/hash.h"

static const char magic[] = "TERN-KERNEL-CACHE 1\n";

/* The entry's path, or false when the cache is off or has no home. */
static bool entry_path(const char *kind, const char *key, char *buf, size_t size) {
    const char *off = getenv("TERN_KERNEL_CACHE");
    if (off && !strcmp(off, "0")) return false;
    const char *dir = getenv("TERN_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[3072];
    if (dir && *dir)
        snprintf(base, sizeof base, "%s", dir);
    else if (xdg && *xdg)
        snprintf(base, sizeof base, "%s/tern", xdg);
    else if (home && *home)
        snprintf(base, sizeof base, "%s/.cache/tern", home);
    else
        return false;
    uint64_t h = hash_finish(hash_str(HASH_SEED, key));
    return snprintf(buf, size, "%s/%s/%016llx.bin", base, kind, (unsigned long long)h) < (int)size;
}

bool disk_cache_load(const char *kind, const char *key, void **data, size_t *size) {
    *data = NULL;
    *size = 0;
    char path[4096];
    if (!entry_path(kind, key, path, sizeof path)) return false;
    char *file = NULL;
    size_t n = 0;
    tern_error *err = kfile_read(path, (size_t)1 << 30, &file, &n);
    if (err) {
        tern_error_free(err);
        return false;
    }
    size_t m = sizeof magic - 1, k = strlen(key);
    uint64_t klen = 0;
    if (n >= m + 8) memcpy(&klen, file + m, 8);
    if (n < m + 8 || memcmp(file, magic, m) || klen != k || n - m - 8 < k || memcmp(file + m + 8, key, k)) {
        free(file);
        return false;
    }
    size_t payload = n - m - 8 - k;
    void *out = malloc(payload ? payload : 1);
    if (!out) {
        free(file);
        return false;
    }
    memcpy(out, file + m + 8 + k, payload);
    free(file);
    *data = out;
    *size = payload;
    return true;
}

void disk_cache_store(const char *kind, const char *key, const void *data, size_t size) {
    char path[4096];
    if (!entry_path(kind, key, path, sizeof path)) return;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    tern_error *err = kfile_mkdirs(path);
    *slash = '/';
    size_t m = sizeof magic - 1, k = strlen(key);
    uint64_t klen = k;
    unsigned char *buf = err ? NULL : malloc(m + 8 + k + size);
    if (buf) {
        memcpy(buf, magic, m);
        memcpy(buf + m, &klen, 8);
        memcpy(buf + m + 8, key, k);
        memcpy(buf + m + 8 + k, data, size);
        err = kfile_write_atomic(path, buf, m + 8 + k + size);
        free(buf);
    }
    tern_error_free(err); /* a cache that cannot be written is only slower */
}
