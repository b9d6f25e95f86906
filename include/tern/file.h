/* Files: atomic writing, whole-file reading, mkdir -p.
 *
 * Every file tern writes goes through tern_atomic_*: the bytes go to a temporary file in the
 * destination's folder, which is flushed to disk and then renamed over the destination. A
 * reader therefore sees the old file or the complete new one, never a partial file, even if
 * the disk fills up or the process dies half way (a dead process leaves only its temporary
 * file, named DEST.tmp.<pid>, never a damaged DEST). */
#ifndef TERN_FILE_H
#define TERN_FILE_H

#include <stddef.h>

#include "tern/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_atomic_file tern_atomic_file;

/* Starts writing `path`: creates the temporary file `path`.tmp.<pid> (another suffix if that
 * exists) with mode 0666 less the umask. Errors name `path` and the reason (missing folder,
 * permission, ...). */
tern_error *tern_atomic_open(const char *path, tern_atomic_file **out);

/* Appends n bytes. On an error (disk full, file too large, I/O error) the file is unusable:
 * the caller must tern_atomic_abort it. */
tern_error *tern_atomic_write(tern_atomic_file *f, const void *data, size_t n);

/* Finishes: flushes, fsyncs, renames the temporary file over `path` and fsyncs the folder.
 * Always consumes f. On an error the temporary file is removed and `path` is untouched, with
 * one exception: when only the final sync of the folder fails, the complete new file is in
 * place but the rename may not survive a crash, and that is reported as an error. */
tern_error *tern_atomic_commit(tern_atomic_file *f);

/* Gives up: removes the temporary file and frees f. NULL is a no-op. */
void tern_atomic_abort(tern_atomic_file *f);

/* Writes n bytes to `path` atomically (open, write, commit). */
tern_error *tern_write_file(const char *path, const void *data, size_t n);

/* Opens `path` for reading only if it is a regular file: the open cannot block (a FIFO is
 * opened non-blocking, then refused), and a folder, pipe, device or socket is an error naming
 * what it is. *fd (blocking, close-on-exec) and *size (fstat's) on success. Every reader of
 * files by name goes through this. */
tern_error *tern_open_regular(const char *path, int *fd, size_t *size);

/* Reads the whole regular file `path` into a new buffer *data of *len bytes, followed by a
 * NUL that *len does not count (so text can be used as a C string). Free with free(). At
 * most the size the file had when opened is read. */
tern_error *tern_read_file(const char *path, char **data, size_t *len);

/* Maps the whole regular file `path` read-only (private), for readers that parse it in
 * place. A mapped file that someone truncates faults (SIGBUS) on access to the lost pages, so
 * only files read once, right after opening, are mapped (model weights); data read during
 * training is read into memory instead. An empty file gives *data NULL and *len 0. Errors name `path` ("cannot open X: it is
 * a folder"). Release with tern_unmap_file. */
tern_error *tern_map_file(const char *path, const void **data, size_t *len);
void tern_unmap_file(const void *data, size_t len);

/* Creates the folder `path` and any missing parents (mode 0777 less the umask), like
 * mkdir -p. An existing folder is fine; an existing non-folder is an error. */
tern_error *tern_make_dirs(const char *path);

#ifdef __cplusplus
}
#endif
#endif
