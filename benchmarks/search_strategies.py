"""Search strategies at the same number of supernet evaluations, judged on images none of them chose on.

    python benchmarks/search_strategies.py --supernet RUN --objective params --target 5e6 \
        [--device iphone12] --budgets 100 300 --seeds 5 [--search-images 1000 --bn-calib-batches 4] \
        [--workers 0] --out runs/bench-strategies [--report docs/results/search-strategies.txt]

One supernet, one band (``--tolerance`` of the target), every strategy of ``nas search``: greedy
slimming as written (every shrink evaluated) and fast (screened), constrained evolution with and
without its accuracy predictor, random search in the band and optuna's NSGA-II, the last four at
each budget of supernet evaluations and each seed. Greedy slimming is deterministic: it runs once
and its evaluations are what its path needs. Every search ends the same way (noise measured, its
finalists scored again; :mod:`nas.search.finalists`).

The best of many noisy scores flatters whichever strategy drew the most, so each chosen network is
judged by its score on the validation split (images no strategy chose on; BatchNorm recalibrated
on ``--heldout-calib-batches``), and so is the strategy's own choice before the finalists' step.
Prints one line per search and, per budget, the means and how often each strategy's choice is above
random search's (same seed) and above greedy slimming's; wall times are each run's own
(``result.json``'s provenance). Every search is a run folder under ``--out``: rerun the command to
resume (finished searches are read back, an interrupted one continues with --resume).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

from nas import ArchConfig
from nas.runs.folder import SEARCH, RunFolder
from nas.runs.provenance import code_version
from nas.search.engine import SearchRequest, search
from nas.search.evaluator import DiskCache, Fidelity
from nas.search.finalists import FinalScoring
from nas.search.objective import Objective
from nas.search.pool import EvaluatorPool
from nas.search.supernet_run import SupernetRun

#: label -> (strategy, options, whether it takes the budget and the seed)
STRATEGIES = {
    "evolution": ("evolution", {"predictor": False}, True),
    "evolution+predictor": ("evolution", {"predictor": True}, True),
    "random": ("random", {}, True),
    "optuna": ("optuna", {}, True),
    "greedy-fast": ("greedy", {}, False),
    "greedy-full": ("greedy", {"evaluate_top": 0}, False),
}


def _name(label: str, budget: int | None, seed: int | None) -> str:
    return label if budget is None else f"{label}-b{budget}-s{seed}"


def run_search(args, label: str, budget: int | None, seed: int | None) -> dict:
    """The result of one search, run (or resumed, or read back when finished)."""
    strategy, options, _ = STRATEGIES[label]
    options = {**options, **({"evaluations": budget} if budget is not None else {})}
    if strategy in ("evolution", "random"):
        options["tolerance"] = args.tolerance
    name = _name(label, budget, seed)
    folder = RunFolder(args.out / name, SEARCH)
    if folder.finished:
        return folder.read_result()
    result = search(
        SearchRequest(
            supernet=args.supernet,
            objective=Objective(args.objective, args.target),
            run=args.out / name,
            device=args.device,
            seed=seed or 0,
            bn_calib_batches=args.bn_calib_batches,
            search_images=args.search_images,
            strategy=strategy,
            options=options,
            final=FinalScoring(finalists=args.finalists),
            workers=args.workers,
            resume=folder.started,
        )
    )
    return result.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--supernet", required=True, help="run folder of `nas train-supernet`")
    parser.add_argument("--objective", required=True, choices=("params", "latency", "mes"))
    parser.add_argument("--target", type=float, required=True)
    parser.add_argument("--device", help="latency table device (latency and mes)")
    parser.add_argument("--tolerance", type=float, default=0.05, help="the band of evolution and random search")
    parser.add_argument("--budgets", type=int, nargs="+", default=[100, 300])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    parser.add_argument("--search-images", type=int, help="images of the search split each search scores")
    parser.add_argument("--bn-calib-batches", type=int, help="calibration batches of a search score")
    parser.add_argument("--finalists", type=int, default=4)
    parser.add_argument("--heldout-images", type=int, help="validation images a choice is judged on (default: all)")
    parser.add_argument("--heldout-calib-batches", type=int, help="default: twice the search's")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="folder of the search runs (resumable)")
    parser.add_argument("--report", type=Path, help="also write what is printed to this file")
    parser.add_argument(
        "--stop-after", type=float, help="start no new search after this many seconds (report what has run)"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    spec = SupernetRun.read(args.supernet).eval_spec(args.bn_calib_batches, args.search_images)
    heldout = Fidelity(args.heldout_calib_batches or 2 * spec.calib_batches, args.heldout_images, split="val")
    judge = EvaluatorPool(spec, cache=DiskCache(args.out / "heldout.jsonl", spec.context()))
    version = code_version()
    began = time.perf_counter()
    command = " ".join(["python benchmarks/search_strategies.py", *(a for a in sys.argv[1:] if a)])
    say(
        f"# {command}: search strategies at equal supernet evaluations, {args.objective} {args.target:g}"
        + (f" on {args.device}" if args.device else "")
        + f", band {100 * args.tolerance:g}%; supernet {args.supernet}; search score: "
        f"{spec.search_images or 'all'} images of the search split, {spec.calib_batches} calibration batches"
    )
    say(f"# judged on: {heldout.describe()} ({judge.images(heldout)} images no strategy chose on)")
    say(
        f"# commit {version['commit'][:12]}{' (uncommitted changes)' if version['dirty'] else ''}, "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
        f"workers {args.workers}"
    )
    say(
        f"{'strategy':<20} {'budget':>6} {'seed':>4} {'evals':>6} {'extra':>5} {'search':>7} {'final':>7} "
        f"{'held-out':>8} {'own':>7} {'noise':>6} {args.objective:>10} {'wall s':>7}"
    )
    rows = []
    # The order a session's share runs in: the first budget over every seed, greedy's fast search, the
    # other budgets, greedy's full search last (on the main space the longest of all).
    plan = []
    for i, budget in enumerate(args.budgets):
        plan += [
            (label, budget, seed) for seed in range(args.seeds) for label in args.strategies if STRATEGIES[label][2]
        ]
        plan += [("greedy-fast", None, None)] if i == 0 and "greedy-fast" in args.strategies else []
    plan += [("greedy-full", None, None)] if "greedy-full" in args.strategies else []
    skipped = 0
    for label, budget, seed in plan:
        if (
            args.stop_after
            and time.perf_counter() - began > args.stop_after
            and not RunFolder(args.out / _name(label, budget, seed), SEARCH).finished
        ):
            skipped += 1
            continue
        result = run_search(args, label, budget, seed)
        chosen = ArchConfig.from_dict(result["arch"])
        own = ArchConfig.from_dict(result["strategy_choice_arch"])
        held, held_own = judge.score([chosen, own], heldout)
        value = {"params": result["params"], "latency": result["latency_ms"], "mes": result["mes"]}
        row = {
            "strategy": label,
            "budget": budget,
            "seed": seed,
            "evaluations": result["evaluations"],
            "extra_evaluations": result["extra_evaluations"],
            "search_accuracy": result["search_accuracy"],
            "final_accuracy": result["accuracy"],
            "heldout": held,
            "heldout_own_choice": held_own,
            "noise_sd": result["score_noise"]["sd"],
            "value": value[args.objective],
            "wall_seconds": result["provenance"]["wall_seconds"],
            "commit": result["provenance"].get("commit"),  # the code that ran this search
            "digest": chosen.digest,
        }
        rows.append(row)
        noise = f"{100 * row['noise_sd']:.2f}" if row["noise_sd"] is not None else "-"
        say(
            f"{label:<20} {budget or '-':>6} {'-' if seed is None else seed:>4} "
            f"{row['evaluations']:>6} {row['extra_evaluations']:>5} {100 * row['search_accuracy']:>6.2f}% "
            f"{100 * row['final_accuracy']:>6.2f}% {100 * held:>7.2f}% {100 * held_own:>6.2f}% {noise:>6} "
            f"{row['value']:>10.4g} {row['wall_seconds']:>7.0f}"
        )
    if skipped:
        say(f"# {skipped} searches not started (--stop-after {args.stop_after:g} s): run again to continue")
    judge.close()
    say()
    say("# per budget: mean held-out top-1 over seeds (sd), above random search's choice (same seed), mean wall")
    fixed = {r["strategy"]: r for r in rows if r["budget"] is None}
    for budget in args.budgets:
        at = [r for r in rows if r["budget"] == budget]
        random_by_seed = {r["seed"]: r["heldout"] for r in at if r["strategy"] == "random"}
        for label in args.strategies:
            mine = [r for r in at if r["strategy"] == label] or ([fixed[label]] if label in fixed else [])
            if not mine:
                continue
            held = [r["heldout"] for r in mine]
            sd = (
                f" (sd {100 * statistics.stdev(held):.2f})"
                if len(held) > 1
                else (" (deterministic)" if label in fixed else " (1 seed)")
            )
            above = ""
            if random_by_seed and label != "random":
                pairs = (
                    [(fixed[label]["heldout"], theirs) for theirs in random_by_seed.values()]
                    if label in fixed
                    else [(r["heldout"], random_by_seed[r["seed"]]) for r in mine if r["seed"] in random_by_seed]
                )
                above = f"; above random in {sum(a > b for a, b in pairs)} of {len(pairs)} seeds"
            versus = ""
            for reference in ("greedy-full", "greedy-fast"):
                if reference in fixed and label != reference:
                    versus += f"; {100 * (statistics.mean(held) - fixed[reference]['heldout']):+.2f} vs {reference}"
            own = statistics.mean(r["heldout_own_choice"] for r in mine)
            say(
                f"budget {budget:>4}  {label:<20} held-out {100 * statistics.mean(held):6.2f}%{sd}{above}{versus}; "
                f"own choice {100 * own:.2f}%; evaluations {statistics.mean(r['evaluations'] for r in mine):.0f}, "
                f"wall {statistics.mean(r['wall_seconds'] for r in mine):.0f} s"
            )
    say(f"# {sum(r['wall_seconds'] for r in rows):.0f} s in all (the searches' own wall times)")
    say(f"# {time.perf_counter() - began:.0f} s this session")
    record = {"rows": rows, "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    (args.out / "benchmark.json").write_text(json.dumps({**record, "commit": version["commit"]}, indent=1))
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
