/* Small file helpers for the kernel caches and source dumps. */
#ifndef TERN_KERNEL_FILES_H
#define TERN_KERNEL_FILES_H

#include <stddef.h>

#include "tern/error.h"

/* Writes data to path atomically: a temporary file in the same folder, fsync, rename. */
tern_error *kfile_write_atomic(const char *path, const void *data, size_t size);

/* Reads a whole file (at most max bytes) into *data (malloc'd, NUL-terminated), or
 * returns an error (ENOENT is an error too; callers of a cache treat any as a miss). */
tern_error *kfile_read(const char *path, size_t max, char **data, size_t *size);

/* Creates folder path and its parents (mode 0755); an existing folder is fine. */
tern_error *kfile_mkdirs(const char *path);

#endif
