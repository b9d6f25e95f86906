/* The seam: every handler's entry points, generated from the op list. Included once per
 * handler, by its entries.c, after defining
 *
 *   TERN_SEAM_BODY(name)       the function that answers op `name` (the body), with the op
 *                              list's signature: cpu_##name, or gpu_##name for the GPU
 *                              handlers, whose bodies are the GPU core's (src/gpu_core);
 *   TERN_SEAM_CALL(name, args) optionally, how the entry calls the body (a handler's hooks:
 *                              cuda makes its context current and profiles); by default
 *                              `return TERN_SEAM_BODY(name) args;`.
 *
 * Each entry tern_<h>_<op> (every op of TERN_OPS_SEAM; open and close are the handler's own)
 * is: the device check, the op's shared validation (tern_validate_<op>, validate.h: the same
 * rules and messages on every handler), then the body. Bodies do not validate again, and a
 * body that needs another operation calls that operation's body, not its entry. */
#ifndef TERN_HANDLERS_SEAM_H
#define TERN_HANDLERS_SEAM_H

#include "handlers/handler.h"
#include "handlers/validate.h"

#ifndef TERN_SEAM_BODY
#error "define TERN_SEAM_BODY(name), the body of op name, before including handlers/seam.h"
#endif
#ifndef TERN_SEAM_CALL
#define TERN_SEAM_CALL(name, args) return TERN_SEAM_BODY(name) args;
#endif

/* The bodies, declared from the list: a body of another signature does not compile. */
#define TERN_SEAM_DECLARE_BODY_(name, params, args) tern_error *TERN_SEAM_BODY(name) params;
TERN_OPS_SEAM(TERN_SEAM_DECLARE_BODY_)
#undef TERN_SEAM_DECLARE_BODY_

#define TERN_SEAM_ENTRY_(name, params, args)                                              \
    tern_error *TERN_OP(name) params {                                                    \
        if (!d) return tern_errorf(#name ": the device is NULL");                         \
        TERN_TRY(tern_validate_##name args);                                              \
        TERN_SEAM_CALL(name, args)                                                        \
    }
TERN_OPS_SEAM(TERN_SEAM_ENTRY_)
#undef TERN_SEAM_ENTRY_

#endif
