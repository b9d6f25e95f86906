/* The "broken" handler of the effect check: its bodies, declared from the op list as every
 * handler's are (a body of another signature must not compile). */
#ifndef TERN_TESTS_EFFECT_CHECK_BROKEN_H
#define TERN_TESTS_EFFECT_CHECK_BROKEN_H

#include "handlers/handler.h"

#define BROKEN_DECLARE_BODY_(name, params, args) tern_error *broken_##name params;
TERN_OPS_SEAM(BROKEN_DECLARE_BODY_)
#undef BROKEN_DECLARE_BODY_

#endif
