/* Atomic writing, reading whole files, mkdir -p. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "tern/file.h"
#include "tmpdir.h"

/* Reads a file with stdio into a static buffer; returns its length or -1. */
static long slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return (long)n;
}

static void test_commit_and_overwrite(const char *dir) {
    const char *path = tmpdir_path(dir, "a.txt");
    tern_atomic_file *f = NULL;
    CHECK_OK(tern_atomic_open(path, &f));
    CHECK(f != NULL);
    /* Before commit the destination does not exist; only the temporary file does. */
    CHECK(!tmpdir_exists(path));
    CHECK(tmpdir_count(dir) == 1);
    CHECK_OK(tern_atomic_write(f, "hello ", 6));
    CHECK_OK(tern_atomic_write(f, "", 0));
    CHECK_OK(tern_atomic_write(f, "world", 5));
    CHECK_OK(tern_atomic_commit(f));
    char buf[64];
    CHECK(slurp(path, buf, sizeof buf) == 11 && memcmp(buf, "hello world", 11) == 0);
    CHECK(tmpdir_count(dir) == 1); /* no temporary file left */

    /* A write larger than the internal buffer, replacing the old file. */
    size_t big = 1u << 20;
    unsigned char *data = malloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (unsigned char)(i * 7 + 3);
    CHECK_OK(tern_atomic_open(path, &f));
    CHECK_OK(tern_atomic_write(f, data, 100));
    CHECK_OK(tern_atomic_write(f, data + 100, big - 100));
    CHECK_OK(tern_atomic_commit(f));
    char *back;
    size_t len;
    CHECK_OK(tern_read_file(path, &back, &len));
    CHECK(len == big && memcmp(back, data, big) == 0);
    CHECK(back[len] == '\0');
    free(back);
    free(data);
    CHECK(tmpdir_count(dir) == 1);

    /* Mode: 0666 less the umask (not mkstemp's 0600). */
    mode_t old = umask(022);
    CHECK_OK(tern_write_file(path, "x", 1));
    umask(old);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);
    unlink(path);
}

static void test_abort(const char *dir) {
    const char *path = tmpdir_path(dir, "b.txt");
    CHECK_OK(tern_write_file(path, "old", 3));
    tern_atomic_file *f;
    CHECK_OK(tern_atomic_open(path, &f));
    CHECK_OK(tern_atomic_write(f, "new contents", 12));
    tern_atomic_abort(f);
    char buf[16];
    CHECK(slurp(path, buf, sizeof buf) == 3 && memcmp(buf, "old", 3) == 0);
    CHECK(tmpdir_count(dir) == 1);
    tern_atomic_abort(NULL); /* no-op */
    unlink(path);
}

