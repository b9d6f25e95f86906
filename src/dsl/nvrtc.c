/* NVRTC compiles, shared by tern_nvrtc_compile (CI: compile only) and the cuda runtime. */
#include "dsl/nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/emit.h"

#ifdef TERN_HAVE_CUDA

#include <nvrtc.h>

#include "dsl/compile_error.h"

const char *nvrtc_version_string(void) {
    static char buf[32];
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    snprintf(buf, sizeof buf, "nvrtc %d.%d", major, minor);
    return buf;
}

static bool arch_ok(const char *arch) {
    if (!arch || strncmp(arch, "sm_", 3) || !arch[3]) return false;
    for (const char *p = arch + 3; *p; p++)
        if (!((*p >= '0' && *p <= '9') || *p == 'a' || *p == 'f')) return false;
    return strlen(arch) < 16;
}

tern_error *nvrtc_compile_source(const tern_kernel *k, const char *src, const int32_t *lines,
                                 int32_t nlines, const char *arch, int maxrreg, void **image,
                                 size_t *size) {
    if (image) *image = NULL;
    if (size) *size = 0;
    if (!arch_ok(arch))
        return tern_errorf("kernel '%s': '%s' is not a CUDA architecture like sm_90", k->name,
                           arch ? arch : "(null)");
    char file[96], opt_arch[40];
    snprintf(file, sizeof file, "%s.cu", k->name);
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, file, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return tern_errorf("kernel '%s': nvrtcCreateProgram failed: %s", k->name, nvrtcGetErrorString(r));
    char opt_regs[40];
    snprintf(opt_regs, sizeof opt_regs, "--maxrregcount=%d", maxrreg);
    const char *opts[] = {opt_arch, "--std=c++17", "-default-device", opt_regs};
    r = nvrtcCompileProgram(prog, maxrreg > 0 ? 4 : 3, opts);
    tern_error *err = NULL;
    if (r != NVRTC_SUCCESS) {
        size_t n = 0;
        nvrtcGetProgramLogSize(prog, &n);
        char *log = malloc(n + 1);
        if (log) {
            log[0] = '\0';
            nvrtcGetProgramLog(prog, log);
            log[n] = '\0';
        }
        err = r == NVRTC_ERROR_COMPILATION ? compile_error(k, "cuda (nvrtc)", log ? log : "", lines, nlines)
                                           : tern_errorf("kernel '%s': nvrtcCompileProgram failed: %s",
                                                         k->name, nvrtcGetErrorString(r));
        free(log);
    } else if (image) {
        size_t n = 0;
        r = nvrtcGetCUBINSize(prog, &n);
        char *bin = r == NVRTC_SUCCESS && n ? malloc(n) : NULL;
        if (!bin || nvrtcGetCUBIN(prog, bin) != NVRTC_SUCCESS) {
            free(bin);
            err = tern_errorf("kernel '%s': no cubin from NVRTC for %s", k->name, arch);
        } else {
            *image = bin;
            if (size) *size = n;
        }
    }
    nvrtcDestroyProgram(&prog);
    return err;
}

tern_error *tern_nvrtc_compile(const tern_kernel *k, const char *arch, void **image, size_t *size) {
    (void)arch;
    if (image) *image = NULL;
    if (size) *size = 0;
    if (!k) return tern_errorf("tern_nvrtc_compile: the kernel is NULL");
    char *src = NULL;
    int32_t *lines = NULL, nlines = 0;
    TERN_TRY(emit_source(k, &emit_cuda_dialect, &src, &lines, &nlines));
    tern_error *err = nvrtc_compile_source(k, src, lines, nlines, arch, 0, image, size);
    free(src);
    free(lines);
    return err;
}

#else

const char *nvrtc_version_string(void) { return "no nvrtc"; }

tern_error *nvrtc_compile_source(const tern_kernel *k, const char *src, const int32_t *lines,
                                 int32_t nlines, const char *arch, int maxrreg, void **image,
                                 size_t *size) {
    (void)src, (void)lines, (void)nlines, (void)arch, (void)maxrreg, (void)image, (void)size;
    return tern_errorf("kernel '%s': NVRTC is not built in (no CUDA toolkit when tern was built)", k->name);
}

tern_error *tern_nvrtc_compile(const tern_kernel *k, const char *arch, void **image, size_t *size) {
    (void)arch;
    if (image) *image = NULL;
    if (size) *size = 0;
    return tern_errorf("kernel '%s': NVRTC is not built in (no CUDA toolkit when tern was built)",
                       k ? k->name : "?");
}

#endif
