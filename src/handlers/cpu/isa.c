/* Which kernel table (kernels.h) the process runs: the best instruction set the processor
 * and the build offer, decided once at the first device open. TERN_CPU_ISA may name a lesser
 * one (to measure an AVX2-only or a portable machine's path on a bigger one); it is read
 * there, once, never on a hot path. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static const char *const isa_names[CPU_ISA_COUNT] = {"portable", "avx2", "avx512", "avx512bf16"};

#ifdef TERN_CPU_X86_KERNELS
#include <cpuid.h>

/* The processor's feature bits, read with CPUID (not __builtin_cpu_supports: clang's knows no
 * "f16c"), and the register state the operating system saves (XGETBV): a processor with AVX
 * whose kernel does not save the YMM/ZMM registers must not run those tables. */
typedef struct {
    bool avx2, avx512, avx512bf16;
} x86_features;

static x86_features x86_read_features(void) {
    x86_features f = {false, false, false};
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
         f16c = c & (1u << 29);
    if (!osxsave || !avx) return f;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    bool ymm_saved = (xcr0_lo & 0x6u) == 0x6u;          /* SSE and AVX state */
    bool zmm_saved = ymm_saved && (xcr0_lo & 0xE0u) == 0xE0u; /* opmask, ZMM0-15 hi, ZMM16-31 */
    if (__get_cpuid_max(0, NULL) < 7) return f;
    __cpuid_count(7, 0, a, b, c, d);
    /* a: leaf 7's last subleaf */
    bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512bw = b & (1u << 30),
         avx512vl = b & (1u << 31);
    f.avx2 = ymm_saved && avx2 && fma && f16c;
    f.avx512 = f.avx2 && zmm_saved && avx512f && avx512bw && avx512vl;
    if (a < 1) return f; /* leaf 7's last subleaf: no subleaf 1 */
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = f.avx512 && (a & (1u << 5)); /* CPUID.(7,1):EAX[5]: AVX512_BF16 */
    return f;
}
#endif

/* Whether this processor (and its operating system, which must save the wider registers)
 * runs the table of `isa`, and this build has it. */
static bool isa_runs(cpu_isa isa) {
    if (isa == CPU_ISA_PORTABLE) return true;
#ifdef TERN_CPU_X86_KERNELS
    x86_features f = x86_read_features();
    if (isa == CPU_ISA_AVX2) return f.avx2;
    if (isa == CPU_ISA_AVX512) return f.avx512;
    if (isa == CPU_ISA_AVX512BF16) return f.avx512bf16;
#endif
    return false;
}

static const cpu_kernels *isa_table(cpu_isa isa) {
    switch (isa) {
#ifdef TERN_CPU_X86_KERNELS
    case CPU_ISA_AVX512BF16: return &cpu_kernels_avx512bf16;
    case CPU_ISA_AVX512: return &cpu_kernels_avx512;
    case CPU_ISA_AVX2: return &cpu_kernels_avx2;
#endif
    case CPU_ISA_PORTABLE: return &cpu_kernels_portable;
    default: return NULL;
    }
}

const cpu_kernels *cpu_kernels_for(cpu_isa isa) {
    if ((unsigned)isa >= CPU_ISA_COUNT || !isa_runs(isa)) return NULL;
    return isa_table(isa);
}

/* The process's choice, made once. */
static pthread_once_t process_once = PTHREAD_ONCE_INIT;
static const cpu_kernels *process_table;
static char process_why[160];
static _Atomic(const cpu_kernels *) convert_table = &cpu_kernels_portable;

static void choose_process_table(void) {
    const char *want = getenv("TERN_CPU_ISA");
    if (want && *want) {
        int isa = -1;
        for (int i = 0; i < CPU_ISA_COUNT; i++)
            if (!strcmp(want, isa_names[i])) isa = i;
        if (isa < 0) {
            snprintf(process_why, sizeof process_why,
                     "TERN_CPU_ISA='%.40s' is not one of avx512bf16, avx512, avx2, portable", want);
            return;
        }
        if (!(process_table = cpu_kernels_for((cpu_isa)isa))) {
            snprintf(process_why, sizeof process_why,
                     "TERN_CPU_ISA=%s: this processor or this build does not have it", want);
            return;
        }
    } else {
        for (int i = CPU_ISA_COUNT - 1; i >= 0 && !process_table; i--)
            process_table = cpu_kernels_for((cpu_isa)i);
    }
    atomic_store(&convert_table, process_table);
}

const cpu_kernels *cpu_kernels_process(const char **why) {
    pthread_once(&process_once, choose_process_table);
    if (!process_table && why) *why = process_why;
    return process_table;
}

const cpu_kernels *cpu_kernels_convert(void) {
    return atomic_load_explicit(&convert_table, memory_order_relaxed);
}

tern_error *cpu_device_force_isa(tern_dev *d, cpu_isa isa) {
    if (!d) return tern_errorf("force_isa: the device is NULL");
    const cpu_kernels *k = cpu_kernels_for(isa);
    if (!k)
        return tern_errorf("force_isa: the %s kernels are not available here",
                           (unsigned)isa < CPU_ISA_COUNT ? isa_names[isa] : "unknown");
    d->kern = k;
    cpu_device_name_update(d);
    return NULL;
}
