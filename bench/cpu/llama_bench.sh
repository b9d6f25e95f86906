#!/usr/bin/env bash
# tern's cpu handler against llama.cpp on the SmolLM2-135M shape (random init), 2 threads,
# in one run, as bench.sh does for GPT-2:
#   - one checkpoint for both: `tern train --init smollm2-135m --lr 0 --steps 1 --out DIR`
#     writes tern's random initialisation unchanged (a zero learning rate moves nothing, weight
#     decay included), and gguf_llama.py converts that folder to GGUF f32, f16 and bf16;
#   - batch-1 decoding (ms a token) and prefill of 64 tokens: tern fp32 and bf16 on that
#     folder (`tern bench generate --model DIR --prompt-tokens 64 --tokens 64`) against
#     llama.cpp's llama-bench (`-t 2 -p 64 -n 64 -r 3`) on the GGUF files;
# for each instruction-set level of LEVELS (default "native"; "avx2" as in bench.sh). Rounds
# alternate tern and llama.cpp and each figure is the best of the rounds, so load from other
# jobs hurts both alike; the load average is printed with the results. Figures from a shared,
# loaded machine mean little: the published ones come from a quiet one.
#
# usage: bench/cpu/llama_bench.sh [BUILD_DIR]   env: ROUNDS (3), LEVELS ("native"), PEERS
#        (build-peers/, shared with bench.sh), TERN_SHARED_DIR (../shared: the fixture's
#        data.bin feeds the one zero-rate step)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
peers=${PEERS:-$root/build-peers}
rounds=${ROUNDS:-3}
levels=${LEVELS:-native}
data=${TERN_SHARED_DIR:-$root/../shared}/fixtures/llama-tiny-a/data.bin
export OMP_NUM_THREADS=2

# ---- peers and the model ----
source "$here/peers.sh"
model=$peers/smollm2-135m-tern
if [ ! -s "$model/model.safetensors" ]; then
    "$build/tern" train --backend cpu --init smollm2-135m --data "$data" --batch 1 --seq 8 --steps 1 --lr 0 \
        --out "$model" >/dev/null
fi
for t in f32 f16 bf16; do
    f=$peers/smollm2-135m-$t.gguf
    if [ ! -s "$f" ] || [ "$f" -ot "$model/model.safetensors" ]; then
        "$peers/venv/bin/python" "$here/gguf_llama.py" "$model" "$f.tmp" "$t"
        mv "$f.tmp" "$f"
    fi
done

# ---- the machine ----
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_bf16|avx512_fp16|amx_bf16' | tr '\n' ' ')
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; flags: $flags"
echo "tern: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo +dirty); llama.cpp: llama-cpp-python $llama_version's vendor tree"
echo "model: SmolLM2-135M shape, tern's random init ($model)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- the runs ----
results=$(mktemp)
trap 'rm -f "$results"' EXIT
record() { echo "$1 $2 $3" >>"$results"; } # key, metric, value (best kept later)
tern_generate() { # level precision
    local isa=${1/native/} line
    line=$(TERN_CPU_ISA=$isa "$build/tern" bench generate --backend cpu --model "$model" --precision "$2" \
        --prompt-tokens 64 --tokens 64 --warmup 1 | grep '^bench:')
    record "$1/tern/$2" decode_ms "$(sed -E 's/.*median ([0-9.]+) ms\/token.*/\1/' <<<"$line")"
    record "$1/tern/$2" prefill_ms "$(sed -E 's/.*prefill\+first token ([0-9.]+) ms.*/\1/' <<<"$line")"
}
llama_run() { # level type
    local json
    if ! json=$("$peers/llama-$1/bin/llama-bench" -m "$peers/smollm2-135m-$2.gguf" -t 2 -p 64 -n 64 -r 3 -o json 2>/dev/null); then
        echo "  note: llama-bench ($1) failed on smollm2-135m-$2.gguf"
        return 0
    fi
    python3 -c '
import json, sys
for r in json.loads(sys.stdin.read()):
    ms = 1e3 / r["avg_ts"]
    if r["n_gen"] > 0: print("decode_ms", ms)
    else: print("prefill_ms", ms * r["n_prompt"])' <<<"$json" | while read -r metric value; do
        record "$1/llama.cpp/$2" "$metric" "$value"
    done
}
for round in $(seq "$rounds"); do
    echo "round $round of $rounds (load $(cut -d' ' -f1 /proc/loadavg))"
    for level in $levels; do
        for p in fp32 bf16; do tern_generate "$level" "$p"; done
        for t in f32 f16 bf16; do llama_run "$level" "$t"; done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- the summary: best of the rounds, and ratios within a level ----
python3 - "$results" "$model/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[2]))
C, I, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
D = c.get("head_dim") or C // c["num_attention_heads"]
q, kv = c["num_attention_heads"] * D, c["num_key_value_heads"] * D
# weights a decode step reads: every product's matrix once (the tied embedding as the head)
weights = L * (C * (2 * q + 2 * kv) + 3 * C * I) + V * C
bytes_of = {"fp32": 4, "f32": 4, "bf16": 2, "f16": 2}
best = {}
for line in open(sys.argv[1]):
    key, metric, value = line.split()
    best[(key, metric)] = min(best.get((key, metric), float("inf")), float(value))
levels = sorted({k.split("/")[0] for k, _ in best}, key=lambda s: s != "native")
for lv in levels:
    print(f"\n{lv}: best of the rounds (ms; decode per token, prefill of 64 tokens)")
    for key in sorted({k for k, _ in best if k.startswith(lv + "/")}):
        row = "  ".join(f"{m} {best[(key, m)]:8.2f}" for m in ("decode_ms", "prefill_ms") if (key, m) in best)
        if (key, "decode_ms") in best:
            row += f"  ({bytes_of[key.split('/')[-1]] * weights / best[(key, 'decode_ms')] / 1e6:.1f} GB/s of weights decoding)"
        print(f"  {key[len(lv) + 1:]:18s} {row}")
    def ratio(a, b, m):
        ka, kb = (f"{lv}/{a}", m), (f"{lv}/{b}", m)
        if ka in best and kb in best:
            print(f"  {m[:-3]:8s} {a} vs {b}: {best[kb] / best[ka]:.2f}x (>1: tern faster)")
    for m in ("decode_ms", "prefill_ms"):
        ratio("tern/fp32", "llama.cpp/f32", m)
        ratio("tern/bf16", "llama.cpp/bf16", m)
        ratio("tern/bf16", "llama.cpp/f16", m)
EOF
