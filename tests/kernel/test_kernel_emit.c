/* Golden-text tests of the three emitters: one kernel that uses most constructs (bf16 and
 * vector accesses, threadgroup memory, a barrier, a SIMD reduction, an atomic, loops,
 * if/else, a variable) emitted as CUDA, OpenCL and Metal and compared with the files in
 * tests/kernel/golden/. After an intended change, regenerate them with
 * TERN_UPDATE_GOLDEN=1 and review the diff. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/kernel.h"

/* Row sums of a bf16 matrix [rows, 64], one threadgroup of 64 threads per row; rows
 * whose sum is negative are counted; out[row] = sum, scaled. */
static void row_stats(tern_kb *kb, void *user) {
    (void)user;
    tern_v x = tern_param_buf(kb, "x", TERN_T_BF16, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v negatives = tern_param_buf(kb, "negatives", TERN_T_I32, TERN_READ_WRITE);
    tern_v scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    tern_max_threads(kb, 64);
    tern_v partial = tern_shared(kb, "partial", TERN_T_F32, 2);
    tern_v row = tern_group_id(kb, 0), tid = tern_local_id(kb, 0);
    tern_v v[2];
    tern_load_vec(x, tern_add(tern_mul(row, tern_int(128)), tern_mul(tid, tern_int(2))), 2, v);
    tern_v s = tern_simd_sum(tern_add(v[0], v[1]));
    TERN_IF(kb, tern_eq(tern_simd_lane(kb), tern_int(0))) { tern_store(partial, tern_simd_group(kb), s); }
    tern_barrier(kb);
    TERN_IF(kb, tern_eq(tid, tern_int(0))) {
        tern_v total = tern_var(kb, "total", tern_f32(0.0f));
        TERN_FOR(kb, g, tern_int(0), tern_int(2), tern_int(1)) { tern_assign(total, tern_add(total, tern_load(partial, g))); }
        TERN_IF(kb, tern_lt(total, tern_f32(0.0f))) { tern_atomic_add(negatives, tern_int(0), tern_int(1)); }
        TERN_ELSE(kb) { tern_assign(total, tern_max(total, tern_f32(1e-3f))); }
        tern_store(out, row, tern_mul(total, scale));
    }
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) == (size_t)n)
        s[n] = '\0';
    else {
        free(s);
        s = NULL;
    }
    fclose(f);
    return s;
}

int main(void) {
    const char *src_dir = getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".";
    bool update = getenv("TERN_UPDATE_GOLDEN") && !strcmp(getenv("TERN_UPDATE_GOLDEN"), "1");
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("row_stats", row_stats, NULL, &k));
    if (!k) return check_summary("test_kernel_emit");
    static const char *const ext[] = {"cu", "cl", "metal"};
    for (int t = 0; t < 3; t++) {
        char *got = NULL;
        CHECK_OK(tern_kernel_emit(k, (tern_target)t, &got));
        if (!got) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/kernel/golden/row_stats.%s", src_dir, ext[t]);
        if (update) {
            FILE *f = fopen(path, "wb");
            CHECKF(f && fputs(got, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
            printf("updated %s\n", path);
        } else {
            char *want = read_file(path);
            CHECKF(want && !strcmp(got, want), "%s source differs from %s; got:\n%s", tern_target_name((tern_target)t),
                   path, got);
            free(want);
        }
        free(got);
    }
    tern_kernel_free(k);
    return check_summary("test_kernel_emit");
}
