/* The cpu handler's entry points, tern_cpu_<op>: generated around the bodies cpu_<op>. */
#include "cpu.h"

#define TERN_SEAM_BODY(name) cpu_##name
#include "handlers/seam.h"
