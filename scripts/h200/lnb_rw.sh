#!/usr/bin/env bash
# The from-output layer norm backward's 1 / w: this tree (A, threadgroup memory) against B
# (.old/old.tar.gz: this tree with bench/h200/probes/lnb-reciprocal-in-registers.patch, 1 / w
# held in registers beside w and b), the layer norm kernels of a GPT-2 1.5B and a 124M step
# under ncu (B=16 T=1024 bf16, graphs off), then B's test_ops_layernorm on cuda.
#   OUT=$OUT bash scripts/h200/lnb_rw.sh          (carry .deb .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 260
build_with_old
for init in gpt2-xl gpt2; do
    for side in A B; do
        bin=$b/tern
        [ $side = B ] && bin=$base/build-h200/tern
        log=ncu-$side-$init.log
        step "ncu $side $init" 90 "$log" env TERN_CUDA_TUNE=graphs=0 ncu --clock-control none \
            --kernel-name regex:'layernorm|partial_add' --metrics gpu__time_duration.sum --csv "$bin" bench train \
            --init $init --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 1 --warmup 1
        note "ncu $side $init (per step):"
        python3 scripts/h200/ncu_sum.py "$logs/$log" 2 >> "$summary"
    done
done
( cmake --build $base/build-h200 -j "$(nproc)" --target test_ops_layernorm > "$logs/b-test-build.log" 2>&1 &&
  TERN_TEST_HANDLER=cuda step "B: test_ops_layernorm on cuda" 60 b-ops-layernorm.log \
      $base/build-h200/tests/ops/test_ops_layernorm ) || note "FAIL B's test build"
grep -h -E 'checks (passed|failed)' "$logs/b-ops-layernorm.log" >> "$summary" 2> /dev/null
