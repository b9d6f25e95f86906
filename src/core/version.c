#include "tern/tern.h"

const char *tern_version(void) { return TERN_VERSION; }
