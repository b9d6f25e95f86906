#!/usr/bin/env bash
# tern's cpu handler against llama.cpp on random-init GPT-2 124M, 2 threads, in one run:
#   - the machine's memory bandwidth (membw.c; decoding batch 1 reads every weight a token)
#   - batch-1 decoding (ms a token) and prefill of 64 tokens: tern fp32 and bf16 against
#     llama.cpp's llama-bench with the same model as GGUF f32, f16 and bf16; and tern's q8_0
#     weights ("q8": the layers' matrices, the tied lm head f32; "q8-all": the lm head too,
#     as llama.cpp's file) against llama.cpp q8_0. llama-bench's native build dies (SIGILL)
#     in its AMX q8_0 kernel on a VM whose processor lists AMX (the Xeon of
#     docs/PERFORMANCE.md): there its q8_0 runs take --repack 0 (no AMX or repacked buffers;
#     the plain q8_0 kernels); elsewhere, and in the AVX2 build, llama.cpp repacks as usual.
#   - a training step, B=4 T=64 fp32 (tern only)
# each for two instruction-set levels: "native" (tern's best kernels, llama.cpp built with
# GGML_NATIVE) and "avx2" (tern with TERN_CPU_ISA=avx2, llama.cpp built for AVX2+FMA+F16C with
# AVX-512 off: the class of an AVX2-only machine such as Zen 3, measured on this one).
# Rounds alternate tern and llama.cpp, and each figure is the best of the rounds, so load
# from other jobs hurts both alike; the load average is printed with the results.
#
# Peers are fetched and built here, once, under $PEERS (default build-peers/, ignored by git):
# peers.sh (llama.cpp's llama-bench from the llama-cpp-python sdist, for each level, and a
# venv with gguf-py to write the GGUF files with gguf_gpt2.py).
#
# usage: bench/cpu/bench.sh [BUILD_DIR]   env: ROUNDS (3), LEVELS ("native avx2"), PEERS,
#   TERN_RUNS ("fp32 bf16 fp32:q8 fp32:q8-all": precision[:weights]), LLAMA_TYPES
#   ("f32 f16 bf16 q8_0"), TRAIN (1: time the training step)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
peers=${PEERS:-$root/build-peers}
rounds=${ROUNDS:-3}
levels=${LEVELS:-native avx2}
tern_runs=${TERN_RUNS:-fp32 bf16 fp32:q8 fp32:q8-all}
llama_types=${LLAMA_TYPES:-f32 f16 bf16 q8_0}
train=${TRAIN:-1}
tokenizer=${TERN_SHARED_DIR:-$root/../shared}/data/gpt2-tokenizer
export OMP_NUM_THREADS=2

# ---- peers ----
source "$here/peers.sh"
for t in $llama_types; do
    f=$peers/gpt2-$t.gguf
    if [ ! -s "$f" ]; then
        "$peers/venv/bin/python" "$here/gguf_gpt2.py" "$tokenizer" "$f.tmp" "$t"
        mv "$f.tmp" "$f"
    fi
done
cc -std=c11 -O3 -march=native -fopenmp -D_POSIX_C_SOURCE=200809L "$here/membw.c" -o "$peers/membw"

# ---- the machine ----
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_bf16|avx512_fp16|amx_bf16' | tr '\n' ' ')
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; flags: $flags"
echo "tern: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo +dirty); llama.cpp: llama-cpp-python $llama_version's vendor tree"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in 1 2; do OMP_NUM_THREADS=$t "$peers/membw" 1024 5 | sed 's/^/  /'; done

# ---- the runs ----
results=$(mktemp)
trap 'rm -f "$results"' EXIT
record() { echo "$1 $2 $3" >>"$results"; } # key, metric, value (best kept later)

