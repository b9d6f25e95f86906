/* The cpu device: thread count, kernels, name, scratch memory. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "handlers/options.h"

/* The processor's "model name" from /proc/cpuinfo into buf, or "cpu". */
static void cpu_model_name(char *buf, size_t size) {
    snprintf(buf, size, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (!colon) continue;
        const char *start = colon + 1;
        while (*start == ' ' || *start == '\t') start++;
        size_t len = strcspn(start, "\n");
        while (len > 0 && (start[len - 1] == ' ' || start[len - 1] == '\t')) len--;
        if (len > 0) snprintf(buf, size, "%.*s", (int)len, start);
        break;
    }
    fclose(f);
}

void cpu_device_name_update(tern_dev *d) {
    snprintf(d->name, sizeof d->name, "%s, %d thread%s, %s kernels", d->model, d->threads,
             d->threads == 1 ? "" : "s", d->kern->name);
}

tern_error *TERN_OP(open)(const char *options, tern_dev **out) {
    if (!out) return tern_errorf("open: out is NULL");
    *out = NULL;
    /* one key (threads: OMP_NUM_THREADS; the kernels' instruction set: TERN_CPU_ISA, isa.c);
     * any other option is an error naming it */
    static const tern_option keys[] = {{"replay_steps", TERN_OPTION_INT, offsetof(cpu_tune, replay_steps), 1, 64}};
    cpu_tune tune = {.replay_steps = 1};
    const tern_option_set sets[] = {{keys, 1, &tune}};
    TERN_TRY(tern_options_apply("cpu", NULL, options, sets, 1));
    const char *why = NULL;
    const cpu_kernels *kern = cpu_kernels_process(&why);
    if (!kern) return tern_errorf("open: %s", why);
    tern_dev *d = calloc(1, sizeof *d);
    if (!d) return tern_errorf("open: out of memory");
    d->threads = omp_get_max_threads(); /* honours OMP_NUM_THREADS */
    if (d->threads < 1) d->threads = 1;
    /* Each operation splits its matmuls over our own OpenMP threads and calls BLAS
     * single-threaded inside them: two thread pools spinning on 2 cores would fight. */
    openblas_set_num_threads(1);
    d->kern = kern;
    d->tune = tune;
    cpu_model_name(d->model, sizeof d->model);
    cpu_device_name_update(d);
    *out = d;
    return NULL;
}

tern_error *TERN_OP(close)(tern_dev *d) {
    if (!d) return NULL;
    free(d->scratch);
    free(d->temp[0]);
    free(d->temp[1]);
    free(d);
    return NULL;
}

tern_error *cpu_device_name(tern_dev *d, const char **out) {
    *out = d->name;
    return NULL;
}

tern_error *cpu_sync(tern_dev *d) {
    (void)d;
    return NULL; /* every cpu operation has finished when it returns */
}

/* *area (of *size bytes) grown to at least `bytes`, 64-byte aligned. */
static tern_error *grow(unsigned char **area, size_t *size, size_t bytes) {
    if (bytes > SIZE_MAX / 4) return tern_errorf("scratch of %zu bytes is too large", bytes);
    bytes = cpu_round64(bytes ? bytes : 1);
    if (bytes > *size) {
        /* grow geometrically so alternating sizes do not reallocate every call */
        size_t want = *size + *size / 2;
        if (want < bytes) want = bytes;
        void *p = aligned_alloc(64, cpu_round64(want));
        if (!p) return tern_errorf("out of memory for %zu bytes of scratch", want);
        free(*area);
        *area = p;
        *size = want;
    }
    return NULL;
}

tern_error *cpu_scratch(tern_dev *d, size_t bytes, void **out) {
    TERN_TRY(grow(&d->scratch, &d->scratch_size, bytes));
    *out = d->scratch;
    return NULL;
}

tern_error *cpu_temp(tern_dev *d, int slot, tern_dtype dtype, size_t len, tern_buf *out) {
    size_t size = tern_dtype_size(dtype);
    if (size == 0 || len > SIZE_MAX / 8) return tern_errorf("a temporary of %zu %s elements", len, tern_dtype_name(dtype));
    if (slot < 0 || slot > 1) return tern_errorf("no temporary slot %d", slot);
    TERN_TRY(grow(&d->temp[slot], &d->temp_size[slot], len * size));
    *out = (tern_buf){d->temp[slot], 0, len, dtype};
    return NULL;
}
