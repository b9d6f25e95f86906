#!/usr/bin/env bash
# Hugging Face transformers loads a checkpoint written by `tern train`, unchanged, and
# computes tern's loss on the same batch (hf_load_check.py). It needs a Python with torch and
# transformers (python3, or $TERN_PYTHON); without them the test exits 77, which ctest shows as
# skipped (SKIP_RETURN_CODE), never as passed. usage: test_hf_load.sh TERN_BINARY
set -u
tern=$1
shared=${TERN_SHARED_DIR:?}
python=${TERN_PYTHON:-python3}
if ! "$python" -c 'import torch, transformers' 2>/dev/null; then
    echo "skipped: $python has no torch and transformers (pip install torch transformers)"
    exit 77
fi
work=$(mktemp -d /tmp/tern-hf-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2 TERN_BACKEND=cpu
head -c 200000 "$shared/data/brown.txt" > "$work/train.txt"
tail -c 50000 "$shared/data/brown.txt" > "$work/val.txt"
# a trained checkpoint (not the initial weights: its parameters have moved off their init)
"$tern" train --init tiny --data "$work/train.txt" --batch 2 --seq 32 --lr 1e-3 --warmup 1 \
    --steps 3 --out "$work/ckpt" > "$work/train.log" 2>&1 ||
    { echo "FAIL: train failed: $(tail -2 "$work/train.log")"; exit 1; }
if "$python" "$(dirname "$0")/hf_load_check.py" "$tern" "$work/ckpt" "$work/val.txt" > "$work/hf.log" 2>&1; then
    echo "ok: transformers loads the checkpoint: $(tail -1 "$work/hf.log")"
else
    echo "FAIL: transformers check: $(tail -3 "$work/hf.log")"
    exit 1
fi
