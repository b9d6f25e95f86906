/* Which of the handlers a model is compiled for a backend string names, for every model's
 * front (compiled once). The handlers built in are TERN_MODEL_HANDLERS(X) of the generated
 * model_handlers.h: one X(h) each. */
#ifndef TERN_MODELS_COMMON_HANDLER_CHOICE_H
#define TERN_MODELS_COMMON_HANDLER_CHOICE_H

#include <stddef.h>

#include "tern/error.h"

/* backend: a handler's name, then optionally ':' and its options ("cuda:device=1"). *index
 * gets the name's place among names [n]; *options points after the ':' (NULL without). */
tern_error *model_choose_handler(const char *backend, const char *const *names, size_t n, size_t *index,
                                 const char **options);

#endif
