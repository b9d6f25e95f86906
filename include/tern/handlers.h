/* The handlers built into this library, by name. */
#ifndef TERN_HANDLERS_H
#define TERN_HANDLERS_H

#include <stddef.h>

#include "tern/effect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The op table of handler `name` ("cpu", "cuda", "opencl"), or NULL when it is not built in.
 * For tests and tools; models call the handler's functions directly. */
const tern_ops *tern_handler_ops(const char *name);

/* Names of the handlers built in, in a fixed order; count in *count. */
const char *const *tern_handler_names(size_t *count);

/* The devices a handler can choose among, one "index: name" line each, into out (empty when
 * the handler lists none: cpu, or one device only). For `tern info`. */
tern_error *tern_handler_list_devices(const char *name, char *out, size_t cap);

/* Whether `name` is a handler tern knows of at all (built in or not), for error messages. */
int tern_handler_known(const char *name);

#ifdef __cplusplus
}
#endif
#endif
