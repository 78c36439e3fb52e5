# Sourced by the study scripts beside it: one resumable step of a study.
step() {  # step RUN_FOLDER COMMAND...: run COMMAND unless RUN_FOLDER finished; --resume if it started
    local run=$1; shift
    if [ -f "$run/result.json" ]; then echo "done: $run"; return; fi
    # --resume once the step recorded its settings: a folder holding only trainings made elsewhere
    # (trainings_elsewhere.py) starts the step, which adopts them
    local resume=(); { [ -f "$run/config.yaml" ] || [ -f "$run/plan.json" ]; } && resume=(--resume)
    echo "+ $* ${resume[*]}"
    "$@" "${resume[@]}"
}
