/* Which handler a backend string names (handler_choice.h). */
#include "handler_choice.h"

#include <stdio.h>
#include <string.h>

#include "tern/handlers.h"

tern_error *model_choose_handler(const char *backend, const char *const *names, size_t n, size_t *index,
                                 const char **options) {
    const char *colon = strchr(backend, ':');
    size_t len = colon ? (size_t)(colon - backend) : strlen(backend);
    *options = colon ? colon + 1 : NULL;
    for (size_t i = 0; i < n; i++) {
        if (strlen(names[i]) == len && !strncmp(names[i], backend, len)) {
            *index = i;
            return NULL;
        }
    }
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), backend);
    if (tern_handler_known(name))
        return tern_errorf("backend '%s' is not built into this tern (see 'tern info')", name);
    return tern_errorf("unknown backend '%s' (expected cpu, cuda, opencl or interp)", name);
}