static void test_bad_destinations(const char *dir) {
    tern_atomic_file *f = (tern_atomic_file *)1;
    /* Missing folder: a clear error naming the file, and nothing created anywhere. */
    CHECK_ERR(tern_atomic_open(tmpdir_path(dir, "missing/x.bin"), &f), "No such file or directory");
    CHECK(f == NULL);
    CHECK_ERR(tern_write_file(tmpdir_path(dir, "missing/x.bin"), "x", 1), "missing/x.bin");
    /* A file where a folder should be. */
    CHECK_OK(tern_write_file(tmpdir_path(dir, "plain"), "x", 1));
    CHECK_ERR(tern_write_file(tmpdir_path(dir, "plain/x.bin"), "x", 1), "Not a directory");
    CHECK_ERR(tern_atomic_open("", &f), "empty name");
    CHECK_ERR(tern_atomic_open(tmpdir_path(dir, "sub/"), &f), "names a folder");
    unlink(tmpdir_path(dir, "plain"));
    CHECK(tmpdir_count(dir) == 0);

    /* The destination is a folder: the rename fails at commit, the temporary file goes and
     * the folder stays. */
    const char *sub = tmpdir_path(dir, "sub");
    CHECK(mkdir(sub, 0700) == 0);
    CHECK_OK(tern_atomic_open(sub, &f));
    CHECK_OK(tern_atomic_write(f, "data", 4));
    CHECK_ERR(tern_atomic_commit(f), "renaming");
    struct stat st;
    CHECK(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(tmpdir_count(dir) == 1);
    rmdir(sub);

    /* A read-only folder (permissions do not bind root, which may run these tests). */
    if (geteuid() != 0) {
        const char *ro = tmpdir_path(dir, "ro");
        CHECK(mkdir(ro, 0500) == 0);
        CHECK_ERR(tern_write_file(tmpdir_path(ro, "x.bin"), "x", 1), "Permission denied");
        CHECK(tmpdir_count(ro) == 0);
        chmod(ro, 0700);
        rmdir(ro);
    } else {
        printf("test_file: read-only folder case skipped (running as root)\n");
    }
}

/* A full disk, simulated with a file size limit: writes fail with EFBIG (the process would
 * get SIGXFSZ, which is ignored here). The old file must survive and no temporary file may
 * remain. */
static void test_disk_full(const char *dir) {
    const char *path = tmpdir_path(dir, "big.bin");
    CHECK_OK(tern_write_file(path, "previous", 8));
    struct rlimit old;
    if (getrlimit(RLIMIT_FSIZE, &old) != 0) return;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old;
    small.rlim_cur = 100000;
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);

    size_t big = 1u << 20;
    char *data = calloc(1, big);
    CHECK_ERR(tern_write_file(path, data, big), "File too large");
    /* The same through the step-by-step calls: a small write is buffered, so the failure
     * can surface at commit; either way nothing partial remains. */
    tern_atomic_file *f;
    CHECK_OK(tern_atomic_open(path, &f));
    tern_error *e = tern_atomic_write(f, data, 200000);
    if (e) {
        CHECK(strstr(tern_error_message(e), "big.bin") != NULL);
        tern_error_free(e);
        CHECK_ERR(tern_atomic_write(f, data, 1), "earlier write failed");
        tern_atomic_abort(f);
    } else {
        CHECK_ERR(tern_atomic_commit(f), "File too large");
    }
    CHECK_OK(tern_atomic_open(path, &f));
    CHECK_OK(tern_atomic_write(f, data, 60000));
    CHECK_OK(tern_atomic_write(f, data, 60000)); /* still buffered */
    CHECK_ERR(tern_atomic_commit(f), "File too large");

    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, old_handler);
    free(data);
    char buf[16];
    CHECK(slurp(path, buf, sizeof buf) == 8 && memcmp(buf, "previous", 8) == 0);
    CHECK(tmpdir_count(dir) == 1);
    unlink(path);
}

/* A temporary file left by a dead process that had our pid is neither used nor removed. */
static void test_stale_temporary(const char *dir) {
    const char *path = tmpdir_path(dir, "c.txt");
    char stale[4200];
    snprintf(stale, sizeof stale, "%s.tmp.%ld", path, (long)getpid());
    CHECK(tmpdir_write(stale, "stale", 5) == 0);
    CHECK_OK(tern_write_file(path, "fresh", 5));
    char buf[16];
    CHECK(slurp(path, buf, sizeof buf) == 5 && memcmp(buf, "fresh", 5) == 0);
    CHECK(slurp(stale, buf, sizeof buf) == 5 && memcmp(buf, "stale", 5) == 0);
    CHECK(tmpdir_count(dir) == 2);
    unlink(stale);
    unlink(path);
}

static void test_read_file(const char *dir) {
    char *data = (char *)1;
    size_t len = 99;
    CHECK_ERR(tern_read_file(tmpdir_path(dir, "nope"), &data, &len), "No such file");
    CHECK(data == NULL && len == 0);
    CHECK_ERR(tern_read_file(dir, &data, &len), "folder");
    const char *empty = tmpdir_path(dir, "empty");
    CHECK(tmpdir_write(empty, "", 0) == 0);
    CHECK_OK(tern_read_file(empty, &data, &len));
    CHECK(len == 0 && data && data[0] == '\0');
    free(data);
    const char *bin = tmpdir_path(dir, "bin");
    CHECK(tmpdir_write(bin, "a\0b", 3) == 0);
    CHECK_OK(tern_read_file(bin, &data, &len));
    CHECK(len == 3 && memcmp(data, "a\0b", 4) == 0);
    free(data);
    unlink(empty);
    unlink(bin);
}

