/* What keeps a training run's folder whole: the --out checks before training, the lock that
 * keeps a second trainer out, the removal of an interrupted save's temporary files, the
 * signals that stop a run with a checkpoint, and the test-only fault hooks. */
#ifndef TERN_CLI_TRAIN_GUARD_H
#define TERN_CLI_TRAIN_GUARD_H

#include "tern/error.h"
#include "train_support.h"

/* Readies --out before the first step: it must be a folder or not exist (it is created), be
 * writable (a temporary file is made and removed there), and hold no other run's
 * checkpoint unless it is the folder resumed. Then takes its lock, DIR/train.lock (flock:
 * the kernel drops it when the holder dies); a folder locked by another trainer is an error
 * naming that process. The lock is held until the process ends. Last, removes what an
 * interrupted save left (train_remove_temporaries). */
tern_error *train_prepare_out(const char *out, const char *resume);

#include <stdbool.h>

/* Whether the two paths name one folder (both must exist). */
bool train_same_folder(const char *a, const char *b);

/* Refuses to resume from DIR while another trainer writes it (its lock is held); otherwise
 * holds a shared lock on it until train_release_resume_lock, so none starts meanwhile. */
tern_error *train_check_not_written(const char *dir);

/* Lets the resumed folder go once its checkpoint is read. */
void train_release_resume_lock(void);

/* Removes the temporary files of interrupted saves in DIR: NAME.tmp.<pid>[.<n>], as
 * tern_atomic_open names them. Only the lock's holder calls it. */
void train_remove_temporaries(const char *dir);

/* SIGINT and SIGTERM: the first sets a flag that the training loop reads between steps (it
 * then writes a checkpoint and stops); a second stops the process at once. */
void train_signals_install(void);
int train_signal_pending(void); /* the first signal's number, or 0 */

/* Parses $TERN_TEST_HOOK into o->hook (absent: no hook). */
tern_error *train_hook_parse(const char *text, train_hook *hook);
/* The moment `what` of the checkpoint at `step`: SIGKILL when the hook asks for it. */
void train_hook_point(const train_hook *hook, const char *what, int step);

#endif
