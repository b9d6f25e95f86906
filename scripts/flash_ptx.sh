#!/usr/bin/env bash
# PTX instruction counts of the flash attention kernels (head size 64, the largest variant the
# test builds of each), from the CUDA source tern emits: how the emitter's bf16 bits and
# tern_load_matrix changed them (bench/h200/NOTES.md, runs 14-15). Needs nvcc; no GPU.
#   bash scripts/flash_ptx.sh [BUILD_DIR]        (default build; WGMMA=1: see the end)
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
# WGMMA=1: also, for every kernel the test builds with warpgroup products (gk_flash_opts.wgmma),
# what ptxas makes of it for sm_90a: registers, spills, and whether it had to inject waits
# (warpgroup.arrive / warpgroup.wait: products serialised), with its threads and whether
# it keeps two products in flight (the overlapped forward), and its head size. docs/gpu-kernels.md
# has a run.
[ "${WGMMA:-0}" = 1 ] || exit 0
for src in "$dir"/flash_*.cu; do
    grep -q 'wgmma.mma_async' "$src" || continue
    name=$(basename "$src" .cu)
    threads=$(grep -o '__launch_bounds__([0-9]*' "$src" | head -1 | tr -dc 0-9)
    overlap=$(grep -q 'wgmma.wait_group.sync.aligned 1;' "$src" && echo ", overlapped" || true)
    hs=$(grep -q 'm64n128k16' "$src" && echo 128 || echo 64) # the widest product is n = hs
    info=$(nvcc -arch=sm_90a -cubin -o "$dir/x.cubin" "$src" -Xptxas -v 2>&1)
    printf '%-36s hs %3s, %3s threads%-12s %s registers, %s bytes spilled, %d injected waits\n' "$name" "$hs" "$threads" "$overlap" \
        "$(sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' <<< "$info")" \
        "$(sed -n 's/.* \([0-9]*\) bytes spill stores.*/\1/p' <<< "$info")" "$(grep -c 'C751[79]' <<< "$info" || true)"
done | sort
