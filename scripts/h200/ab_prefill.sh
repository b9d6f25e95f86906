#!/usr/bin/env bash
# Where the prefill's time goes, this tree (A) against the carried older tree (B, see
# ab_tree.sh): bench generate's prefill with each handler's per-operation profile.
#   OUT=$OUT bash scripts/h200/ab_prefill.sh          (carry .deb .fixtures .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
base=/tmp/tern-ab-old
rm -rf $base && mkdir -p $base && tar -xzf .old/old.tar.gz -C $base
{ cmake -S $base -B $base/build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
  cmake --build $base/build-h200 -j "$(nproc)" --target tern_cli; } > "$logs/ab-build.log" 2>&1 ||
    { note "FAIL B build"; exit 1; }
gen=(bench generate --backend cuda --precision bf16 --tokens 64 --warmup 3)
for r in 1 2; do
    step "A gen $r" 60 a-gen-$r.log env TERN_CACHE_DIR=/tmp/kc-A $b/tern "${gen[@]}"; note "  A: $(grep '^bench:' $logs/a-gen-$r.log)"
    step "B gen $r" 60 b-gen-$r.log env TERN_CACHE_DIR=/tmp/kc-B $base/build-h200/tern "${gen[@]}"; note "  B: $(grep '^bench:' $logs/b-gen-$r.log)"
    step "A gen nographs $r" 60 a-ng-$r.log env TERN_CACHE_DIR=/tmp/kc-A TERN_CUDA_TUNE=graphs=0 $b/tern "${gen[@]}"; note "  A graphs=0: $(grep '^bench:' $logs/a-ng-$r.log)"
    step "B gen nographs $r" 60 b-ng-$r.log env TERN_CACHE_DIR=/tmp/kc-B TERN_CUDA_NO_GRAPHS=1 $base/build-h200/tern "${gen[@]}"; note "  B graphs=0: $(grep '^bench:' $logs/b-ng-$r.log)"
done
step "A profile" 60 a-prof.log env TERN_CACHE_DIR=/tmp/kc-A TERN_CUDA_TUNE=profile=1,graphs=0 $b/tern bench generate --backend cuda --precision bf16 --tokens 2 --warmup 1
step "B profile" 60 b-prof.log env TERN_CACHE_DIR=/tmp/kc-B TERN_CUDA_PROFILE=1 TERN_CUDA_NO_GRAPHS=1 $base/build-h200/tern bench generate --backend cuda --precision bf16 --tokens 2 --warmup 1
note "A profile:"; tail -40 $logs/a-prof.log >> "$summary"
note "B profile:"; tail -40 $logs/b-prof.log >> "$summary"
