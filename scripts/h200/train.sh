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
best=
for steps in 1200 2400; do
    d=$OUT/model-$steps
    val=$(tail -1 $d/losses.tsv 2>/dev/null | cut -f3)
    note "model-$steps: final validation loss ${val:-none}; $(grep -E '^step' $logs/model-$steps.log | grep val | tail -2 | tr '\n' ' ' | cut -c1-240)"
    cp $logs/model-$steps.log $d/train.log 2>/dev/null
    if [ -f $d/model.safetensors ] && [ -n "$val" ] &&
       { [ -z "$best" ] || awk "BEGIN { exit !($val < $best_val) }"; }; then
        best=$steps best_val=$val
    fi
done
# what comes back: the better model's weights in parts of 15 MB, its curve, config and log
# in one archive (the device returns at most 8 files)
if [ -n "$best" ]; then
    note "keeping model-$best (validation loss $best_val)"
    d=$OUT/model-$best
    mkdir -p $OUT/model
    split -b 15M -d $d/model.safetensors $OUT/model/model.safetensors.part-
    tar czf $OUT/model/meta.tgz -C $d config.json losses.tsv loss.svg train.log
fi
for steps in 1200 2400; do rm -rf $OUT/model-$steps; done
