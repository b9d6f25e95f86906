/* Facts shared by the CUDA emitter and runtime. */
#ifndef TERN_KERNEL_EMIT_CUDA_H
#define TERN_KERNEL_EMIT_CUDA_H

/* Threadgroup memory above this many bytes is dynamic shared memory (the kernel carves
 * it; the launch asks for it and raises the function's limit). */
#define CUDA_STATIC_SHARED_LIMIT (48 * 1024)

#endif
