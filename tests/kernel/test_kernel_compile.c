/* Target compilers over emitted kernels, no GPU needed:
 *   - NVRTC compiles every zoo kernel to a cubin for sm_90 (when built with the CUDA toolkit);
 *   - clang syntax-checks every zoo kernel's Metal source against metal_shim/metal_stdlib;
 *   - with folders as arguments, the same for every *.cu and *.metal in them (sources that
 *     TERN_KERNEL_DUMP_DIR made while the examples or other tests ran).
 * A missing compiler skips its checks with a note rather than failing. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "zoo.h"

#ifdef TERN_TEST_NVRTC
#include <nvrtc.h>
#endif

static const char *clangxx(void) {
#ifdef TERN_CLANGXX
    return TERN_CLANGXX;
#else
    return NULL;
#endif
}

/* Syntax-checks Metal source with clang and the shim; prints clang's output on failure. */
static bool metal_ok(const char *name, const char *src) {
    char path[] = "/tmp/tern_metal_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return false;
    size_t n = strlen(src);
    bool wrote = write(fd, src, n) == (ssize_t)n;
    close(fd);
    char log[64];
    snprintf(log, sizeof log, "%s.log", path);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' -fsyntax-only -std=c++17 -x c++ -Wall -Wno-unknown-attributes -Wno-unused-variable "
             "-Wno-unused-function -I'%s/tests/kernel/metal_shim' '%s' > '%s' 2>&1",
             clangxx(), getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".", path, log);
    int rc = wrote ? system(cmd) : -1;
    if (rc != 0) {
        fprintf(stderr, "metal syntax check of %s failed:\n", name);
        FILE *f = fopen(log, "r");
        if (f) {
            char line[512];
            int lines = 0;
            while (fgets(line, sizeof line, f) && lines++ < 20) fputs(line, stderr);
            fclose(f);
        }
    }
    unlink(path);
    unlink(log);
    return rc == 0;
}

#ifdef TERN_TEST_NVRTC
static bool nvrtc_ok(const char *name, const char *src) {
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL) != NVRTC_SUCCESS) return false;
    const char *opts[] = {"--gpu-architecture=sm_90", "--std=c++17", "-default-device"};
    nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
    if (r != NVRTC_SUCCESS) {
        size_t size = 0;
        nvrtcGetProgramLogSize(prog, &size);
        char *log = malloc(size + 1);
        if (log) {
            nvrtcGetProgramLog(prog, log);
            log[size] = '\0';
            fprintf(stderr, "nvrtc compile of %s failed:\n%s\n", name, log);
            free(log);
        }
    }
    nvrtcDestroyProgram(&prog);
    return r == NVRTC_SUCCESS;
}
#endif

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) == (size_t)n) {
        s[n] = '\0';
    } else {
        free(s);
        s = NULL;
    }
    fclose(f);
    return s;
}

static void check_folder(const char *dir) {
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open %s", dir);
    if (!d) return;
    int cu = 0, metal = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        const char *dot = strrchr(ent->d_name, '.');
        if (!dot) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        if (!strcmp(dot, ".cu")) {
#ifdef TERN_TEST_NVRTC
            char *src = read_all(path);
            CHECKF(src && nvrtc_ok(ent->d_name, src), "%s compiles with NVRTC", path);
            free(src);
            cu++;
#endif
        } else if (!strcmp(dot, ".metal") && clangxx()) {
            char *src = read_all(path);
            CHECKF(src && metal_ok(ent->d_name, src), "%s passes the Metal syntax check", path);
            free(src);
            metal++;
        }
    }
    closedir(d);
    printf("%s: %d CUDA and %d Metal sources checked\n", dir, cu, metal);
    /* a folder of dumped sources holds at least one kernel, or the dump did not happen */
    bool any_compiler = clangxx() != NULL;
#ifdef TERN_TEST_NVRTC
    any_compiler = true;
#endif
    CHECKF(!any_compiler || cu + metal > 0, "%s holds no kernel sources", dir);
}

int main(int argc, char **argv) {
    if (!clangxx()) printf("note: no clang++ found at configure time: Metal syntax checks skipped\n");
#ifndef TERN_TEST_NVRTC
    printf("note: built without the CUDA toolkit: NVRTC compiles skipped\n");
#endif
    if (argc > 1) {
        for (int i = 1; i < argc; i++) check_folder(argv[i]);
        return check_summary("test_kernel_compile");
    }
    for (int c = 0; c < zoo_count; c++) {
        tern_kernel *k = NULL;
        CHECK_OK(tern_kernel_build(zoo_cases[c].name, zoo_cases[c].trace, zoo_cases[c].user, &k));
        if (!k) continue;
#ifdef TERN_TEST_NVRTC
        void *cubin = NULL;
        size_t size = 0;
        tern_error *err = tern_nvrtc_compile(k, "sm_90", &cubin, &size);
        CHECK_OK(err);
        CHECKF(err || (cubin && size > 1000), "%s: a cubin of %zu bytes", zoo_cases[c].name, size);
        free(cubin);
#endif
        if (clangxx()) {
            char *src = NULL;
            CHECK_OK(tern_kernel_emit(k, TERN_TARGET_METAL, &src));
            CHECKF(src && metal_ok(zoo_cases[c].name, src), "%s passes the Metal syntax check", zoo_cases[c].name);
            free(src);
        }
        tern_kernel_free(k);
    }
    return check_summary("test_kernel_compile");
}
