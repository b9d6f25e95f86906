/* The guards of a training run's folder (see train_guard.h). */
#define _DEFAULT_SOURCE /* flock */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tern/file.h"
#include "train_guard.h"

#define LOCK_FILE "train.lock"

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The pid a lock file holds, as text for a message ("pid 123"), or "another process". */
static void lock_holder(int fd, char *out, size_t cap) {
    char text[16] = {0};
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    size_t digits = n > 0 ? strspn(text, "0123456789") : 0;
    if (digits > 0 && digits <= 10 && (text[digits] == '\n' || text[digits] == '\0')) {
        text[digits] = '\0';
        snprintf(out, cap, "pid %s", text);
    } else {
        snprintf(out, cap, "another process");
    }
}

static int held_lock = -1;      /* --out's, held until the process ends */
static int resume_lock = -1;    /* the resumed folder's, shared, while it is read */

/* A folder is a checkpoint once its model is there (a run killed before its first model
 * leaves only files a new run may replace). */
static bool holds_checkpoint(const char *dir) {
    char *p = join(dir, "model.safetensors");
    bool there = p && access(p, F_OK) == 0;
    free(p);
    return there;
}

bool train_same_folder(const char *a, const char *b) {
    struct stat x, y;
    return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev &&
           x.st_ino == y.st_ino;
}

tern_error *train_prepare_out(const char *out, const char *resume) {
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode))
        return tern_errorf("--out %s exists and is not a folder", out);
    TERN_TRY(tern_make_dirs(out));
    bool resumed_here = resume && train_same_folder(out, resume);
    if (!resumed_here && holds_checkpoint(out))
        return tern_errorf("--out %s holds another run's checkpoint: resume it with --resume %s, "
                           "or give another folder", out, out);
    char *path = join(out, LOCK_FILE);
    if (!path) return tern_errorf("out of memory");
    tern_error *err = NULL;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    if (fd < 0) {
        err = tern_errorf("--out %s is not writable: creating %s: %s", out, path, strerror(errno));
    } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char holder[32];
        lock_holder(fd, holder, sizeof holder);
        err = errno == EWOULDBLOCK
                  ? tern_errorf("--out %s is being written by another tern train (%s holds %s)",
                                out, holder, path)
                  : tern_errorf("locking %s: %s", path, strerror(errno));
    } else {
        char pid[24];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
            err = tern_errorf("--out %s is not writable: writing %s: %s", out, path, strerror(errno));
    }
    free(path);
    if (err) {
        if (fd >= 0) close(fd);
        return err;
    }
    held_lock = fd;
    /* A probe of what every save does: a temporary file made in the folder and removed. */
    char *probe = join(out, "run.json");
    tern_atomic_file *f = NULL;
    if (!probe) err = tern_errorf("out of memory");
    else if ((err = tern_atomic_open(probe, &f))) err = tern_error_wrap(err, "--out %s is not writable", out);
    else tern_atomic_abort(f);
    free(probe);
    if (!err) train_remove_temporaries(out);
    return err;
}

tern_error *train_check_not_written(const char *dir) {
    char *path = join(dir, LOCK_FILE);
    if (!path) return tern_errorf("out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    tern_error *err = NULL;
    if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0) {
        char holder[32];
        lock_holder(fd, holder, sizeof holder);
        err = tern_errorf("%s is being written by a tern train (%s holds %s): resume it when that "
                          "run has stopped", dir, holder, path);
        close(fd);
        fd = -1;
    }
    free(path);
    if (fd >= 0) {
        if (resume_lock >= 0) close(resume_lock);
        resume_lock = fd; /* no lock file: no trainer ever wrote here (or one from before locks) */
    }
    return err;
}

void train_release_resume_lock(void) {
    if (resume_lock >= 0) close(resume_lock);
    resume_lock = -1;
}

/* Whether name is NAME.tmp.<digits> or NAME.tmp.<digits>.<digits> with NAME not empty. */
static bool is_temporary(const char *name) {
    size_t n = strlen(name), i = n;
    for (int part = 0; part < 2; part++) {
        size_t end = i;
        while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') i--;
        if (i == end) return false;
        if (i >= 5 && !memcmp(name + i - 5, ".tmp.", 5)) return i > 5;
        if (part == 1 || i == 0 || name[i - 1] != '.') return false;
        i--;
    }
    return false;
}

void train_remove_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_temporary(e->d_name)) continue;
        char *p = join(dir, e->d_name);
        if (p) unlink(p);
        free(p);
    }
    closedir(d);
}

/* ---- signals ---- */

static volatile sig_atomic_t pending;

static void say(const char *text) {
    ssize_t r = write(STDERR_FILENO, text, strlen(text));
    (void)r;
}

static void on_signal(int sig) {
    if (pending) {
        say("\ntern: a second signal: stopping at once (the folder keeps its last whole "
            "checkpoint)\n");
        signal(sig, SIG_DFL);
        raise(sig); /* delivered when this handler returns, with the default action */
        return;
    }
    pending = sig;
    say("\ntern: stopping after this step, with a checkpoint (a second signal stops at once)\n");
}

void train_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int train_signal_pending(void) { return pending; }

/* ---- test hooks ---- */

static tern_error *hook_step(const char *text, size_t len, int *out) {
    char buf[16];
    if (len == 0 || len >= sizeof buf) return tern_errorf("TERN_TEST_HOOK: bad step");
    memcpy(buf, text, len);
    buf[len] = '\0';
    return cli_parse_int("TERN_TEST_HOOK", buf, 1, 1 << 30, out);
}

tern_error *train_hook_parse(const char *text, train_hook *hook) {
    *hook = (train_hook){0};
    if (!text) return NULL;
    while (*text) {
        size_t len = strcspn(text, ",");
        const char *eq = memchr(text, '=', len);
        if (!eq) return tern_errorf("TERN_TEST_HOOK: '%.*s' has no '='", (int)len, text);
        size_t key = (size_t)(eq - text), vlen = len - key - 1;
        const char *v = eq + 1;
        if (key == 10 && !memcmp(text, "kill-after", 10)) {
            const char *at = memchr(v, '@', vlen);
            size_t name = at ? (size_t)(at - v) : 0;
            if (!at || !name || name >= sizeof hook->kill_after)
                return tern_errorf("TERN_TEST_HOOK: kill-after=FILE@STEP");
            memcpy(hook->kill_after, v, name);
            hook->kill_after[name] = '\0';
            TERN_TRY(hook_step(at + 1, vlen - name - 1, &hook->kill_step));
        } else if (key == 7 && !memcmp(text, "stop-at", 7)) {
            TERN_TRY(hook_step(v, vlen, &hook->stop_at));
        } else if (key == 10 && !memcmp(text, "diverge-at", 10)) {
            TERN_TRY(hook_step(v, vlen, &hook->diverge_at));
        } else {
            return tern_errorf("TERN_TEST_HOOK: unknown hook '%.*s'", (int)key, text);
        }
        text += len;
        if (*text == ',') text++;
    }
    return NULL;
}

void train_hook_point(const train_hook *hook, const char *what, int step) {
    if (hook->kill_step == step && !strcmp(hook->kill_after, what)) raise(SIGKILL);
}
