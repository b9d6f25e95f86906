/* The tern program: shared pieces of the subcommands. */
#ifndef TERN_CLI_H
#define TERN_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "tern/error.h"

/* Each subcommand: argv[0] is its name; returns the process exit status. */
int tern_cmd_generate(int argc, char **argv);
int tern_cmd_eval(int argc, char **argv);
int tern_cmd_train(int argc, char **argv);
int tern_cmd_tokenize(int argc, char **argv);
int tern_cmd_info(int argc, char **argv);
int tern_cmd_bench(int argc, char **argv);

/* Prints "tern: error: <message>" on stderr, frees err, and returns 1 (the exit status). */
int cli_fail(tern_error *err);

/* Whether everything printed on stdout was written (a full disk, a closed pipe): flushes it
 * and reports a failure as an error. */
tern_error *cli_check_stdout(void);

/* Strict number parsing for option values: the whole string must be a number within
 * [min, max]; the error names the option. */
tern_error *cli_parse_long(const char *option, const char *text, long min, long max, long *out);
tern_error *cli_parse_int(const char *option, const char *text, int min, int max, int *out);
tern_error *cli_parse_u64(const char *option, const char *text, uint64_t *out);
tern_error *cli_parse_float(const char *option, const char *text, double min, double max,
                            float *out);
/* --recompute's value: "none", or a comma-separated list of gelu and layernorm. */
struct tern_gpt2_memory;
tern_error *cli_parse_recompute(const char *text, struct tern_gpt2_memory *memory);

/* The backend to open: `backend`, with the handler option device=<device> added when
 * `device` (--device N) is given ("cuda" -> "cuda:device=1"; "cuda:gemv=0" ->
 * "cuda:gemv=0,device=1"), in buf. */
const char *cli_backend_on_device(const char *backend, const char *device, char *buf, size_t cap);

/* Option scanning: at argv[*i], if the argument is `name`, takes its value (the next
 * argument) into *value, advances *i and returns true. A missing value is an error. */
bool cli_option(int argc, char **argv, int *i, const char *name, const char **value,
                tern_error **err);

#endif

/* The handler named by --backend, else $TERN_BACKEND, else "cpu". */
const char *cli_default_backend(void);

/* GPT-2's tokenizer: MODEL_DIR/vocab.json and merges.txt when model_dir has them, else
 * $TERN_TOKENIZER_DIR, else the copy in the source tree (data/gpt2-tokenizer). */
#include "tern/tokenizer.h"
tern_error *cli_open_tokenizer(const char *model_dir, tern_tokenizer **out);
/* The folder cli_open_tokenizer reads from. */
const char *cli_tokenizer_dir(const char *model_dir);
