#!/usr/bin/env bash
# Batch-1 bf16 decoding of both families, this tree (A) against another commit's tree (B,
# .old/old.tar.gz, as ab_tree.sh), in one call: the cuda checks of the decode kernels
# (DECODE_CHECKS, test_ops_llama, the Llama fixture, the GPT-2 fixture bf16 and fp32
# inference), then `tern bench generate` at GPT-2 124M, SmolLM2-135M and Llama-3.2-1B
# (random weights, prompt 16, DECODE_TOKENS new tokens (512)), A and B alternated DECODE_ROUNDS times (2),
# with A's variants (DECODE_VARIANTS: cuda options, TERN_CUDA_TUNE values, e.g. "gemv_ks=1
# gemv_early=0") after each A; then Nsight Compute's kernel durations of A's Llama-3.2-1B
# decoding, per token (DECODE_NCU=0 skips it). DECODE_CONFIGS picks the shapes (default
# "gpt2 smollm2-135m llama-3.2-1b"); DECODE_PEER=1 runs the hand-written CUDA-graph peer
# (bench/h200/llama_peers.py, DECODE_PEER_IMPL: fast-pipe, the stronger (run 88), or a comma list such as
# "fast-graph,fast-pipe"; GPT-2's as decode_batch.sh's) after each shape's
# sides, so its ratio comes from the same round. DECODE_CHECKS picks the optional checks on
# cuda (default "gemv matmul": test_gpu_gemv, test_ops_matmul; "attention":
# test_gpu_attention and test_gpu_gqa; "rows": test_gpu_rows, sampling; "memory":
# test_ops_memory, the transfers); the Llama and
# fixture checks always run.
# Without .old/old.tar.gz there is no B: A and its variants only (the tree, .deb and the
# fixtures together pass the device tool's 64 MiB; carrying .deb alone leaves room).
#   mkdir -p .old && git archive OLD -- . ':!models/brown-mini' | gzip > .old/old.tar.gz
#   OUT=$OUT bash scripts/h200/decode_ab.sh          (carry .deb .fixtures .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader)"
base=/tmp/tern-ab-old
sides="A B"
if [ -f .old/old.tar.gz ]; then
    rm -rf $base && mkdir -p $base && tar -xzf .old/old.tar.gz -C $base
    ( cmake -S $base -B $base/build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
      cmake --build $base/build-h200 -j 6 --target tern_cli ) > "$logs/ab-build.log" 2>&1 &
    old_build=$!
else
    note "no .old/old.tar.gz: A and its variants only"
    sides=A old_build=
fi
start=$SECONDS
{ cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
  cmake --build $b -j 10 --target tern_cli test_gpu_gemv test_ops_matmul test_ops_llama test_llama_model \
      test_gpt2_fixture test_gpu_attention test_gpu_gqa test_gpu_rows test_ops_memory; } > "$logs/build.log" 2>&1 ||
    { note "FAIL build: $(grep -m3 -E 'error|Error' "$logs/build.log")"; exit 1; }
note "ok   build ($((SECONDS - start)) s)"
export TERN_CACHE_DIR=$PWD/$b/kernel-cache
checks=" ${DECODE_CHECKS:-gemv matmul} "
[[ $checks == *" gemv "* ]] &&
    TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_gemv on cuda" 240 gemv.log $b/tests/gpu/test_gpu_gemv
[[ $checks == *" rows "* ]] &&
    TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_rows on cuda" 120 rows.log $b/tests/gpu/test_gpu_rows
[[ $checks == *" memory "* ]] &&
    TERN_TEST_HANDLER=cuda step "ops: test_ops_memory on cuda" 120 ops-memory.log \
        env -u TERN_SHARED_DIR $b/tests/ops/test_ops_memory # (the GPT-2 fixture is not carried)
[[ $checks == *" matmul "* ]] &&
    TERN_TEST_HANDLER=cuda step "ops: test_ops_matmul on cuda" 240 ops-matmul.log $b/tests/ops/test_ops_matmul
