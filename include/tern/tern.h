/* tern: the umbrella header. */
#ifndef TERN_H
#define TERN_H

#include "tern/error.h"
#include "tern/effect.h"

const char *tern_version(void);

#endif
