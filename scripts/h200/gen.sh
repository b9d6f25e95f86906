#!/usr/bin/env bash
# Decoding on the H200: tokens/s of `tern bench generate` (bf16, graphs) with the decode
# step's variants: programmatic dependent launch off (TERN_CUDA_PDL=0), the GEMV kernels'
# column threads (TERN_GPU_GEMV_TC), cuBLASLt instead of them (TERN_CUDA_GEMV=0), and the
# cached attention's splits (TERN_GPU_AC_SPLITS). GEN_VARIANTS lists others (a comma joins two
# settings: TERN_GPU_GEMV_TC=8,TERN_GPU_AC_SPLITS=4).
#   OUT=$OUT bash scripts/h200/gen.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
gen=($b/tern bench generate --backend cuda --precision bf16 --tokens 512 --warmup 2)
for v in ${GEN_VARIANTS:-default TERN_CUDA_PDL=0 TERN_GPU_GEMV_TC=1 TERN_GPU_GEMV_TC=2 TERN_GPU_GEMV_TC=4 \
         TERN_GPU_GEMV_TC=8 TERN_GPU_AC_SPLITS=1 TERN_GPU_AC_SPLITS=4 default}; do
    if [ "$v" = default ]; then env=(); else env=(${v//,/ }); fi
    step "generate, $v" 60 "gen-${v//=/-}.log" env "${env[@]}" "${gen[@]}"
    note "  $(grep '^bench:' "$logs/gen-${v//=/-}.log" | tail -1)"
done
