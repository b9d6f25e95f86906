/* Temporary folders for the core tests: made with mkdtemp, removed with everything in them. */
#ifndef TERN_TESTS_CORE_TMPDIR_H
#define TERN_TESTS_CORE_TMPDIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A new empty folder (static storage: one per test program). Exits if none can be made:
 * nothing else in the test could run. */
static inline const char *tmpdir_make(void) {
    static char path[4096];
    const char *base = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/tern-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        exit(1);
    }
    return path;
}

/* dir/name in a static rotating buffer (8 live at once). */
static inline const char *tmpdir_path(const char *dir, const char *name) {
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    int n = snprintf(b, 4096, "%s/%s", dir, name);
    if (n < 0 || n >= 4096) {
        fprintf(stderr, "tmpdir_path: path too long\n");
        exit(1);
    }
    return b;
}

/* Removes path and, when it is a folder, everything under it. */
static inline void tmpdir_remove(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char child[4096];
                int n = snprintf(child, sizeof child, "%s/%s", path, e->d_name);
                if (n > 0 && (size_t)n < sizeof child) tmpdir_remove(child);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* The number of entries in a folder (not counting . and ..), or -1. */
static inline int tmpdir_count(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static inline int tmpdir_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Writes bytes to a file plainly (for crafting inputs). Returns 0 on success. */
static inline int tmpdir_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

#endif
