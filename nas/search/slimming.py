"""Greedy slimming as a search strategy (``--strategy greedy``, the default): its run-folder outputs.

The run folder gets one JSON line per step (``search.jsonl``), the state after every step
(``state.json``, for ``--resume``), the chosen ``arch.yaml``, ``result.json``, a Markdown summary, a
plot of accuracy against the objective along the trajectory and its TensorBoard curves. The slimming
itself is :func:`nas.search.greedy.greedy_slim`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nas.core.typed_yaml import write_text_atomic
from nas.runs.config import SearchRunConfig
from nas.runs.folder import RunFolder
from nas.runs.tboard import Curves
from nas.runs.writers import markdown_table, pyplot, save_figure
from nas.search.greedy import SearchState, Step, greedy_slim
from nas.search.objective import Objective
from nas.search.resolution import resolution_words
from nas.search.strategy import SearchContext, register_strategy


class GreedyStrategy:
    """``greedy``: slim the largest sub-network, one shrink at a time, until the target is met
    (EfficientFormerV2 alg. 1; EfficientFormer's importance-driven moves where the family has them)."""

    name = "greedy"

    def run(self, context: SearchContext) -> dict[str, Any]:
        """Slim to the target (continuing ``context.state``), saving the state after every step."""
        run, state, cost, config, clock = context.run, context.state, context.cost, context.config, context.clock
        pool = context.pool
        # TensorBoard: the trajectory, one point per step (0: the largest sub-network). A resumed search
        # logs its last saved point again and hides what the interrupted process logged from there on.
        resumed = any(run.glob("events.out.tfevents.*"))
        curves = Curves(run, purge_from=(len(state.steps) if state else 0) if resumed else None)

        def log_point(current: SearchState) -> None:
            step, arch, accuracy = (
                (current.steps[-1].index, current.steps[-1].arch, current.steps[-1].accuracy)
                if current.steps
                else (0, current.start, current.start_accuracy)
            )
            curves.add("search", {"accuracy": accuracy, **cost(arch).to_dict()}, step)

        if state is not None:
            log_point(state)

        def save(current: SearchState) -> None:
            write_text_atomic(run / "state.json", current.to_json())
            clock.tick()
            write_text_atomic(
                run / "search.jsonl",
                "".join(
                    json.dumps({**_log_record(s), "latency_source": config.latency_source}) + "\n"
                    for s in current.steps
                ),
            )
            log_point(current)

        try:
            state = greedy_slim(
                context.space,
                pool,
                cost,
                context.objective,
                actions=context.actions,
                state=state,
                on_step=save,
                screen=context.screen,
                resolution=pool.resolution,
            )
        finally:
            curves.close()
        final = state.current
        final.save(run / "arch.yaml")
        result = {
            "arch": final.to_dict(),
            "digest": final.digest,
            "accuracy": state.current_accuracy,
            "start_accuracy": state.start_accuracy,
            "steps": len(state.steps),
            **cost(final).to_dict(),
            "latency_interval_ms": context.latency_interval(cost(final).latency_ms),
            "latency_source": config.latency_source,
            "img_size": config.img_size,  # cost priced at
            "train_img_size": config.train_img_size,  # the supernet trained and scores at
            "evaluations": len(pool.cache.values),
            # What the full greedy search (alg. 1 as written) would have evaluated along this path.
            "shrinks_considered": 1 + sum(s.candidates for s in state.steps),
            "evaluate_top": config.evaluate_top,
            "scored_images": pool.scored_images,
            "provenance": clock.summary(),
        }
        _write_summary(run, state, cost, context.objective, config, context.table)
        _plot(run, state, cost, context.objective)
        RunFolder(run).write_result(result)
        return result


def _log_record(step: Step) -> dict:
    """``step`` for search.jsonl: without architectures (state.json keeps them)."""
    record = {k: v for k, v in step.to_dict().items() if k != "arch"}
    if step.screen:
        record["screen"] = [{k: v for k, v in r.items() if k != "arch"} for r in step.screen]
    return record


def _write_summary(
    run: Path, state: SearchState, cost, objective: Objective, config: SearchRunConfig, table=None
) -> None:
    rows = [("start (largest)", state.start, state.start_accuracy)] + [
        (s.action, s.arch, s.accuracy) for s in state.steps
    ]
    lines = [
        f"# Greedy slimming to {objective.name} {objective.target:g}",
        "",
        f"Supernet `{config.supernet}`, space `{config.space}`; accuracy: top-1 on the supernet run's "
        "search split after BatchNorm recalibration (supernet weights, not trained from scratch).",
        "",
    ]
    if config.latency_source:
        lines += [f"Latency: {config.latency_source}.", ""]
    words = resolution_words(config.img_size, config.train_img_size, "the supernet trained and scores")
    lines += [f"Resolution: {words}.", ""]
    if config.search_images:
        lines += [
            f"Scored on a fixed, class-balanced {config.search_images} images of the search split; BatchNorm "
            f"recalibrated on {config.bn_calib_batches} batches of training images.",
            "",
        ]
    if config.evaluate_top:
        evaluated = 1 + sum(s.evaluated for s in state.steps)
        considered = 1 + sum(s.candidates for s in state.steps)
        lines += [
            f"Screened: after the first step, the {config.evaluate_top} shrinks an accuracy predictor fitted on "
            f"this search's evaluations ranked best, plus {config.explore} of the least recently evaluated "
            f"kind, were evaluated: {evaluated} of the {considered} sub-networks greedy slimming would have "
            "evaluated on this path.",
            "",
        ]
    cells = []
    evaluated_cells = ["1"] + [f"{s.evaluated} / {s.candidates}" for s in state.steps]
    for i, (action, arch, acc) in enumerate(rows):
        c = cost(arch)
        cells.append(
            [
                i,
                action,
                evaluated_cells[i],
                f"{100 * acc:.2f}%",
                f"{c.params / 1e6:.3f}",
                table.format_latency(c.latency_ms, unit=False)
                if table is not None and c.latency_ms is not None
                else f"{c.latency_ms:.3f}"
                if c.latency_ms is not None
                else "-",
                f"{c.mes:.1f}" if c.mes is not None else "-",
            ]
        )
    latency_head = "latency (ms)" + (
        f" ({100 * table.interval_level:.0f}% interval)" if table is not None and table.interval_level else ""
    )
    lines += markdown_table(["step", "action", "evaluated", "top-1", "params (M)", latency_head, "MES"], cells)
    write_text_atomic(run / "summary.md", "\n".join(lines) + "\n")


def _plot(run: Path, state: SearchState, cost, objective: Objective) -> None:
    plt = pyplot()
    archs = [state.start] + [s.arch for s in state.steps]
    accs = [state.start_accuracy] + [s.accuracy for s in state.steps]
    costs = [cost(a) for a in archs]
    x = [c.latency_ms for c in costs] if costs[0].latency_ms is not None else [c.params / 1e6 for c in costs]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, [100 * a for a in accs], "o-")
    ax.annotate("largest", (x[0], 100 * accs[0]))
    ax.set_xlabel("latency (ms)" if costs[0].latency_ms is not None else "parameters (M)")
    ax.set_ylabel("top-1 on the search split (%)")
    ax.set_title(f"greedy slimming to {objective.name} {objective.target:g}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, run / "trajectory.png")


register_strategy(GreedyStrategy())