if [[ $checks == *" attention "* ]]; then
    TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_attention on cuda" 240 attention.log \
        $b/tests/gpu/test_gpu_attention
    TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_gqa on cuda" 240 gqa.log $b/tests/gpu/test_gpu_gqa
fi
TERN_TEST_HANDLER=cuda step "ops: test_ops_llama on cuda" 120 ops-llama.log $b/tests/ops/test_ops_llama
TERN_TEST_HANDLER=cuda step "llama: llama-tiny-a on cuda (both head layouts)" 300 llama-model.log \
    $b/tests/llama/test_llama_model "" cuda both
[ -d .fixtures/fixtures/gpt2-tiny-a ] && TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 \
    step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
[ -d .fixtures/fixtures/gpt2-tiny-a ] && TERN_TEST_HANDLER=cuda TERN_TEST_PART=inference \
    step "fixture, cuda fp32 inference (greedy ids)" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
grep -h -E 'checks (passed|failed)|check failed' "$logs"/*.log | head -20 >> "$summary" 2>/dev/null
[ -z "$old_build" ] || wait $old_build || { note "FAIL B build: $(grep -m3 -E 'error|Error' "$logs/ab-build.log")"; exit 1; }
gen=(bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens "${DECODE_TOKENS:-512}" --warmup 2)
for r in $(seq 1 "${DECODE_ROUNDS:-2}"); do
    for cfg in ${DECODE_CONFIGS:-gpt2 smollm2-135m llama-3.2-1b}; do
        init=(--init "$cfg")
        [ $cfg = gpt2 ] && init=()
        for side in $sides ${DECODE_VARIANTS:-}; do
            bin=$b/tern env=()
            [ $side = B ] && bin=$base/build-h200/tern
            [ $side != A ] && [ $side != B ] && env=("TERN_CUDA_TUNE=$side")
            log="gen-$cfg-${side//[=,]/-}-$r.log"
            step "generate $cfg $side, round $r" 90 "$log" env TERN_CACHE_DIR=/tmp/kc-${side:0:1} "${env[@]}" \
                "$bin" "${gen[@]}" "${init[@]}"
            note "  $cfg $side: $(grep '^bench:' "$logs/$log" | tail -1)"
            # graph_timing=1: each replay's time on the GPU (stderr), against the wall time above
            grep -q '^graph replay:' "$logs/$log" && note "  $cfg $side: graph on the GPU, median $(grep '^graph replay:' \
                "$logs/$log" | awk '{print $3}' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') ms of $(grep -c '^graph replay:' "$logs/$log") replays"
        done
        if [ "${DECODE_PEER:-0}" = 1 ]; then
            step "peer decode $cfg (${DECODE_PEER_IMPL:-fast-pipe}), round $r" 240 "peer-$cfg-$r.log" \
                python3 bench/h200/llama_peers.py decode --config "$cfg" --impl "${DECODE_PEER_IMPL:-fast-pipe}" \
                --batch 1 --prompt 16 --tokens "${DECODE_TOKENS:-512}"
            grep '^peer:' "$logs/peer-$cfg-$r.log" | while read -r line; do note "  $(echo "$line" | cut -c1-200)"; done
        fi
    done
done
if [ "${DECODE_NCU:-1}" = 1 ] && command -v ncu > /dev/null; then
    step "ncu: Llama-3.2-1B decoding, a 4-token prompt + 16 tokens" 240 ncu-1b.log ncu --clock-control none \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
        $b/tern bench generate --backend cuda --precision bf16 --init llama-3.2-1b --prompt-tokens 4 --tokens 16 --warmup 0
    note "ncu, Llama-3.2-1B decoding (per forward: the prompt and 16 tokens):"
    python3 scripts/h200/ncu_sum.py "$logs/ncu-1b.log" 17 >> "$summary"
fi
