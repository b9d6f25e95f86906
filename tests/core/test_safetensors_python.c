/* tern's safetensors and token shards against independent implementations: the reference
 * `safetensors` Python package and numpy (tests/core/safetensors_interop.py), run by
 * $TERN_PYTHON (make test sets up build/python with both, scripts/setup-test-python), else
 * python3. Without them the test exits 77, which ctest reports as skipped, not passed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tern/data.h"
#include "tern/safetensors.h"
#include "tmpdir.h"

#define SKIP 77

static char script[4096];
static const char *python = "python3";

static int run(const char *mode, const char *path) {
    char cmd[12000];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s'", python, script, mode, path);
    return system(cmd);
}

static void tern_writes_reference_reads(const char *dir) {
    float a[6];
    for (int i = 0; i < 6; i++)
        a[i] = (float)i * 0.5f - 1;
    uint16_t h[4] = {0x3c00, 0xc000, 0x3800, 0x7bff}; /* 1, -2, 0.5, 65504 */
    uint16_t b[3] = {0x3f80, 0xc000, 0x3f00};         /* 1, -2, 0.5 */
    int32_t i32[4] = {-1, 0, 1, INT32_MAX};
    uint16_t u[3] = {0, 50256, 65535};
    tern_tensor_out t[] = {
        {"a", TERN_F32, 2, {2, 3}, a},   {"h", TERN_F16, 1, {4}, h}, {"b", TERN_BF16, 1, {3}, b},
        {"i", TERN_I32, 2, {2, 2}, i32}, {"u", TERN_U16, 1, {3}, u},
    };
    const char *meta[] = {"origin", "tern", NULL};
    const char *path = tmpdir_path(dir, "tern.safetensors");
    CHECK_OK(tern_safetensors_write(path, t, 5, meta));
    CHECKF(run("check-tern", path) == 0, "the reference rejects or misreads tern's file");

    int32_t ids[5] = {50256, 15496, 11, 995, 0};
    const char *shard = tmpdir_path(dir, "tern.bin");
    CHECK_OK(tern_shard_write(shard, ids, 5));
    CHECKF(run("check-shard", shard) == 0, "numpy misreads tern's shard");
}

static void reference_writes_tern_reads(const char *dir) {
    const char *path = tmpdir_path(dir, "ref.safetensors");
    CHECK(run("write-ref", path) == 0);
    tern_safetensors *f = NULL;
    CHECK_OK(tern_safetensors_open(path, &f));
    if (!f) return;
    CHECK(tern_safetensors_count(f) == 6);
    CHECK(strcmp(tern_safetensors_metadata(f, "who"), "reference") == 0);
    const tern_tensor_info *w = tern_safetensors_find(f, "w");
    float v[12];
    CHECK(w && w->dtype == TERN_F32 && w->ndim == 2 && w->shape[0] == 3 && w->shape[1] == 4);
    if (w) {
        CHECK_OK(tern_tensor_convert(w, TERN_F32, v));
        int ok = 1;
        for (int i = 0; i < 12; i++)
            ok &= v[i] == (float)i / 4 - 1;
        CHECK(ok);
    }
    const tern_tensor_info *half = tern_safetensors_find(f, "half");
    if (half) {
        CHECK_OK(tern_tensor_convert(half, TERN_F32, v));
        /* 1e-4 as numpy's f16: the nearest f16, 0x068e */
        CHECK(v[0] == 0.25f && v[1] == -3.0f && v[2] == 0x68e * 0x1p-24f);
    }
    const tern_tensor_info *ids = tern_safetensors_find(f, "ids");
    CHECK(ids && !ids->supported && strcmp(ids->dtype_name, "I64") == 0 && ids->count == 2);
    const tern_tensor_info *mask = tern_safetensors_find(f, "mask");
    CHECK(mask && !mask->supported && strcmp(mask->dtype_name, "BOOL") == 0 && mask->nbytes == 4);
    if (mask) CHECK(memcmp(mask->data, "\1\0\1\1", 4) == 0);
    const tern_tensor_info *by = tern_safetensors_find(f, "bytes");
    CHECK(by && strcmp(by->dtype_name, "U8") == 0 && ((const unsigned char *)by->data)[1] == 255);
    const tern_tensor_info *n = tern_safetensors_find(f, "n");
    int32_t nv = 0;
    CHECK(n && n->ndim == 0 && n->dtype == TERN_I32);
    if (n) CHECK_OK(tern_tensor_convert(n, TERN_I32, &nv));
    CHECK(nv == -5);
    tern_safetensors_close(f);

    const char *shard = tmpdir_path(dir, "ref.bin");
    CHECK(run("write-shard", shard) == 0);
    tern_dataset *ds = NULL;
    CHECK_OK(tern_dataset_open_shard(shard, 0, &ds));
    int32_t want[6] = {464, 2068, 7586, 21831, 50256, 65535};
    CHECK(tern_dataset_tokens(ds) == 6);
    for (size_t i = 0; i < 6; i++)
        CHECK(tern_dataset_token(ds, i) == want[i]);
    tern_dataset_close(ds);
}

int main(void) {
    const char *env_python = getenv("TERN_PYTHON");
    if (env_python && access(env_python, X_OK) == 0) python = env_python;
    char probe[4200];
    snprintf(probe, sizeof probe, "'%s' -c 'import safetensors, numpy' > /dev/null 2>&1", python);
    if (system(probe) != 0) {
        printf("test_safetensors_python: skipped (%s with safetensors and numpy not found)\n", python);
        return SKIP;
    }
    const char *src = getenv("TERN_SOURCE_DIR");
    snprintf(script, sizeof script, "%s/tests/core/safetensors_interop.py", src ? src : ".");
    const char *dir = tmpdir_make();
    tern_writes_reference_reads(dir);
    reference_writes_tern_reads(dir);
    tmpdir_remove(dir);
    return check_summary("test_safetensors_python");
}
