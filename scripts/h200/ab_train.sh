#!/usr/bin/env bash
# A change against its baseline in the same run: the training step (GPT-2 124M, B=16,
# T=1024, bf16) of this tree (A) and of a copy with AB_PATCH (a diff of the change, taken
# with `git diff` from the repository root) reverse-applied (B), alternated AB_ROUNDS times
# (default 3). AB_ENV ('+'-joined settings) applies to both.
#   OUT=$OUT AB_PATCH=change.patch bash scripts/h200/ab_train.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
[ -n "${AB_PATCH:-}" ] && [ -f "$AB_PATCH" ] || { note "FAIL AB_PATCH names no file"; exit 1; }
base=/tmp/tern-ab-base
rm -rf $base && mkdir -p $base
tar --exclude=./build-h200 --exclude=./.git -cf - . | tar -xf - -C $base
step "baseline: the change reverse-applied" 30 ab-patch.log patch -d $base -p1 -R -i "$PWD/$AB_PATCH"
start=$SECONDS
{ cmake -S $base -B $base/build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
  cmake --build $base/build-h200 -j "$(nproc)" --target tern_cli; } > "$logs/ab-build.log" 2>&1 ||
    { note "FAIL baseline build: $(grep -m3 -E 'error|Error' "$logs/ab-build.log")"; exit 1; }
note "ok   baseline build ($((SECONDS - start)) s)"
args=(bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 10 --warmup 3)
env_ab=(env $(echo "${AB_ENV:-}" | tr + " "))
for r in $(seq 1 "${AB_ROUNDS:-3}"); do
    for side in A B; do
        bin=$b/tern
        [ $side = B ] && bin=$base/build-h200/tern
        step "train $side, round $r" 90 "ab-$side-$r.log" "${env_ab[@]}" "$bin" "${args[@]}"
        note "  $side: $(grep '^bench:' "$logs/ab-$side-$r.log" | tail -1)"
    done
done
