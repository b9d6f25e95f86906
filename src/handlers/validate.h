/* Argument validation shared by every handler: each operation's shape and dtype rules,
 * checked the same way whichever handler answers. */
#ifndef TERN_HANDLERS_VALIDATE_H
#define TERN_HANDLERS_VALIDATE_H

#include "tern/effect.h"

#endif
