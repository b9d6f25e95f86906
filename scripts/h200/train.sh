#!/usr/bin/env bash
# Training on the H200: resume on cuda against an uninterrupted run (fp32 and bf16), then
# the default model (models/brown-mini) trained on Brown in two lengths side by side, so the
# better validation loss can be kept. Run from the repository root with .deb and .fixtures
# carried (.fixtures/data/brown-{train,val}.bin from `tern tokenize`):
#   OUT=$OUT bash scripts/h200/train.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
data=(--data .fixtures/data/brown-train.bin)

# ---- resume: 20 steps against 10 + 10 ----
strip() { grep '^step' "$1" | sed 's/ | [0-9.]* ms | [0-9]* tok\/s$//'; }
for prec in fp32 bf16; do
    common=("${data[@]}" --batch 8 --seq 128 --lr 1e-3 --warmup 3 --schedule cosine --wd 0.1
            --val .fixtures/data/brown-val.bin --val-every 5 --val-batches 2 --backend cuda --precision $prec)
    w=$OUT/resume-$prec
    $b/tern train --init mini "${common[@]}" --steps 20 --out $w/full > $logs/resume-full-$prec.log 2>&1
    $b/tern train --init mini "${common[@]}" --steps 10 --out $w/part > $logs/resume-part-$prec.log 2>&1
    $b/tern train --resume $w/part "${common[@]}" --steps 20 > $logs/resume-rest-$prec.log 2>&1
    if [ -n "$(strip $logs/resume-full-$prec.log)" ] &&
       [ "$(strip $logs/resume-full-$prec.log | tail -10)" = "$(strip $logs/resume-rest-$prec.log)" ]; then
        note "ok   resume on cuda, $prec: steps 11-20 identical to the uninterrupted run"
    else
        note "DIFF resume on cuda, $prec: see the logs (paste below)"
        paste <(strip $logs/resume-full-$prec.log | tail -10) <(strip $logs/resume-rest-$prec.log) >> "$summary"
    fi
    rm -rf $w
done

# ---- the default model ----
model=(--init mini "${data[@]}" --val .fixtures/data/brown-val.bin --val-every 100 --val-batches 16
       --batch 32 --seq 256 --lr 1e-3 --schedule cosine --wd 0.1 --backend cuda --precision bf16
       --save-dtype bf16)
start=$SECONDS
for steps in 1200 2400; do
    $b/tern train "${model[@]}" --steps $steps --warmup $((steps / 20)) --save-every $steps \
        --out $OUT/model-$steps > $logs/model-$steps.log 2>&1 &
done
wait
note "models trained in $((SECONDS - start)) s"
for steps in 1200 2400; do
    note "model-$steps: $(grep -E '^step' $logs/model-$steps.log | grep val | tail -3 | tr '\n' ' ' | cut -c1-300)"
    d=$OUT/model-$steps
    if [ -f $d/model.safetensors ]; then
        cp $logs/model-$steps.log $d/train.log
        (cd $d && split -b 15M -d model.safetensors model.safetensors.part- &&
         rm -f model.safetensors optimizer-*.safetensors vocab.json merges.txt)
    fi
done
