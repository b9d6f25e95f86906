#include "dsl/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

tern_error *kfile_write_atomic(const char *path, const void *data, size_t size) {
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) return tern_errorf("%s: out of memory", path);
    snprintf(tmp, n + 16, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        tern_error *err = tern_errorf("%s: cannot create a temporary file: %s", path, strerror(errno));
        free(tmp);
        return err;
    }
    const unsigned char *p = data;
    size_t left = size;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w;
        left -= (size_t)w;
    }
    tern_error *err = NULL;
    if (left > 0 || fsync(fd) != 0) err = tern_errorf("%s: write failed: %s", path, strerror(errno));
    if (close(fd) != 0 && !err) err = tern_errorf("%s: close failed: %s", path, strerror(errno));
    if (!err && rename(tmp, path) != 0) err = tern_errorf("%s: rename failed: %s", path, strerror(errno));
    if (err) unlink(tmp);
    free(tmp);
    return err;
}

tern_error *kfile_read(const char *path, size_t max, char **data, size_t *size) {
    *data = NULL;
    if (size) *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return tern_errorf("%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0 || (size_t)st.st_size > max) {
        fclose(f);
        return tern_errorf("%s: unreadable or larger than %zu bytes", path, max);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return tern_errorf("%s: out of memory", path);
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return tern_errorf("%s: short read", path);
    }
    buf[n] = '\0';
    *data = buf;
    if (size) *size = n;
    return NULL;
}

tern_error *kfile_mkdirs(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return tern_errorf("%s: path too long", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return tern_errorf("%s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return tern_errorf("%s: %s", buf, strerror(errno));
    return NULL;
}
