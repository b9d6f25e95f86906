/* Names the emitted source may not give to user values: keywords and builtins of C, C++,
 * CUDA, OpenCL C and Metal, the math functions the emitters call, and the prefixes and
 * shapes of names the emitters make themselves (tern_*, __*, t<digits>, v<digits>). */
#include <stdlib.h>
#include <string.h>

#include "dsl/emit.h"

static const char *const reserved[] = {
    /* C, C++ */
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char",
    "class", "const", "constexpr", "continue", "decltype", "default", "delete", "do", "double",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
    "if", "inline", "int", "long", "main", "mutable", "namespace", "new", "noexcept", "not",
    "nullptr", "operator", "or", "private", "protected", "public", "register", "restrict",
    "return", "short", "signed", "sizeof", "static", "struct", "switch", "template", "this",
    "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
    "virtual", "void", "volatile", "while", "xor", "NULL", "INFINITY", "NAN",
    /* CUDA */
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "printf", "atomicAdd",
    "atomicMin", "atomicMax", "atomicAnd", "atomicOr", "atomicXor", "atomicExch", "atomicCAS",
    /* OpenCL C */
    "kernel", "global", "local", "constant", "private", "read_only", "write_only", "uchar",
    "ushort", "uint", "ulong", "half", "size_t", "ptrdiff_t", "intptr_t", "uintptr_t",
    "barrier", "vload2", "vload4", "vload8", "vstore2", "vstore4", "vstore8", "event_t",
    "sampler_t", "image2d_t",
    /* Metal */
    "device", "threadgroup", "thread", "metal", "vertex", "fragment", "uint2", "uint3", "uint4",
    "float2", "float3", "float4", "int2", "int3", "int4", "ushort2", "ushort4", "bfloat",
    "simd_sum", "simd_max", "simd_min", "simd_shuffle", "simd_ballot", "simd_any", "simd_all",
    "simd_shuffle_xor", "simd_shuffle_up", "simd_shuffle_down", "simd_broadcast", "simd_vote",
    "simd_prefix_exclusive_sum", "simd_prefix_inclusive_sum",
    /* OpenCL C builtins a kernel name could shadow */
    "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_and", "atomic_or",
    "atomic_xor", "atomic_xchg", "atomic_cmpxchg", "atomic_inc", "atomic_dec", "mad",
    "dot", "length", "normalize", "mix", "step", "sign", "vload_half", "vstore_half",
    "threadgroup_barrier", "mem_flags", "as_type",
    /* math the emitters call */
    "min", "max", "fmin", "fmax", "fminf", "fmaxf", "abs", "fabs", "fabsf", "llabs", "exp",
    "expf", "exp2", "exp2f", "log", "logf", "log2", "log2f", "sqrt", "sqrtf", "rsqrt", "rsqrtf",
    "tanh", "tanhf", "erf", "erff", "sin", "sinf", "cos", "cosf", "floor", "floorf", "ceil",
    "ceilf", "round", "roundf", "trunc", "truncf", "isnan", "isinf", "pow", "powf", "fma",
    "fmaf", "fmod", "fmodf", "select", "clamp",
};

bool emit_reserved_kernel_name(const char *name) {
    if (!strncmp(name, "tern_", 5) || !strncmp(name, "__", 2)) return true;
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (!strcmp(name, reserved[i])) return true;
    return false;
}

bool emit_reserved(const char *name) {
    if (!strncmp(name, "tern_", 5) || !strncmp(name, "__", 2) || !strncmp(name, "get_", 4) ||
        !strncmp(name, "atomic_", 7) || !strncmp(name, "convert_", 8) || !strncmp(name, "as_", 3))
        return true;
    if ((name[0] == 't' || name[0] == 'v') && name[1]) {
        const char *p = name + 1;
        while (*p >= '0' && *p <= '9') p++;
        if (!*p) return true;
    }
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (!strcmp(name, reserved[i])) return true;
    return false;
}
