# Sourced by the study scripts beside it: one resumable step of a study.

# A step still under way when a session ends would be lost with runs/, which is not kept between machines:
# `keep_unfinished RUN_FOLDER` copies it here without checkpoints, keeping its finished trainings only (each a
# result.json of a few hundred bytes), to be committed; `step` copies it back before resuming it, so the next
# machine trains only what was not finished. A finished step is committed under docs/results/ instead.
UNFINISHED=docs/results/studies/unfinished

keep_unfinished() {  # keep_unfinished RUN_FOLDER
    local run=${1%/}
    local kept=$UNFINISHED/$(basename "$run")
    [ -f "$run/plan.json" ] || [ -f "$run/config.yaml" ] || { echo "keep_unfinished: $run has not started" >&2; return 2; }
    rm -rf "$kept" && mkdir -p "$kept"
    find "$run" -maxdepth 1 -type f ! -name .lock -exec cp {} "$kept/" \;
    [ -d "$run/archs" ] && cp -r "$run/archs" "$kept/"
    local training
    for training in "$run"/runs/*/; do
        [ -f "$training/result.json" ] || continue  # under way: trained again from its start
        mkdir -p "$kept/runs/$(basename "$training")"
        find "$training" -maxdepth 1 -type f ! -name checkpoint.pt ! -name 'events.out.tfevents*' ! -name .lock \
            -exec cp {} "$kept/runs/$(basename "$training")/" \;
    done
    echo "kept $(find "$kept/runs" -name result.json 2>/dev/null | wc -l) finished trainings of $run in $kept"
}

step() {  # step RUN_FOLDER COMMAND...: run COMMAND unless RUN_FOLDER finished; --resume if it started
    local run=$1; shift
    if [ ! -e "$run" ] && [ -d "$UNFINISHED/$(basename "$run")" ]; then
        mkdir -p "$(dirname "$run")" && cp -r "$UNFINISHED/$(basename "$run")" "$run"
        echo "carried over: $run (from $UNFINISHED)"
    fi
    if [ -f "$run/result.json" ]; then echo "done: $run"; return; fi
    # --resume once the step recorded its settings: a folder holding only trainings made elsewhere
    # (trainings_elsewhere.py) starts the step, which adopts them
    local resume=(); { [ -f "$run/config.yaml" ] || [ -f "$run/plan.json" ]; } && resume=(--resume)
    echo "+ $* ${resume[*]}"
    "$@" "${resume[@]}"
}
