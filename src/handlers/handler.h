/* Private to handlers and to models compiled per handler.
 *
 * Compiled with TERN_HANDLER defined to the handler's name (cpu, cuda, opencl, host), this
 * header declares that handler's entry points, tern_<h>_<op>, from the op list, and gives
 * TERN_OP(op), the name of an entry point of that handler (what models call). */
#ifndef TERN_HANDLER_H
#define TERN_HANDLER_H

#include "tern/effect.h"

#ifndef TERN_HANDLER
#error "TERN_HANDLER must name the handler this file is compiled for (e.g. -DTERN_HANDLER=cpu)"
#endif

#define TERN_CAT3_(a, b, c) a##b##c
#define TERN_CAT3(a, b, c) TERN_CAT3_(a, b, c)
#define TERN_STR_(x) #x
#define TERN_STR(x) TERN_STR_(x)

/* tern_<handler>_<name> */
#define TERN_OP(name) TERN_CAT3(tern_, TERN_HANDLER, _##name)

#define TERN_DECLARE_OP_(name, params, args) tern_error *TERN_OP(name) params;
TERN_OPS(TERN_DECLARE_OP_)
#undef TERN_DECLARE_OP_

/* The handler's name as a string, e.g. "cpu". */
#define TERN_HANDLER_NAME TERN_STR(TERN_HANDLER)

#endif
