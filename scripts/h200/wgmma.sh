#!/usr/bin/env bash
# Issue 24: the DSL's warpgroup product (tern_wgmma_bf16) and the flash kernels built on it
# (TERN_CUDA_TUNE flash_wgmma=f/kv/q), in one call:
#   1. Checks on cuda: test_kernel_wgmma (every operand placement against plain C, exactly;
#      the kernels compile as sm_90a: wgmma.mma_async), test_kernel_role (products chained
#      across warpgroup roles' blocks), test_kernel_pipe (a producer warpgroup feeding two
#      consumer ones through mbarriers, with and without setmaxnreg), the flash kernels at the Llama and
#      GPT-2 shapes with warpgroup products (test_flash_kernels), test_ops_attention with
#      flash_wgmma=1/1/1, and the GPT-2 fixture in bf16 with it.
#   2. bench_wgmma: the same products by tern_wgmma_bf16 and by tern_load_matrix +
#      tern_mma_bf16 (the flash kernels' way), TFLOP/s of each.
#   3. The training step, GPT-2 124M B=16 T=1024 bf16: WGMMA_VARIANTS (the default, which
#      on Hopper is flash_wgmma=1/1/1, and the mma.sync kernels, flash_wgmma=0/0/0; a kernel
#      alone: flash_wgmma=0/1/0 ...) alternated WGMMA_ROUNDS times (2);
#      then Nsight Compute's flash kernel durations of one step each way when ncu is there
#      (WGMMA_NCU=0: not).
#   OUT=$OUT bash scripts/h200/wgmma.sh          (carry .deb .fixtures; WGMMA_TRAIN=0: 1 and 2 only)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
build_tern
on="TERN_CUDA_TUNE=flash_wgmma=1/1/1"
TERN_GPU=cuda step "test_kernel_wgmma on cuda" 300 wgmma-test.log $b/tests/kernel/test_kernel_wgmma
TERN_GPU=cuda step "test_kernel_role on cuda" 120 role-test.log $b/tests/kernel/test_kernel_role
TERN_GPU=cuda step "test_kernel_pipe on cuda" 120 pipe-test.log $b/tests/kernel/test_kernel_pipe
TERN_GPU=cuda step "flash kernels on cuda (variants[9]: wgmma)" 400 flash-kernels.log \
    $b/tests/attention_kernels/test_flash_kernels
TERN_TEST_HANDLER=cuda step "ops: test_ops_attention on cuda, $on" 300 ops-attention.log \
    env $on $b/tests/ops/test_ops_attention
TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16, $on" 120 fixture-bf16.log \
    env $on $b/tests/gpt2/test_gpt2_fixture
grep -h -E 'checks (passed|failed)|check failed|differ' "$logs"/wgmma-test.log "$logs"/role-test.log "$logs"/flash-kernels.log \
    "$logs"/ops-attention.log "$logs"/fixture-bf16.log | head -12 >> "$summary"
grep -h 'wgmma' "$logs/flash-kernels.log" | grep -v nvrtc | head -6 >> "$summary"
for shape in ${WGMMA_SHAPES:-528:256 1056:512}; do
    step "bench_wgmma ${shape/:/ groups, reps }" 120 "bench-${shape/:/-}.log" $b/bench/dsl/bench_wgmma cuda ${shape/:/ }
    grep -h -E 'TFLOP|note' "$logs/bench-${shape/:/-}.log" >> "$summary"
done
[ "${WGMMA_TRAIN:-1}" = 0 ] && exit 0 # the checks and the bench only
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 10 --warmup 3)
variants=${WGMMA_VARIANTS:-default flash_wgmma=0/0/0}
for round in $(seq 1 "${WGMMA_ROUNDS:-2}"); do
    for v in $variants; do
        if [ "$v" = default ]; then env=(); else env=(TERN_CUDA_TUNE=$v); fi
        log="train-$round-${v//[\/=,]/-}.log" # a file name: no slashes
        step "train round $round, $v" 120 "$log" env "${env[@]}" "${train[@]}"
        note "  $(grep '^bench:' "$logs/$log" | tail -1)"
    done
done
if [ "${WGMMA_NCU:-1}" != 0 ] && command -v ncu > /dev/null; then
    for v in default flash_wgmma=0/0/0; do
        if [ "$v" = default ]; then env=(); else env=(TERN_CUDA_TUNE=$v); fi
        step "ncu flash kernels, $v" 300 "ncu-$v.log" env "${env[@]}" ncu --kernel-name regex:flash --launch-skip 48 \
            --launch-count 48 --metrics gpu__time_duration.sum --csv \
            $b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 2 --warmup 1
        note "  $v: $(python3 -c '
import csv, sys, collections
t = collections.defaultdict(float)
for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith("\"")):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0}.get(r.get("Metric Unit"), float("nan"))
        t[r["Kernel Name"]] += float(r["Metric Value"].replace(",", "")) * scale
print(", ".join("%s %.3f ms" % kv for kv in sorted(t.items())))' "$logs/ncu-$v.log" 2>&1 | head -c 400)"
    done
fi
