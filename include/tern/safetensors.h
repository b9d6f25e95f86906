/* safetensors files: a validating reader (memory-mapped) and an atomic writer.
 *
 * The format: an 8-byte little-endian header length N, N bytes of JSON, then the data
 * section. The JSON object maps each tensor name to {"dtype", "shape", "data_offsets":
 * [begin, end]} (byte offsets into the data section) and may hold "__metadata__", an object
 * of string values (or null). The reader checks every field: header at most 100 MB, strict
 * JSON (RFC 8259: no control characters in strings, no numbers such as 01) in UTF-8, known
 * dtypes, non-negative integer shapes whose byte size matches the offsets, tensors that do
 * not overlap and together cover the whole data section, unique names. Unknown fields of a
 * tensor entry are ignored. That is what the reference implementation (the `safetensors`
 * Python package) accepts, with these differences, all deliberate:
 *  - a name given twice is an error (the reference keeps the last copy);
 *  - at most TERN_SAFETENSORS_MAX_DIMS dimensions;
 *  - the sub-byte dtypes (F4, F6_*) are refused;
 *  - an integral number written as 2.0 or 2e0 is taken as the integer 2.
 * A differential run over ~750 fuzzer-generated headers found no other disagreement.
 *
 * Tensors of dtypes that tern_dtype lacks (I64, U8, BOOL, F64, ...) load, with `supported`
 * false, so that a file holding them (the hub's GPT-2 checkpoints hold mask buffers) opens;
 * callers skip them, and converting them is an error. tern assumes a little-endian host, as
 * the format's data is little-endian. */
#ifndef TERN_SAFETENSORS_H
#define TERN_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/effect.h"
#include "tern/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_SAFETENSORS_MAX_DIMS 8
#define TERN_SAFETENSORS_MAX_HEADER 100000000u /* bytes, as the reference implementation */

typedef struct tern_safetensors tern_safetensors;

typedef struct tern_tensor_info {
    const char *name;
    const char *dtype_name; /* as in the file: "F32", "BF16", "I64", ... */
    bool supported;         /* the dtype is one of tern_dtype: dtype is meaningful */
    tern_dtype dtype;
    size_t elem_size; /* bytes per element (known for every dtype) */
    int ndim;         /* 0 (a scalar) to TERN_SAFETENSORS_MAX_DIMS */
    int64_t shape[TERN_SAFETENSORS_MAX_DIMS];
    size_t count;     /* elements: the product of shape (1 for a scalar) */
    size_t nbytes;    /* count * elem_size */
    size_t offset;    /* of the data within the data section */
    const void *data; /* nbytes bytes, little-endian, NOT necessarily aligned */
} tern_tensor_info;

/* Opens and validates the file (memory-mapped, read-only). Errors name the file and the
 * tensor or field at fault. */
tern_error *tern_safetensors_open(const char *path, tern_safetensors **out);

/* The same over `len` bytes in memory, which must stay valid and unchanged until close.
 * `name` is used in error messages. */
tern_error *tern_safetensors_open_memory(const void *bytes, size_t len, const char *name,
                                         tern_safetensors **out);

void tern_safetensors_close(tern_safetensors *f); /* NULL is a no-op */

/* Tensors in data order (by offset); i < count. */
size_t tern_safetensors_count(const tern_safetensors *f);
const tern_tensor_info *tern_safetensors_at(const tern_safetensors *f, size_t i);
/* The tensor called `name`, or NULL. */
const tern_tensor_info *tern_safetensors_find(const tern_safetensors *f, const char *name);

/* A value of "__metadata__", or NULL when absent. */
const char *tern_safetensors_metadata(const tern_safetensors *f, const char *key);

/* Converts t's t->count elements into dst, which holds t->count elements of `to`.
 *  - to F32, BF16 or F16: from F32, BF16, F16, I32 or U16; rounding to nearest even (exact
 *    where the value fits; an I32 beyond 2^24 rounds once to f32 and again to a half type);
 *  - to I32: from I32 or U16;  to U16: from U16.
 * Anything else (including every unsupported dtype) is an error naming the tensor. */
tern_error *tern_tensor_convert(const tern_tensor_info *t, tern_dtype to, void *dst);

/* A tensor to write. data holds count(shape) elements of dtype, in native (little-endian)
 * order; it may be NULL only when that count is 0. */
typedef struct tern_tensor_out {
    const char *name;
    tern_dtype dtype;
    int ndim;
    int64_t shape[TERN_SAFETENSORS_MAX_DIMS];
    const void *data;
} tern_tensor_out;

/* Writes n tensors to `path` atomically, in the order given, contiguously. The header's
 * "__metadata__" holds the pairs of metadata_kv (key, value, key, value, ..., NULL; NULL
 * for none) and "format": "pt" unless a pair sets "format" (Hugging Face transformers
 * refuses files without it). Names must be unique, non-empty, valid UTF-8 and not
 * "__metadata__". */
tern_error *tern_safetensors_write(const char *path, const tern_tensor_out *tensors, size_t n,
                                   const char *const *metadata_kv);

#ifdef __cplusplus
}
#endif
#endif
