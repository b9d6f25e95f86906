/* The on-disk cache of compiled kernels (CUDA cubins), in $TERN_CACHE_DIR, else
 * $XDG_CACHE_HOME/tern, else ~/.cache/tern; TERN_KERNEL_CACHE=0 turns it off. An entry is
 * found by a hash of its key and holds the whole key, compared on load, so a hash
 * collision is a miss, never a wrong kernel. Entries are written atomically; a failure to
 * write is not an error (the cache is an optimisation). */
#ifndef TERN_KERNEL_DISK_CACHE_H
#define TERN_KERNEL_DISK_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* The entry of `kind` ("cuda") under `key`, in *data (malloc'd) and *size; false on a miss. */
bool disk_cache_load(const char *kind, const char *key, void **data, size_t *size);
void disk_cache_store(const char *kind, const char *key, const void *data, size_t size);

#endif
