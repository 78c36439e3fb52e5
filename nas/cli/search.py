"""``nas search --supernet RUN --objective mes --target 100 --device iphone12``: greedy slimming."""

from __future__ import annotations

import argparse

from nas.cli.common import (
    add_common,
    emit,
    image_size,
    nonneg_int,
    positive_float,
    positive_int,
)
from nas.search.settings import OBJECTIVES, ScreenConfig
from nas.search.strategy import strategy_names


def add_parser(sub) -> None:
    """Register the ``nas search`` subcommand on ``sub``."""
    p = sub.add_parser(
        "search",
        help="greedy slimming of a trained supernet to an MES, latency or size target",
        description="Starts from the largest sub-network and, at every step, takes the one-step "
        "shrink with the smallest accuracy drop per unit gained (EfficientFormerV2 alg. 1), "
        "until the target is met. Evaluations run in-process (--workers 0) or on Ray.",
    )
    p.add_argument("--supernet", required=True, help="run folder of `nas train-supernet`")
    p.add_argument("--objective", required=True, help=f"one of {', '.join(OBJECTIVES)}")
    p.add_argument("--target", type=positive_float, required=True, help="MES to reach, or ms / parameters to get under")
    p.add_argument("--device", help="latency table device (needed for mes and latency)")
    p.add_argument(
        "--img-size",
        type=image_size,
        help="input size MES, MACs and latency are priced at (default: the size the supernet trained at; "
        "a resumed search keeps the size it recorded)",
    )
    p.add_argument("--space", help="check that the supernet's space is this one")
    p.add_argument("--run", help="search run folder (default: runs/search-OBJECTIVE-TARGET)")
    p.add_argument("--workers", type=nonneg_int, default=0, help="Ray workers (0: evaluate in this process)")
    p.add_argument("--ray-address", help="join an existing Ray cluster instead of starting one")
    p.add_argument("--bn-calib-batches", type=positive_int, help="override the supernet recipe's")
    p.add_argument(
        "--search-images",
        type=positive_int,
        help="score every sub-network on this many images of the search split (a fixed, class-balanced, "
        "seeded subset; default: all of it)",
    )
    p.add_argument(
        "--strategy",
        default="greedy",
        choices=strategy_names(),
        help="greedy slimming (default); optuna: NSGA-II over accuracy and the objective, within the target; "
        "random: the most accurate of --trials uniform samples within the target",
    )
    p.add_argument(
        "--trials",
        type=positive_int,
        default=64,
        help="optuna: finished trials the study should hold; random: sub-networks evaluated (default 64)",
    )
    p.add_argument(
        "--storage",
        help="optuna: database URL of the study, shared by processes that add trials to it "
        "(default: sqlite:///RUN/optuna.db)",
    )
    p.add_argument("--study-name", default="nas-search", help="optuna: study name in --storage (default nas-search)")
    p.add_argument(
        "--evaluate-top",
        type=nonneg_int,
        default=ScreenConfig.keep,
        help="greedy: after the first step, evaluate only the K shrinks an accuracy predictor fitted on the "
        f"search's own evaluations ranks best (default {ScreenConfig.keep}); 0 evaluates every shrink "
        "(EfficientFormerV2 alg. 1 as written)",
    )
    p.add_argument(
        "--explore",
        type=nonneg_int,
        default=ScreenConfig.explore,
        help="greedy: also evaluate this many shrinks of the kinds evaluated least recently "
        f"(default {ScreenConfig.explore})",
    )
    p.add_argument("--resume", action="store_true", help="continue the search in --run")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas search``: slim the supernet to the target greedily (or run the optuna study) and print
    the result; return the exit code."""
    from nas.search.objective import Objective
    from nas.search.run import SearchRequest, search

    objective = Objective(args.objective, args.target)
    run_dir = args.run or f"runs/search-{objective.name}-{args.target:g}"
    result = search(
        SearchRequest(
            supernet=args.supernet,
            objective=objective,
            run=run_dir,
            device=args.device,
            img_size=args.img_size,
            seed=args.seed,
            space=args.space,
            bn_calib_batches=args.bn_calib_batches,
            search_images=args.search_images,
            strategy=args.strategy,
            screen=ScreenConfig(keep=args.evaluate_top, explore=args.explore),
            trials=args.trials,
            storage=args.storage,
            study_name=args.study_name,
            workers=args.workers,
            ray_address=args.ray_address,
            resume=args.resume,
        )
    )
    if args.strategy != "greedy":
        lines = [
            f"run          {run_dir} ({result['trials']} trials, {result['evaluations']} sub-networks evaluated "
            "here" + (f"; study in {args.storage or run_dir + '/optuna.db'})" if args.strategy == "optuna" else ")"),
        ]
        if "pareto" in result:
            lines.append(
                f"pareto       {run_dir}/pareto.yaml ({len(result['pareto'])} sub-networks), {run_dir}/pareto.png"
            )
            lines += [
                f"  top-1 {100 * r['accuracy']:.2f}%  params {r['params'] / 1e6:.3f} M"
                + (f"  latency {r['latency_ms']:.3f} ms  MES {r['mes']:.1f}" if r["latency_ms"] is not None else "")
                for r in result["pareto"]
            ]
        lines.append(
            f"arch         {run_dir}/arch.yaml  (digest {result['digest']}; the most accurate of "
            f"{result['within_target']} trials within {args.objective} {args.target:g})"
        )
        lines.append(f"top-1        {100 * result['accuracy']:.2f}% on the search split")
        lines += _cost_lines(result)
        emit(result, args.json, lines)
        return 0
    lines = [
        f"run          {run_dir} ({result['steps']} steps, {result['evaluations']} sub-networks evaluated; "
        f"greedy slimming evaluates {result['shrinks_considered']} on this path)",
        f"arch         {run_dir}/arch.yaml  (digest {result['digest']})",
        f"top-1        {100 * result['accuracy']:.2f}% on the search split "
        f"(largest: {100 * result['start_accuracy']:.2f}%)",
        *_cost_lines(result),
    ]
    emit(result, args.json, lines)
    return 0


def _cost_lines(result: dict) -> list[str]:
    """The chosen sub-network's parameters, latency (with its interval) and MES, and the latency's source."""
    lat = f"{result['latency_ms']:.3f} ms" if result["latency_ms"] is not None else "-"
    if result.get("latency_interval_ms"):
        lo, hi = result["latency_interval_ms"]
        lat += f" ({lo:.3f}–{hi:.3f})"
    mes = f"{result['mes']:.1f}" if result["mes"] is not None else "-"
    lines = [f"params       {result['params'] / 1e6:.3f} M   latency {lat}   MES {mes}"]
    if result["latency_source"]:
        lines.append(f"latency      {result['latency_source']}")
    if result.get("img_size"):
        lines.append(
            f"resolution   cost priced at {result['img_size']} px; the supernet trained and scores at "
            f"{result.get('train_img_size') or '?'} px"
        )
    return lines
