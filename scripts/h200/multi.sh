#!/usr/bin/env bash
# Data-parallel training on the 2/4/8-GPU H200 machines (docs/distributed.md), for a session
# that has them: builds; checks that N ranks with NCCL train as one GPU does with the same
# global batch; checks that a killed rank stops the job; then times GPT-2 124M (B=16 per GPU,
# T=1024, bf16) on 1, 2, 4, 8 GPUs (as many as there are) and prints tokens/s and the
# efficiency against one GPU. Results land in $OUT/summary.txt and $OUT/logs.tgz.
# Run from the repository root with .deb carried (scripts/h200/fetch-debs), e.g.
#   OUT=$OUT bash scripts/h200/multi.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
logs=$OUT/logs
mkdir -p "$logs"
source scripts/h200/env.sh
summary=$OUT/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
finish() {
    tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$logs"
    cat "$summary"
}
trap finish EXIT
# NVLink SHARP (multicast) stays off on these machines.
export NCCL_NVLS_ENABLE=0
export TERN_DIST_TIMEOUT=${TERN_DIST_TIMEOUT:-300}

gpus=$(nvidia-smi -L | wc -l)
note "gpus: $gpus x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

# NCCL: the system's, the toolkit's, or a pip wheel's (nvidia-nccl-cu*).
if ! ldconfig -p | grep -q libnccl.so.2 && [ ! -e /usr/local/cuda/lib64/libnccl.so.2 ]; then
    lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
    [ -n "$lib" ] && [ -e "$lib" ] && export TERN_NCCL_LIBRARY=$lib
fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}

b=build-h200
start=$SECONDS
if ! { cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF -DTERN_TESTS=OFF &&
       cmake --build $b -j "$(nproc)" --target tern_cli; } > "$logs/build.log" 2>&1; then
    note "FAIL build: $(grep -m3 error "$logs/build.log")"
    exit 1
fi
note "ok   build ($((SECONDS - start)) s)"
export TERN_CACHE_DIR=$PWD/$b/kernel-cache
tern=$b/tern
$tern info > "$logs/info.log" 2>&1
note "$(grep -A2 '^distributed' "$logs/info.log" | tr -s ' ' | tr '\n' ';')"

# Training data: 4M random tokens in llm.c's shard layout (speed does not depend on them).
data=$b/random.bin
python3 - "$data" <<'EOF'
import random, struct, sys
n = 4 << 20
rng = random.Random(1)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *(rng.randrange(50257) for _ in range(n))))
EOF

losses() { sed -n 's/^step [0-9]*\/[0-9]* | loss \([0-9.]*\) .*/\1/p' "$1"; }
# Largest |a - b| between two runs' loss lists ("inf" when they differ in length or are empty).
max_diff() {
    paste <(losses "$1") <(losses "$2") | awk 'NF != 2 {bad = 1} {d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d}
        END {if (bad || NR == 0) print "inf"; else printf "%.5f\n", m}'
}

# ---- equality: 2 ranks of B against 1 GPU of 2B (and 8 against 1 when there are 8) ----
# NCCL sums bf16 gradients in bf16; fp32 differs only in the order of additions.
eq() { # precision, ranks, tolerance
    local p=$1 n=$2 tol=$3 per=$((16 / $2))
    local args=(train --init gpt2 --data "$data" --seq 256 --steps 10 --lr 6e-4 --warmup 2
                --clip 1 --wd 0.1 --backend cuda --precision "$p")
    timeout 300 $tern "${args[@]}" --batch 16 > "$logs/eq-$p-1.log" 2>&1
    timeout 300 $tern "${args[@]}" --batch $per --procs "$n" > "$logs/eq-$p-$n.log" 2>&1
    local d=$(max_diff "$logs/eq-$p-1.log" "$logs/eq-$p-$n.log")
    if [ "$d" != inf ] && awk -v d="$d" -v t="$tol" 'BEGIN {exit !(d <= t)}'; then
        note "ok   equality $p: $n ranks x $per rows vs 1 x 16: losses within $d (tolerance $tol)"
    else
        note "FAIL equality $p: $n ranks x $per rows vs 1 x 16: max loss difference $d (tolerance $tol); $(tail -1 "$logs/eq-$p-$n.log")"
    fi
}
eq fp32 2 1e-3
eq bf16 2 2e-2
[ "$gpus" -ge 8 ] && eq bf16 8 3e-2

# ---- a killed rank stops the job with an error ----
timeout 120 $tern train --init gpt2 --data "$data" --seq 256 --batch 8 --steps 100000 --backend cuda \
    --precision bf16 --procs 2 > "$logs/kill.log" 2>&1 &
job=$!
for i in $(seq 600); do grep -q '^step 3/' "$logs/kill.log" && break; sleep 0.1; done
launcher=$(pgrep -P $job | head -1) # timeout's child: tern's launcher; its children: the ranks
victim=$(pgrep -P "$launcher" | tail -1)
[ -n "$victim" ] && kill -9 "$victim"
wait $job
status=$?
if [ $status -eq 1 ] && tail -1 "$logs/kill.log" | grep -q "rank [01] of 2 was killed by signal 9"; then
    note "ok   a killed rank stops the job: $(tail -1 "$logs/kill.log")"
else
    note "FAIL a killed rank: status $status (124: hung); $(tail -2 "$logs/kill.log" | tr '\n' ' ')"
fi

# ---- scaling: GPT-2 124M, B=16 per GPU, T=1024, bf16 ----
# tokens/s of a run: the median over steps 4..N (the first steps compile and warm up).
tps() { sed -n 's/^step \([0-9]*\)\/.* | \([0-9]*\) tok\/s$/\1 \2/p' "$1" | awk '$1 >= 4 {print $2}' | sort -n |
        awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]; else print 0}'; }
one=0
for n in 1 2 4 8; do
    [ "$n" -gt "$gpus" ] && break
    procs=()
    [ "$n" -gt 1 ] && procs=(--procs "$n")
    timeout 400 $tern train --init gpt2 --data "$data" --batch 16 --seq 1024 --steps 14 --warmup 2 \
        --lr 6e-4 --backend cuda --precision bf16 "${procs[@]}" > "$logs/scale-$n.log" 2>&1
    t=$(tps "$logs/scale-$n.log")
    [ "$n" = 1 ] && one=$t
    eff=$(awk -v t="$t" -v o="$one" -v n="$n" 'BEGIN {if (o > 0) printf "%.1f%%", 100 * t / (n * o); else print "-"}')
    note "scale: $n GPU(s): $t tok/s (global batch $((16 * n)) x 1024), efficiency $eff against 1 GPU"
done
