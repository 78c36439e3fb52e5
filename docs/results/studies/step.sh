# Sourced by the study scripts beside it: one resumable step of a study.
step() {  # step RUN_FOLDER COMMAND...: run COMMAND unless RUN_FOLDER finished; --resume if it started
    local run=$1; shift
    if [ -f "$run/result.json" ]; then echo "done: $run"; return; fi
    local resume=(); [ -d "$run" ] && resume=(--resume)
    echo "+ $* ${resume[*]}"
    "$@" "${resume[@]}"
}
