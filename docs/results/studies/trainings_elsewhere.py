"""Train a comparison's networks on another machine (a GPU without Ray), then let ``nas compare`` adopt them.

    # here: the trainings `nas compare ARGS` would run (and those of more searched networks against its draw)
    python docs/results/studies/trainings_elsewhere.py plan JOBS.pkl --also searched=OUT2:ARCH2 -- ARGS
    # there (the same commit and data at the same relative path): train them, several processes on one GPU
    python docs/results/studies/trainings_elsewhere.py train JOBS.pkl --processes 7 --pack OUT/trainings.tar.gz
    # here: unpack, check each run trained the network the comparison draws, then run `nas compare ARGS`
    python docs/results/studies/trainings_elsewhere.py check JOBS.pkl

``nas compare`` trains every network x seed in ``OUT/runs/<name>[-seedK]`` and skips a run folder that holds
a ``result.json`` (:meth:`nas.runs.folder.RunFolder.finished_or_run`), so run folders trained elsewhere
are adopted as they are. ``plan`` builds the comparison's request exactly as ``nas compare`` does and draws
its random networks the same way (:func:`nas.studies.compare_plan.plan_networks`: the draw depends on the
searched network, ``--seed``, the space and the priced table, not on the supernet, which ``plan`` skips).
``--also NAME=OUT:ARCH`` adds the seeded trainings of another searched network compared with the same draw
(``nas compare --random-from``): only its own network trains, the random ones are reused.

Every training records where it ran (its ``result.json``'s ``provenance``: the GPU's name, torch). ``train``
writes ``trainings.json`` beside the pack: the machine, each training's wall time and the whole run's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def plan(jobs_path: Path, compare_argv: list[str], also: list[str]) -> None:
    """Write the trainings ``nas compare compare_argv`` would run (and ``also``'s) to ``jobs_path``
    (pickled requests) and a readable listing beside it (``.json``)."""
    from nas.cli.compare import compare_request
    from nas.cli.main import build_parser
    from nas.studies.compare import planned_networks, prepare
    from nas.studies.trainings import seeded_jobs

    args = build_parser().parse_args(["compare", *compare_argv])
    # The draw does not depend on the supernet; the comparison scores with it afterwards.
    request = dataclasses.replace(compare_request(args), supernet=None, bn_calib_batches=None)
    prepared = prepare(request)
    _, networks, _ = planned_networks(request, prepared)
    config = prepared.config
    seeds = [config.seed + k for k in range(config.seeds)]
    jobs = seeded_jobs(networks, seeds, request, Path(request.out) / "runs", config.data, config.max_steps)
    for item in also:
        name, rest = item.split("=", 1)
        out, arch_path = rest.split(":", 1)
        other = request.space.resolve(arch_path)[1]
        jobs += seeded_jobs([(name, other)], seeds, request, Path(out) / "runs", config.data, config.max_steps)
    listing = {
        "commit": _commit(),
        "compare": compare_argv,
        "jobs": [{"run": str(j.run), "arch_digest": j.arch.digest, "seed": j.seed} for j in jobs],
    }
    jobs_path.parent.mkdir(parents=True, exist_ok=True)
    jobs_path.write_bytes(pickle.dumps(jobs))
    jobs_path.with_suffix(".json").write_text(json.dumps(listing, indent=1) + "\n")
    print(f"{len(jobs)} trainings planned in {jobs_path}")


def _commit() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def _train(job, threads: int) -> dict:
    import torch

    from nas.studies.trainings import train_one

    torch.set_num_threads(threads)
    start = time.perf_counter()
    result = train_one(dataclasses.replace(job, progress=False))
    return {"run": str(job.run), "top1": result.get("top1"), "wall_seconds": round(time.perf_counter() - start, 1)}


def train(jobs_path: Path, processes: int, threads: int, pack: Path | None) -> None:
    """Train the planned jobs in ``processes`` processes of ``threads`` torch threads each; with ``pack``,
    the finished run folders without checkpoints in that tarball and ``trainings.json`` beside it."""
    import torch

    from nas.data import load_splits

    jobs = pickle.loads(jobs_path.read_bytes())
    start = time.perf_counter()
    # The decode check once per training subset, before the workers (each would otherwise check it at once).
    for seed in sorted({j.seed for j in jobs}):
        load_splits(jobs[0].data, jobs[0].recipe, seed, hold_out_search=False, check_workers=processes * threads)
    checked = time.perf_counter() - start
    print(f"data checked in {checked:.1f} s", flush=True)
    done, failed = [], []
    with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(_train, job, threads): job for job in jobs}
        for future in as_completed(futures):
            try:
                done.append(future.result())
                print(f"{time.perf_counter() - start:7.1f} s  {done[-1]}", flush=True)
            except Exception as exc:  # report every failure, keep the others training
                failed.append({"run": str(futures[future].run), "error": f"{type(exc).__name__}: {exc}"})
                print(f"FAILED {failed[-1]}", flush=True)
    record = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "processes": processes,
        "threads_per_process": threads,
        "data_check_seconds": round(checked, 1),
        "wall_seconds": round(time.perf_counter() - start, 1),
        # the commit the plan was made at: the tree copied to another machine may hold no .git, or an older one
        "commit": json.loads(jobs_path.with_suffix(".json").read_text())["commit"],
        "trainings": sorted(done, key=lambda d: d["run"]),
        "failed": failed,
    }
    if pack is not None:
        pack.parent.mkdir(parents=True, exist_ok=True)
        (pack.parent / "trainings.json").write_text(json.dumps(record, indent=1) + "\n")
        with tarfile.open(pack, "w:gz") as tar:  # the run folders without their checkpoints
            for job in jobs:
                for path in sorted(Path(job.run).rglob("*")):
                    if path.is_file() and path.suffix != ".pt":
                        tar.add(path)
    print(json.dumps({k: v for k, v in record.items() if k != "trainings"}), flush=True)
    if failed:
        sys.exit(1)


def check(jobs_path: Path) -> None:
    """Each planned run folder finished, with the network its comparison's plan names (once the
    comparison's ``plan.json`` exists)."""
    jobs = pickle.loads(jobs_path.read_bytes())
    problems = []
    for job in jobs:
        run = Path(job.run)
        if not (run / "result.json").is_file():
            problems.append(f"{run}: not finished")
        compare_plan = run.parent.parent / "plan.json"
        if compare_plan.is_file():
            names = {n["name"]: n["digest"] for n in json.loads(compare_plan.read_text())["networks"]}
            network = run.name.split("-seed")[0]
            if names.get(network) != job.arch.digest:
                problems.append(f"{run}: trained {job.arch.digest}, the comparison plans {names.get(network)}")
    print("\n".join(problems) or f"{len(jobs)} trainings finished, each the network its comparison plans")
    sys.exit(1 if problems else 0)


def main() -> None:
    """The command line: ``plan``, ``train`` or ``check``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("plan")
    p.add_argument("jobs", type=Path)
    p.add_argument("--also", action="append", default=[], help="NAME=OUT:ARCH, another searched network")
    t = sub.add_parser("train")
    t.add_argument("jobs", type=Path)
    t.add_argument("--processes", type=int, default=4)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--pack", type=Path)
    c = sub.add_parser("check")
    c.add_argument("jobs", type=Path)
    argv = sys.argv[1:]
    compare_argv = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: len(argv) - len(compare_argv) - ("--" in argv)])
    sys.path.insert(0, str(ROOT))
    if args.what == "plan":
        plan(args.jobs, compare_argv, args.also)
    elif args.what == "train":
        train(args.jobs, args.processes, args.threads, args.pack)
    else:
        check(args.jobs)


if __name__ == "__main__":
    main()