tern_generate() { # level precision[:weights]
    local isa=${1/native/} precision=${2%%:*} weights=
    [[ $2 == *:* ]] && weights="--weights ${2#*:}"
    local line
    # shellcheck disable=SC2086
    line=$(TERN_CPU_ISA=$isa "$build/tern" bench generate --init gpt2 --precision "$precision" $weights \
        --prompt-tokens 64 --tokens 64 --warmup 1 | grep '^bench:')
    record "$1/tern/$2" decode_ms "$(sed -E 's/.*median ([0-9.]+) ms\/token.*/\1/' <<<"$line")"
    record "$1/tern/$2" prefill_ms "$(sed -E 's/.*prefill\+first token ([0-9.]+) ms.*/\1/' <<<"$line")"
}
llama_run() { # level type
    local json extra=()
    # AMX's q8_0 kernel: SIGILL on the Xeon VM that lists AMX; elsewhere llama.cpp repacks
    [[ $1 == native && $2 == q8_0 ]] && grep -qw amx_int8 /proc/cpuinfo && extra=(--repack 0)
    if ! json=$("$peers/llama-$1/bin/llama-bench" -m "$peers/gpt2-$2.gguf" -t 2 -p 64 -n 64 -r 3 "${extra[@]}" -o json 2>/dev/null); then
        echo "  note: llama-bench ($1) failed on gpt2-$2.gguf"
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
        for p in $tern_runs; do tern_generate "$level" "$p"; done
        for t in $llama_types; do llama_run "$level" "$t"; done
        [ "$train" = 1 ] || continue
        isa=${level/native/}
        ms=$(TERN_CPU_ISA=$isa "$build/tern" bench train --init gpt2 --batch 4 --seq 64 --steps 3 --warmup 1 |
            sed -nE 's/^bench:.*median ([0-9.]+) ms\/step.*/\1/p')
        record "$level/tern/fp32" train_ms "$ms"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- the summary: best of the rounds, and ratios within a level ----
python3 - "$results" <<'EOF'
import sys
# bytes of weights a decode step reads: GPT-2 124M's parameters in the stored type
params = 124_439_808
head = 50257 * 768  # the tied lm head
bytes_of = {"fp32": 4 * params, "f32": 4 * params, "bf16": 2 * params, "f16": 2 * params,
            "q8_0": 34 * params // 32, "fp32:q8-all": 34 * params // 32,
            "fp32:q8": 34 * (params - head) // 32 + 4 * head}
best = {}
for line in open(sys.argv[1]):
    key, metric, value = line.split()
    k = (key, metric)
    best[k] = min(best.get(k, float("inf")), float(value))
levels = sorted({k.split("/")[0] for k, _ in best}, key=lambda s: s != "native")
for lv in levels:
    print(f"\n{lv}: best of the rounds (ms; decode per token, prefill of 64 tokens, train step)")
    for key in sorted({k for k, _ in best if k.startswith(lv + "/")}):
        row = "  ".join(f"{m} {best[(key, m)]:8.2f}" for m in ("decode_ms", "prefill_ms", "train_ms")
                        if (key, m) in best)
        if (key, "decode_ms") in best:
            gbs = bytes_of[key.split("/")[-1]] / best[(key, "decode_ms")] / 1e6
            row += f"  ({gbs:.1f} GB/s of weights decoding)"
        print(f"  {key[len(lv) + 1:]:18s} {row}")
    def ratio(a, b, m):
        ka, kb = (f"{lv}/{a}", m), (f"{lv}/{b}", m)
        if ka in best and kb in best:
            print(f"  {m[:-3]:8s} {a} vs {b}: {best[kb] / best[ka]:.2f}x (>1: tern faster)")
    for m in ("decode_ms", "prefill_ms"):
        ratio("tern/fp32", "llama.cpp/f32", m)
        ratio("tern/bf16", "llama.cpp/bf16", m)
        ratio("tern/bf16", "llama.cpp/f16", m)
        ratio("tern/fp32:q8-all", "llama.cpp/q8_0", m)
        ratio("tern/fp32:q8", "llama.cpp/q8_0", m)
EOF
