/* Atomic file writing, whole-file reading and mkdir -p (see tern/file.h). */
#include "tern/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Small writes are gathered here so that writing a header field by field costs few system
 * calls; writes at least this large go straight to the file. */
#define ATOMIC_BUFFER_SIZE (256u * 1024u)

struct tern_atomic_file {
    char *path;     /* destination */
    char *tmp_path; /* where the bytes go until commit */
    int fd;
    int failed; /* an earlier write failed: refuse further use */
    size_t used;
    unsigned char buffer[ATOMIC_BUFFER_SIZE];
};

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy) memcpy(copy, s, n);
    return copy;
}

/* The folder holding `path` ("." when it has no slash). */
static char *parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return copy_string(".");
    if (slash == path) return copy_string("/");
    size_t n = (size_t)(slash - path);
    char *dir = malloc(n + 1);
    if (!dir) return NULL;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return dir;
}

tern_error *tern_atomic_open(const char *path, tern_atomic_file **out) {
    *out = NULL;
    if (!path || !*path) return tern_errorf("cannot write a file with an empty name");
    size_t len = strlen(path);
    if (path[len - 1] == '/') return tern_errorf("cannot write %s: it names a folder", path);
    tern_atomic_file *f = malloc(sizeof *f);
    if (!f) return tern_errorf("writing %s: out of memory", path);
    f->path = copy_string(path);
    f->tmp_path = malloc(len + 64);
    if (!f->path || !f->tmp_path) {
        free(f->path);
        free(f->tmp_path);
        free(f);
        return tern_errorf("writing %s: out of memory", path);
    }
    f->fd = -1;
    f->failed = 0;
    f->used = 0;
    /* O_EXCL: never write through a file (or link) that someone else left under our name. A
     * stale temporary file from a dead process with our pid gets a numbered neighbour. */
    long pid = (long)getpid();
    int err = 0;
    for (int attempt = 0; attempt < 100; attempt++) {
        if (attempt == 0)
            snprintf(f->tmp_path, len + 64, "%s.tmp.%ld", path, pid);
        else
            snprintf(f->tmp_path, len + 64, "%s.tmp.%ld.%d", path, pid, attempt);
        f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0) break;
        err = errno;
        if (err != EEXIST) break;
    }
    if (f->fd < 0) {
        tern_error *e =
            tern_errorf("cannot write %s: creating %s: %s", path, f->tmp_path, strerror(err));
        free(f->path);
        free(f->tmp_path);
        free(f);
        return e;
    }
    *out = f;
    return NULL;
}

/* Writes all n bytes to fd, retrying short writes and interruptions. Returns 0 or an errno. */
static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (w == 0) return EIO; /* a regular file never legitimately takes zero bytes */
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static tern_error *flush_buffer(tern_atomic_file *f) {
    if (f->used == 0) return NULL;
    int err = write_all(f->fd, f->buffer, f->used);
    f->used = 0;
    if (err) {
        f->failed = 1;
        return tern_errorf("writing %s: %s", f->path, strerror(err));
    }
    return NULL;
}

tern_error *tern_atomic_write(tern_atomic_file *f, const void *data, size_t n) {
    if (!f) return tern_errorf("writing to a file that is not open");
    if (f->failed) return tern_errorf("writing %s: an earlier write failed", f->path);
    if (n == 0) return NULL;
    const unsigned char *p = data;
    if (n < ATOMIC_BUFFER_SIZE - f->used) {
        memcpy(f->buffer + f->used, p, n);
        f->used += n;
        return NULL;
    }
    TERN_TRY(flush_buffer(f));
    if (n < ATOMIC_BUFFER_SIZE) {
        memcpy(f->buffer, p, n);
        f->used = n;
        return NULL;
    }
    int err = write_all(f->fd, p, n);
    if (err) {
        f->failed = 1;
        return tern_errorf("writing %s: %s", f->path, strerror(err));
    }
    return NULL;
}

static void free_file(tern_atomic_file *f) {
    free(f->path);
    free(f->tmp_path);
    free(f);
}

void tern_atomic_abort(tern_atomic_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    unlink(f->tmp_path);
    free_file(f);
}

/* Makes the rename itself durable. Some file systems cannot fsync a folder (EINVAL); the
 * file's own data is already on disk then, so that is not an error. */
static tern_error *sync_dir(const char *path) {
    char *dir = parent_dir(path);
    if (!dir) return tern_errorf("writing %s: out of memory", path);
    tern_error *e = NULL;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS && errno != EBADF)
            e = tern_errorf("writing %s: syncing folder %s: %s", path, dir, strerror(errno));
        close(fd);
    }
    free(dir);
    return e;
}

