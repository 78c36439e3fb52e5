"""Does the fast greedy search end where the full greedy search (EfficientFormerV2 alg. 1 as
written: every shrink evaluated on the whole search split) ends, and what does it save?

    python benchmarks/fast_search.py --supernet RUN_A --targets 400 500 650 \
        --supernet RUN_B --targets 650 800 950 [--device iphone12] [--workers 2] \
        [--fast-search-images 1000 --fast-bn-calib-batches 2]

The fast search is screened (``nas search``'s default ``--evaluate-top``/``--explore``) and may
score a class-balanced subset of the search split with fewer BatchNorm calibration images; the
full search scores every shrink on the whole split with the supernet recipe's calibration. The
fast search's architectures are scored again the full search's way, so both accuracies compared
are measured alike.

For each supernet run both searches slim the largest sub-network to the highest target, each on a
fresh pool of Ray workers (no shared cache), timing every step. Both are deterministic and decide
each step from their own history only, so the search to a lower target is the prefix of that run
up to the first step that meets it: every target is read off the one run. Prints, per supernet and
target, the evaluations and wall time of both, their ratio, and whether the fast search ends on the
same architecture or one within 0.3 points of supernet accuracy that meets the target (issue 16).
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

from nas.latency import LatencyTable
from nas.runs.provenance import code_version
from nas.search.evaluator import SubnetEvaluator
from nas.search.greedy.algorithm import greedy_slim
from nas.search.greedy.screen import ScreenConfig
from nas.search.objective import Objective, SearchProblem, cost_function
from nas.search.pool import EvaluatorPool
from nas.search.supernet_run import SupernetRun


def timed_search(spec, space, cost, objective, screen, workers):
    pool = EvaluatorPool(spec, workers)
    marks = []  # (wall seconds, evaluations) after the start and after every step
    try:
        start = time.perf_counter()
        state = greedy_slim(
            SearchProblem(space, pool, cost, objective),
            screen=screen,
            accuracy_step=pool.accuracy_step,
            on_step=lambda s: marks.append((time.perf_counter() - start, pool.evaluations)),
        )
    finally:
        pool.close()
    return state, marks


def prefix(state, marks, cost, objective):
    """(arch, accuracy, evaluations, seconds) of the first step that meets ``objective``."""
    points = [(state.start, state.start_accuracy)] + [(s.arch, s.accuracy) for s in state.steps]
    for (arch, accuracy), (seconds, evaluations) in zip(points, marks):
        if objective.met(cost(arch)):
            return arch, accuracy, evaluations, seconds
    raise RuntimeError("the run did not reach the target")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--supernet", action="append", required=True, help="supernet run (repeat for several)")
    parser.add_argument(
        "--targets", action="append", nargs="+", type=float, required=True, help="MES targets, one list per supernet"
    )
    parser.add_argument("--device", default="iphone12")
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fast-search-images", type=int, help="fast search: score this many search images")
    parser.add_argument("--fast-bn-calib-batches", type=int, help="fast search: BatchNorm calibration batches")
    parser.add_argument("--evaluate-top", type=int, default=ScreenConfig.keep)
    parser.add_argument("--explore", type=int, default=ScreenConfig.explore)
    args = parser.parse_args()
    if len(args.targets) != len(args.supernet):
        parser.error("give one --targets list per --supernet")

    fast_screen = ScreenConfig(keep=args.evaluate_top, explore=args.explore)
    version = code_version()
    print(
        f"# fast (--evaluate-top {fast_screen.keep} --explore {fast_screen.explore}) against full greedy search; "
        f"MES on {args.device} at {args.img_size} px; {args.workers} Ray workers; the fast search scores "
        f"{args.fast_search_images or 'all'} images of the search split after "
        f"{args.fast_bn_calib_batches or 'the recipe' + chr(39) + 's'} BatchNorm calibration batches; top-1: supernet "
        "weights on the whole search split, the recipe's calibration (the fast result scored again)"
    )
    print(
        f"# commit {version['commit'][:12]}{' (uncommitted changes)' if version['dirty'] else ''}, "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs"
    )
    header = (
        f"{'supernet':<28} {'target':>6}  {'full evals':>10} {'full s':>7}  {'fast evals':>10} {'fast s':>7}  "
        f"{'evals':>5} {'time':>5}  {'full top-1':>10} {'fast top-1':>10}  verdict"
    )
    print(header)
    failures, began = 0, time.perf_counter()
    for run, targets in zip(args.supernet, args.targets):
        supernet = SupernetRun.read(run)
        spec = supernet.eval_spec()
        fast_spec = supernet.eval_spec(args.fast_bn_calib_batches, args.fast_search_images)
        space = supernet.space
        table = LatencyTable.load(args.device, space, args.img_size)
        cost = cost_function(table, args.img_size, supernet.num_classes)
        highest = Objective("mes", max(targets))
        full = timed_search(spec, space, cost, highest, ScreenConfig(keep=0), args.workers)
        fast = timed_search(fast_spec, space, cost, highest, fast_screen, args.workers)
        rescore = SubnetEvaluator(spec) if fast_spec != spec else None
        for target in sorted(targets):
            objective = Objective("mes", target)
            f_arch, f_acc, f_evals, f_s = prefix(*full, cost, objective)
            q_arch, q_acc, q_evals, q_s = prefix(*fast, cost, objective)
            if rescore is not None:
                q_acc = f_acc if q_arch == f_arch else rescore.accuracy(q_arch)
            if q_arch == f_arch:
                verdict = "same architecture"
            elif f_acc - q_acc <= 0.003:
                verdict = f"within 0.3 points ({100 * (q_acc - f_acc):+.2f}), MES {cost(q_arch).mes:.1f}"
            else:
                verdict = f"FAIL: {100 * (q_acc - f_acc):+.2f} points"
                failures += 1
            print(
                f"{run[-28:]:<28} {target:>6g}  {f_evals:>10} {f_s:>7.0f}  {q_evals:>10} {q_s:>7.0f}  "
                f"{q_evals / f_evals:>5.2f} {q_s / f_s:>5.2f}  {100 * f_acc:>9.2f}% {100 * q_acc:>9.2f}%  {verdict}",
                flush=True,
            )
    print(f"# {time.perf_counter() - began:.0f} s in all")
    print(f"# {failures} target(s) where the fast search ends more than 0.3 points below the full search")


if __name__ == "__main__":
    main()
