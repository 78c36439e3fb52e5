#!/usr/bin/env bash
# Does the default search beat random networks after training, where a pilot shows room? (issue 46)
#
# Main EfficientFormerV2 space, CIFAR-10 at 32 px, the budget priced in parameters (5M, a 5% band:
# parameters bind at every resolution, latency predicted at 32 px does not).
#
#   STAGE=pilots bash docs/results/studies/search-vs-random.sh   # nas headroom at each candidate recipe
#   STAGE=study EPOCHS=4 TRAIN_IMAGES=20000 bash docs/results/studies/search-vs-random.sh
#
# Pilots: 4 random networks of the band, 2 seeds each, per candidate recipe (cifar10-rank with more
# epochs or more images); the study takes the cheapest whose spread over seed noise is 1.5 or more.
# Study: 3 supernet seeds (independent groups). Each supernet is searched to the budget with the
# default strategy (evolution with its predictor) and with greedy slimming (fast); the default's
# network is compared with 5 random networks of the band, 3 seeds each, trained from scratch
# (`nas compare --target`: the band of the search's target), and greedy's network with the same
# random networks (--random-from: their trainings are reused).
#
# Every step is resumable: a finished run (result.json) is skipped, an interrupted one continues with
# --resume. Run folders go to runs/; each records its wall time (wall.json) across sessions.
set -euo pipefail
cd "$(dirname "$0")/../../.."
DATA=${DATA:-../shared/data/cifar10}
STAGE=${STAGE:-pilots}
TARGET=${TARGET:-5000000}
PILOTS=${PILOTS:-e1 e4 all2}

source docs/results/studies/step.sh  # step RUN_FOLDER COMMAND...: skipped when finished, else --resume

recipe_flags() {  # recipe_flags NAME: cifar10-rank's overrides of a pilot
    case $1 in
        e1) echo "--epochs 1" ;;                       # the recipe as it is: 1 epoch on 20,000 images
        e4) echo "--epochs 4" ;;                       # 4 epochs on the same 20,000
        all2) echo "--epochs 2 --train-images 0" ;;    # 2 epochs on all 45,000
        *) echo "unknown pilot $1" >&2; exit 2 ;;
    esac
}

if [ "$STAGE" = pilots ]; then
    for pilot in $PILOTS; do
        out=runs/pilot-v2-main-32px-$pilot
        # shellcheck disable=SC2046
        step "$out" nas headroom --space efficientformerv2 --objective params --target "$TARGET" \
            --tolerance 0.05 --networks 4 --seeds 2 --recipe cifar10-rank $(recipe_flags "$pilot") \
            --data "$DATA" --out "$out" --seed 0
    done
    exit 0
fi

: "${EPOCHS:?set EPOCHS (and TRAIN_IMAGES) to the recipe of the pilot the study takes}"
TRAIN_IMAGES=${TRAIN_IMAGES:-20000}
training=(--recipe cifar10-rank --epochs "$EPOCHS" --train-images "$TRAIN_IMAGES")
for seed in 0 1 2; do
    supernet=runs/cifar10-v2-main-32px-seed$seed
    evolution=runs/search-v2-main-32px-seed$seed-params
    greedy=runs/search-v2-main-32px-seed$seed-params-greedy
    compare=runs/compare-v2-main-32px-seed$seed-params
    step "$supernet" nas train-supernet efficientformerv2 --recipe cifar10-cpu --data "$DATA" \
        --epochs 1 --warmup-epochs 0.2 --seed "$seed" --run "$supernet"
    step "$evolution" nas search --supernet "$supernet" --objective params --target "$TARGET" \
        --search-images 1000 --bn-calib-batches 2 --run "$evolution" --seed 0
    step "$greedy" nas search --supernet "$supernet" --objective params --target "$TARGET" --strategy greedy \
        --search-images 1000 --bn-calib-batches 2 --run "$greedy" --seed 0
    step "$compare" nas compare --searched "$evolution/arch.yaml" --supernet "$supernet" --objective params \
        --target "$TARGET" --random 5 --seeds 3 "${training[@]}" --data "$DATA" --out "$compare" --seed 0
    step "$compare-greedy" nas compare --searched "$greedy/arch.yaml" --supernet "$supernet" --objective params \
        --target "$TARGET" --random-from "$compare" "${training[@]}" --seeds 3 --data "$DATA" \
        --out "$compare-greedy" --seed 0
done
