/* Argument validation shared by every handler. */
#include "validate.h"