/* Only regular files are read: a FIFO without a writer (whose blocking open would wait
 * forever), a device and a folder are errors naming what they are, for every reader. */
static void test_not_regular(const char *dir) {
    const char *fifo = tmpdir_path(dir, "fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    char *data = NULL;
    size_t len = 0;
    const void *map = NULL;
    int fd = -1;
    CHECK_ERR(tern_read_file(fifo, &data, &len), "it is a pipe (FIFO), not a regular file");
    CHECK_ERR(tern_map_file(fifo, &map, &len), "it is a pipe (FIFO)");
    CHECK_ERR(tern_open_regular(fifo, &fd, &len), "it is a pipe (FIFO)");
    CHECK(fd == -1);
    CHECK_ERR(tern_read_file("/dev/zero", &data, &len), "it is a device");
    CHECK_ERR(tern_map_file(dir, &map, &len), "it is a folder");
    unlink(fifo);
    /* A regular file opens blocking (reads wait for data, never EAGAIN) with its size. */
    const char *plain = tmpdir_path(dir, "plain.txt");
    CHECK(tmpdir_write(plain, "12345", 5) == 0);
    CHECK_OK(tern_open_regular(plain, &fd, &len));
    CHECK(fd >= 0 && len == 5 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
    if (fd >= 0) close(fd);
    unlink(plain);
}

/* Messages are one printable line: control bytes, bytes that are not UTF-8 and Unicode's
 * C1 controls and line separators escaped; printable UTF-8 kept; escaping is idempotent. */
static void test_printable(void) {
    char *p = tern_printable_copy("a\nb\tc\r\x1b[31m\x7f");
    CHECK(p && !strcmp(p, "a\\nb\\tc\\r\\x1b[31m\\x7f"));
    free(p);
    p = tern_printable_copy("caf\xc3\xa9 \xff \xc2\x9b \xe2\x80\xa8 \xe2\x82\xac \xed\xa0\x80 \xc0\xaf");
    CHECK(p && !strcmp(p, "caf\xc3\xa9 \\xff \\xc2\\x9b \\xe2\\x80\\xa8 \xe2\x82\xac \\xed\\xa0\\x80 \\xc0\\xaf"));
    char *q = p ? tern_printable_copy(p) : NULL;
    CHECK(q && p && !strcmp(p, q));
    free(p);
    free(q);
    tern_error *err = tern_errorf("cannot read %s", "x\ny");
    CHECK(!strcmp(tern_error_message(err), "cannot read x\\ny"));
    err = tern_error_wrap(err, "loading %s", "\x01");
    CHECK(!strcmp(tern_error_message(err), "loading \\x01: cannot read x\\ny"));
    tern_error_free(err);
}

static void test_make_dirs(const char *dir) {
    const char *deep = tmpdir_path(dir, "x/y/z");
    CHECK_OK(tern_make_dirs(deep));
    struct stat st;
    CHECK(stat(deep, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_OK(tern_make_dirs(deep));                       /* exists: fine */
    CHECK_OK(tern_make_dirs(tmpdir_path(dir, "x/y/w/"))); /* trailing slash */
    CHECK(stat(tmpdir_path(dir, "x/y/w"), &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_OK(tern_write_file(tmpdir_path(dir, "x/file"), "x", 1));
    CHECK_ERR(tern_make_dirs(tmpdir_path(dir, "x/file")), "not a folder");
    CHECK_ERR(tern_make_dirs(tmpdir_path(dir, "x/file/deeper")), "x/file");
    CHECK_ERR(tern_make_dirs(""), "empty name");
    tmpdir_remove(tmpdir_path(dir, "x"));
}

int main(void) {
    const char *dir = tmpdir_make();
    test_commit_and_overwrite(dir);
    test_abort(dir);
    test_bad_destinations(dir);
    test_disk_full(dir);
    test_stale_temporary(dir);
    test_read_file(dir);
    test_not_regular(dir);
    test_printable();
    test_make_dirs(dir);
    tmpdir_remove(dir);
    return check_summary("test_file");
}
