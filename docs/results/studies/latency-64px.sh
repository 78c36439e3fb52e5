#!/usr/bin/env bash
# The equal-latency study (docs/results/comparisons.md): on the main efficientformerv2 space,
# CIFAR-10 resized to 64 px (attention stages see 4x4 and 2x2 tokens, not 1x1), two supernet seeds;
# each searched to a predicted iPhone 12 latency priced at 64 px (the training resolution) and
# compared with 5 random networks drawn fresh at the same latency, 3 seeds each, all trained from
# scratch with cifar10-rank at 64 px. Sized for about four hours on 2 CPU cores.
#
#   bash docs/results/studies/latency-64px.sh     # from the repository root; rerun to resume
#
# Every step is resumable: a finished run (result.json) is skipped, an interrupted one continues with
# --resume. Run folders go to runs/; each records its wall time (wall.json) across sessions.
set -euo pipefail
cd "$(dirname "$0")/../../.."
DATA=${DATA:-../shared/data/cifar10}
TARGET_MS=${TARGET_MS:-0.655}  # the middle of the space at 64 px: 0.637 (smallest) to 0.727 ms (largest)

source docs/results/studies/step.sh  # step RUN_FOLDER COMMAND...: skipped when finished, else --resume

for seed in 0 1; do
    supernet=runs/cifar10-v2-main-64px-seed$seed
    search=runs/search-v2-main-64px-seed$seed-lat
    compare=runs/compare-v2-main-64px-seed$seed-lat
    step "$supernet" nas train-supernet efficientformerv2 --recipe cifar10-cpu --data "$DATA" \
        --img-size 64 --epochs 1 --warmup-epochs 0.2 --seed "$seed" --run "$supernet"
    step "$search" nas search --supernet "$supernet" --objective latency --target "$TARGET_MS" \
        --device iphone12 --workers 2 --search-images 1000 --bn-calib-batches 4 --strategy greedy --finalists 0 \
        --noise-networks 0 --run "$search" --seed 0
    step "$compare" nas compare --searched "$search/arch.yaml" --supernet "$supernet" --objective latency \
        --device iphone12 --random 5 --seeds 3 --recipe cifar10-rank --img-size 64 --data "$DATA" \
        --workers 2 --out "$compare" --seed 0
done
