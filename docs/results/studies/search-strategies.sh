#!/usr/bin/env bash
# The search strategies benchmark (docs/explanation/search-strategies.md): every strategy of nas search
# at the same number of supernet evaluations, 5 seeds, each choice judged on the validation split.
# Two supernets: the tiny EfficientFormerV2 space (2 epochs at 32 px) and the main space at 64 px (the
# equal-latency study's seed-0 supernet, 1 epoch). At 64 px the predicted iPhone 12 latency of the
# whole main space spans only 0.637-0.727 ms, so the budget is priced in parameters, where it binds.
#
#   bash docs/results/studies/search-strategies.sh     # from the repository root; rerun to resume
#
# Every step is resumable: a finished supernet (result.json) or search is skipped, an interrupted one
# continues. BUDGETS, SEEDS, WHICH and STOP_AFTER narrow a session's share (the report covers what has run).
set -euo pipefail
cd "$(dirname "$0")/../../.."
DATA=${DATA:-../shared/data/cifar10}
BUDGETS=${BUDGETS:-100 300}
SEEDS=${SEEDS:-5}
WHICH=${WHICH:-tiny main}
STOP_AFTER=${STOP_AFTER:-}  # seconds: start no new search after this (a session's share)

source docs/results/studies/step.sh  # step RUN_FOLDER COMMAND...: skipped when finished, else --resume

for which in $WHICH; do
    if [ "$which" = tiny ]; then
        supernet=runs/cifar10-v2-tiny-2ep
        step "$supernet" nas train-supernet efficientformerv2 --space efficientformerv2-tiny --recipe cifar10-cpu \
            --data "$DATA" --epochs 2 --warmup-epochs 0.3 --seed 0 --run "$supernet"
        target=300000  # parameters: the tiny space spans 0.11M to 0.62M at 32 px
    else
        supernet=runs/cifar10-v2-main-64px-seed0
        step "$supernet" nas train-supernet efficientformerv2 --recipe cifar10-cpu --data "$DATA" \
            --img-size 64 --epochs 1 --warmup-epochs 0.2 --seed 0 --run "$supernet"
        target=5000000  # parameters: the main space spans 0.32M to 27.3M at 64 px
    fi
    out=runs/bench-strategies-$which kept=docs/results/bench-strategies-$which
    # The finished searches are committed (runs/ does not survive a new machine): continue from them.
    if [ ! -d "$out" ] && [ -d "$kept" ]; then mkdir -p runs && cp -r "$kept" "$out"; fi
    python benchmarks/search_strategies.py --supernet "$supernet" --objective params --target "$target" \
        --budgets $BUDGETS --seeds "$SEEDS" --search-images 1000 --bn-calib-batches 2 \
        --out "runs/bench-strategies-$which" --report "docs/results/search-strategies-$which.txt" \
        ${STOP_AFTER:+--stop-after "$STOP_AFTER"}
    cp "$out/benchmark.json" "docs/results/search-strategies-$which.json"
    rm -rf "$kept" && cp -r "$out" "$kept" && rm -f "$kept"/*/.lock "$kept"/*/events.out.tfevents.*
done
