#!/usr/bin/env bash
# PTX instruction counts of the flash attention kernels (head size 64, the largest variant the
# test builds of each), from the CUDA source tern emits: how the emitter's bf16 bits and
# tern_load_matrix changed them (bench/h200/NOTES.md, runs 14-15). Needs nvcc; no GPU.
#   bash scripts/flash_ptx.sh [BUILD_DIR]        (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
TERN_KERNEL_DUMP_DIR=$dir "$build/tests/attention_kernels/test_flash_kernels" > /dev/null
for k in flash_forward flash_backward_kv flash_backward_q; do
    src=$(ls -S "$dir"/$k-*.cu | head -1)
    nvcc -arch=sm_90 -ptx -o "$dir/$k.ptx" "$src"
    printf '%-18s %5d instructions, %3d mma.sync, %3d ldmatrix, %3d cvt.rn.bf16x2, %3d ld.shared, %3d st.shared\n' \
        "$k" "$(grep -cE '^\s+[a-z]' "$dir/$k.ptx")" "$(grep -c 'mma.sync' "$dir/$k.ptx")" \
        "$(grep -c ldmatrix "$dir/$k.ptx" || true)" "$(grep -c 'cvt.rn.bf16x2' "$dir/$k.ptx" || true)" \
        "$(grep -c 'ld.shared' "$dir/$k.ptx" || true)" "$(grep -c 'st.shared' "$dir/$k.ptx" || true)"
done
