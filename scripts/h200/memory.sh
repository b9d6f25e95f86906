#!/usr/bin/env bash
# A training step's peak GPU memory and time: this tree (A) with its memory settings against
# another commit's tree (B, .old/old.tar.gz as in ab_tree.sh), GPT-2 124M and 1.5B (gpt2-xl),
# B=16, T=1024, bf16. Peak memory is the process's, as nvidia-smi reports it (CUDA context,
# libraries' workspaces and every allocation included), sampled every 50 ms. Each size runs
# A with every recomputation choice (none, gelu, layernorm, both). Without .old/old.tar.gz
# there is no B (A alone fits the device tool's carry with .deb only), and without .fixtures
# no fixture checks at the end. MEM_CHOICES: the --recompute choices A runs (default none gelu
# layernorm gelu,layernorm); MEM_SMALL=0: 1.5B only. MEM_PROFILE=1: then the 1.5B step's time by operation
# (TERN_CUDA_TUNE=profile=1: each operation synchronised, cuBLASLt's products by shape).
#   OUT=$OUT bash scripts/h200/memory.sh          (carry .deb .fixtures .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader)"
build_tern
# adamw's split form (the bf16 master as the compute weights and a u16 of low halves) against
# its f32 form, bit for bit, on cuda
TERN_TEST_HANDLER=cuda step "ops: test_ops_elementwise on cuda" 60 ops-elementwise.log $b/tests/ops/test_ops_elementwise
# layernorm_backward writing the forward's output again (--recompute layernorm): bit for bit
# the forward's, on cuda
TERN_TEST_HANDLER=cuda step "ops: test_ops_layernorm on cuda" 60 ops-layernorm.log $b/tests/ops/test_ops_layernorm
# cuBLASLt's tuning times products that read no C into their own output (no scratch): every
# product against the reference on cuda, tuned afresh
TERN_CACHE_DIR=/tmp/kc-ops-matmul TERN_TEST_HANDLER=cuda step "ops: test_ops_matmul on cuda" 180 ops-matmul.log \
    $b/tests/ops/test_ops_matmul
base=/tmp/tern-mem-old
if [ -f .old/old.tar.gz ]; then
    rm -rf $base && mkdir -p $base && tar -xzf .old/old.tar.gz -C $base
    { cmake -S $base -B $base/build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
      cmake --build $base/build-h200 -j "$(nproc)" --target tern_cli; } > "$logs/mem-build.log" 2>&1 ||
        { note "FAIL B build: $(grep -m3 -E 'error|Error' "$logs/mem-build.log")"; exit 1; }
else
    note "no .old/old.tar.gz: A alone"
fi

# run NAME BINARY ARGS...: the step's median and the process's peak memory
run() {
    local name=$1 bin=$2 log=$logs/mem-$1.log
    shift 2
    if [ -n "${CALL_END:-}" ] && [ "$(call_left)" -lt 60 ]; then note "skip $name (the call's time is spent)"; return 0; fi
    peak_run "$log" env TERN_CACHE_DIR=/tmp/kc-$name "$bin" "$@"
    note "$name: exit $PEAK_RC, peak $(gib "$PEAK_MIB"), $(grep '^bench:' "$log" | tail -1 | sed 's/.*: median/median/')"
}
small=(bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 20 --warmup 5)
xl=(bench train --init gpt2-xl --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 8 --warmup 3)
have_b() { [ -x $base/build-h200/tern ] && [ -f .old/old.tar.gz ]; }
choices=${MEM_CHOICES:-none gelu layernorm gelu,layernorm} # the --recompute choices A runs
run_choices() { # size name, arguments...
    local size=$1 c
    shift
    for c in $choices; do
        if [ "$c" = none ]; then run "$size-A" $b/tern "$@"
        else run "$size-A-$c" $b/tern "$@" --recompute "$c"; fi
    done
}
if [ "${MEM_SMALL:-1}" = 1 ]; then
    for r in $(seq 1 "${MEM_ROUNDS:-2}"); do
        have_b && run "124M-B-r$r" $base/build-h200/tern "${small[@]}"
        run_choices "124M-r$r" "${small[@]}"
    done
fi
have_b && run "1.5B-B" $base/build-h200/tern "${xl[@]}"
run_choices 1.5B "${xl[@]}"
if [ "${MEM_PROFILE:-0}" = 1 ]; then # where the 1.5B step goes, operation by operation (serialised)
    step "1.5B per-operation profile" 180 xl-profile.log env TERN_CUDA_TUNE=profile=1,graphs=0 $b/tern \
        bench train --init gpt2-xl --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 3 --warmup 1
    grep -A40 '^cuda profile' "$logs/xl-profile.log" >> "$summary"
fi
export TERN_TEST_HANDLER=cuda
if [ -d .fixtures ]; then
    step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
    TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
else
    note "no .fixtures: the fixture checks not run"
fi
grep -h -E 'checks (passed|failed)|: loss|chunks' "$logs"/fixture-*.log "$logs"/ops-*.log >> "$summary" 2>/dev/null