tern_error *tern_atomic_commit(tern_atomic_file *f) {
    if (!f) return tern_errorf("committing a file that is not open");
    tern_error *e = NULL;
    if (f->failed) {
        e = tern_errorf("writing %s: an earlier write failed", f->path);
        goto fail;
    }
    if ((e = flush_buffer(f))) goto fail;
    if (fsync(f->fd) != 0) {
        e = tern_errorf("writing %s: syncing to disk: %s", f->path, strerror(errno));
        goto fail;
    }
    int fd = f->fd;
    f->fd = -1;
    if (close(fd) != 0) {
        e = tern_errorf("writing %s: closing: %s", f->path, strerror(errno));
        goto fail;
    }
    if (rename(f->tmp_path, f->path) != 0) {
        e = tern_errorf("writing %s: renaming %s into place: %s", f->path, f->tmp_path,
                        strerror(errno));
        goto fail;
    }
    /* The file is complete and in place; a failure to sync the folder is still reported,
     * since the rename may not survive a crash. */
    e = sync_dir(f->path);
    free_file(f);
    return e;
fail:
    tern_atomic_abort(f);
    return e;
}

tern_error *tern_write_file(const char *path, const void *data, size_t n) {
    tern_atomic_file *f;
    TERN_TRY(tern_atomic_open(path, &f));
    tern_error *e = tern_atomic_write(f, data, n);
    if (e) {
        tern_atomic_abort(f);
        return e;
    }
    return tern_atomic_commit(f);
}

tern_error *tern_open_regular(const char *path, int *fd_out, size_t *size) {
    *fd_out = -1;
    *size = 0;
    if (!path || !*path) return tern_errorf("cannot read a file with an empty name");
    /* O_NONBLOCK: opening a FIFO for reading blocks until a writer comes; with it the open
     * returns at once and fstat tells what the path is. Regular files ignore the flag, which
     * is cleared anyway before any read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return tern_errorf("cannot open %s: %s", path, strerror(errno));
    struct stat st;
    const char *why = NULL;
    int saved = 0;
    if (fstat(fd, &st) != 0) saved = errno;
    else if (S_ISDIR(st.st_mode)) why = "it is a folder, not a regular file";
    else if (S_ISFIFO(st.st_mode)) why = "it is a pipe (FIFO), not a regular file";
    else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) why = "it is a device, not a regular file";
    else if (S_ISSOCK(st.st_mode)) why = "it is a socket, not a regular file";
    else if (!S_ISREG(st.st_mode)) why = "not a regular file";
    else if ((uintmax_t)st.st_size >= (uintmax_t)SIZE_MAX / 2) why = "too large for memory";
    else {
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) saved = errno;
    }
    if (saved || why) {
        close(fd);
        return tern_errorf("cannot read %s: %s", path, why ? why : strerror(saved));
    }
    *fd_out = fd;
    *size = (size_t)st.st_size;
    return NULL;
}

tern_error *tern_read_file(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd;
    size_t size;
    TERN_TRY(tern_open_regular(path, &fd, &size));
    /* Bounded by the size fstat gave: a file that grows while it is read (someone appending
     * to it) is read up to that size, and one that shrinks ends early, never past it. */
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return tern_errorf("cannot read %s: out of memory for %zu bytes", path, size + 1);
    }
    size_t n = 0;
    while (n < size) {
        ssize_t r = read(fd, buf + n, size - n < ((size_t)1 << 30) ? size - n : (size_t)1 << 30);
        if (r < 0) {
            if (errno == EINTR) continue;
            tern_error *e = tern_errorf("cannot read %s: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return e;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return NULL;
}

tern_error *tern_make_dirs(const char *path) {
    if (!path || !*path) return tern_errorf("cannot create a folder with an empty name");
    char *p = copy_string(path);
    if (!p) return tern_errorf("creating folder %s: out of memory", path);
    tern_error *e = NULL;
    /* Create each prefix ending at a slash, then the whole path. */
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0) {
            /* Existing folders may answer EEXIST, or EACCES/EROFS where we could not have
             * created them anyway: what matters is whether a folder is there now. */
            int err = errno;
            struct stat st;
            if (stat(p, &st) != 0) {
                e = tern_errorf("cannot create folder %s: %s: %s", path, p, strerror(err));
                break;
            }
            if (!S_ISDIR(st.st_mode)) {
                e = tern_errorf("cannot create folder %s: %s exists and is not a folder", path, p);
                break;
            }
        }
        *s = saved;
        if (saved == '\0') break;
    }
    free(p);
    return e;
}

tern_error *tern_map_file(const char *path, const void **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd;
    size_t size;
    TERN_TRY(tern_open_regular(path, &fd, &size));
    if (size == 0) {
        close(fd);
        return NULL;
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd); /* the mapping keeps the file */
    if (map == MAP_FAILED) return tern_errorf("cannot map %s: %s", path, strerror(map_errno));
    *data = map;
    *len = size;
    return NULL;
}

void tern_unmap_file(const void *data, size_t len) {
    if (data && len) munmap((void *)data, len);
}
