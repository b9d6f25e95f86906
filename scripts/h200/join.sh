#!/usr/bin/env bash
# Issue 24: the q|k|v product joined to the cached attention (ac_join), in one call:
#   1. Checks on cuda: test_gpu_attention (the joined kernel against the cpu handler, and its
#      launch count) and test_gpu_gemv; `tern generate` of models/brown-mini bf16, greedy and
#      at temperature 0.8, with its 256 positions split four ways (ac_split_min=64, so that
#      its steps are joined) against the same with ac_join=0 and against the cpu handler.
#   2. Timings, `tern bench generate --backend cuda --precision bf16 --prompt-tokens 16
#      --tokens 512` of GPT-2 124M: JOIN_VARIANTS (the default (joined), ac_join=0, and
#      ac_split_min=300 and 140: 4 and 8 splits of the model's 1,024 cached positions, the
#      default 4; 8 is past the rule, so neither joined nor merged by the GEMV) alternated
#      JOIN_ROUNDS times (3), the fast-pipe peer
#      (bench/h200/llama_peers.py) in each round;
#      Llama-3.2-1B (never joined: the rope and grouped heads) once a round as a control.
#   With .old/old.tar.gz (git archive OLD -- . ':!models/brown-mini' | gzip), that tree is
#   built too and timed in each round as the variant "old".
#   OUT=$OUT bash scripts/h200/join.sh          (carry .deb [.old])
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
old=
if [ -f .old/old.tar.gz ]; then # another commit's tree (as decode_ab.sh), timed as the variant "old"
    rm -rf /tmp/tern-join-old && mkdir -p /tmp/tern-join-old && tar -xzf .old/old.tar.gz -C /tmp/tern-join-old
    ( cmake -S /tmp/tern-join-old -B /tmp/tern-join-old/build -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON \
        -DTERN_WITH_OPENCL=OFF && cmake --build /tmp/tern-join-old/build -j 6 --target tern_cli ) > "$logs/old-build.log" 2>&1 &
    old=$!
fi
build_targets tern_cli test_gpu_attention test_gpu_gemv
TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_attention on cuda" 300 attention.log $b/tests/gpu/test_gpu_attention
TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_gemv on cuda" 300 gemv.log $b/tests/gpu/test_gpu_gemv
grep -h -E 'checks (passed|failed)|check failed' "$logs"/attention.log "$logs"/gemv.log | head -8 >> "$summary"
for temp in 0 0.8; do
    a=(generate --model models/brown-mini --prompt "The jury said" --tokens 120 --temperature $temp --precision bf16 --ids)
    TERN_CUDA_TUNE=ac_split_min=64 $b/tern "${a[@]}" --backend cuda > "$logs/j.txt" 2> "$logs/j.err"
    TERN_CUDA_TUNE=ac_split_min=64,ac_join=0 $b/tern "${a[@]}" --backend cuda > "$logs/n.txt" 2> "$logs/n.err"
    $b/tern "${a[@]}" --backend cpu > "$logs/c.txt" 2> "$logs/c.err"
    # the ids only (the first line names the backend)
    same() { cmp -s <(tail -n +2 "$logs/$1.txt") <(tail -n +2 "$logs/$2.txt") && echo same ||
        echo "DIFFERENT ($(tail -n +2 "$logs/$1.txt" | head -c 100) / $(tail -n +2 "$logs/$2.txt" | head -c 100))"; }
    note "ids temperature $temp: joined vs ac_join=0: $(same j n); joined vs cpu: $(same j c); ac_join=0 vs cpu: $(same n c)"
done
variants=${JOIN_VARIANTS:-default ac_join=0 ac_split_min=300 ac_split_min=140}
if [ -n "$old" ]; then
    if wait $old; then variants="$variants old"; else note "FAIL the old tree's build"; fi
fi
g=(bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens 512 --warmup 2)
for r in $(seq 1 "${JOIN_ROUNDS:-3}"); do
    for v in $variants; do
        bin=$b/tern tune=${v#default}
        [ $v = old ] && bin=/tmp/tern-join-old/build/tern tune=
        note "r$r gpt2 $v: $(TERN_CUDA_TUNE=$tune TERN_CACHE_DIR=/tmp/kc-$v $bin "${g[@]}" 2>&1 | grep '^bench:' |
            sed 's/.*token [0-9.]* ms, //' | cut -c1-64)"
    done
    note "r$r gpt2 peer: $(python3 bench/h200/llama_peers.py decode --config gpt2 --impl fast-pipe --batch 1 \
        --prompt 16 --tokens 512 2>&1 | grep '^peer:' | sed 's/.*tokens=512: //' | cut -c1-120)"
    note "r$r llama-3.2-1b: $($b/tern "${g[@]}" --init llama-3.2-1b 2>&1 | grep '^bench:' | sed 's/.*token [0-9.]* ms, //')"
done
