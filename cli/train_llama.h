/* tern train for the Llama family (train_llama.c). */
#ifndef TERN_CLI_TRAIN_LLAMA_H
#define TERN_CLI_TRAIN_LLAMA_H

#include "train_support.h"

/* Whether the run's model is of the Llama family: the config.json of --model (or --resume),
 * or --init naming one of its configurations (smollm2-135m, qwen2.5-0.5b, llama-3.2-1b,
 * llama-tiny). */
tern_error *train_is_llama(const train_options *o, bool *out);

/* The whole run: open or initialise, train, checkpoint into --out. */
tern_error *train_llama(const train_options *o);

#endif
