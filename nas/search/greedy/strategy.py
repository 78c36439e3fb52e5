"""Greedy slimming as a search strategy (``--strategy greedy``): its options and run-folder outputs.

The run folder gets one JSON line per step (``search.jsonl``), the state after every step
(``state.json``, for ``--resume``), the chosen ``arch.yaml``, ``result.json``, a Markdown summary, a
plot of accuracy against the objective along the trajectory and its TensorBoard curves. The slimming
itself is :func:`nas.search.greedy.greedy_slim`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.families import get_family
from nas.core.typed_yaml import setting
from nas.runs.config import SearchRunConfig
from nas.runs.tboard import Curves
from nas.runs.writers import markdown_table, pyplot, save_figure
from nas.search.command_choices import ScreenConfig
from nas.search.greedy.algorithm import SearchState, Step, greedy_slim
from nas.search.input_size import input_size_words
from nas.search.objective import Objective, SearchProblem
from nas.search.strategy import Scored, SearchContext, StrategyOutcome, register_strategy
from nas.search.supernet_run import SupernetRun


@dataclass(frozen=True)
class GreedyOptions:
    """``--strategy greedy``'s options (``--set key=value``)."""

    evaluate_top: int = setting(
        ScreenConfig.keep,
        low=0,
        help="after the first step, evaluate only the K shrinks an accuracy predictor fitted on the search's own "
        "evaluations ranks best; 0 evaluates every shrink (EfficientFormerV2 alg. 1 as written)",
    )
    explore: int = setting(
        ScreenConfig.explore, low=0, help="also evaluate this many shrinks of the kinds evaluated least recently"
    )

    @property
    def screen(self) -> ScreenConfig:
        return ScreenConfig(keep=self.evaluate_top, explore=self.explore)


class GreedyStrategy:
    """``greedy``: slim the largest sub-network, one shrink at a time, until the target is met
    (EfficientFormerV2 alg. 1; EfficientFormer's importance-driven moves where the family has them)."""

    name = "greedy"
    options = GreedyOptions

    def check(self, supernet: SupernetRun, objective: Objective, cost, options: GreedyOptions) -> None:
        """Refuse a checkpoint whose family moves cannot be read, before the run folder exists."""
        family_actions(supernet, objective)

    def continue_from(self, previous: Path, run: Path) -> bool:
        """A family's next (harder) target continues the previous target's path (EfficientFormerV2 §4.2.3:
        one slimming path, a network recorded as each target is met): its state and log are copied into
        ``run``, which then resumes from them. Returns whether there was a state to continue."""
        state = previous / "state.json"
        if not state.is_file():
            return False
        write_text_atomic(run / "state.json", state.read_text(encoding="utf-8"))
        if (previous / "search.jsonl").is_file():
            write_text_atomic(run / "search.jsonl", (previous / "search.jsonl").read_text(encoding="utf-8"))
        return True

    def run(self, context: SearchContext, options: GreedyOptions) -> StrategyOutcome:
        """Slim to the target (continuing the saved state on resume), saving the state after every step."""
        run, cost, config = context.run, context.cost, context.config
        pool, objective = context.pool, context.objective
        state = context.saved_state("state", SearchState.from_state_dict, "search state")
        actions, actions_note = family_actions(context.supernet, objective)
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

        def write_log(current: SearchState) -> None:
            write_text_atomic(
                run / "search.jsonl",
                "".join(
                    json.dumps({**_log_record(s), "latency_source": config.latency_source}) + "\n"
                    for s in current.steps
                ),
            )

        if state is not None:
            # A kill between state.json and search.jsonl leaves the log a step short; the state is the truth.
            write_log(state)
            log_point(state)

        def save(current: SearchState) -> None:
            context.save_state("state", current.state_dict())
            write_log(current)
            log_point(current)

        try:
            state = greedy_slim(
                SearchProblem(context.space, pool, cost, objective),
                actions=actions,
                state=state,
                on_step=save,
                screen=options.screen,
                accuracy_step=pool.accuracy_step,
            )
        finally:
            curves.close()
        _write_summary(run, state, cost, objective, config, options, context.table)
        _plot(run, state, cost, objective)
        considered = 1 + sum(s.candidates for s in state.steps)
        # Its candidates: every network it evaluated that meets the target (the last step's shrinks).
        candidates = tuple(Scored(arch, acc) for arch, acc in pool.evaluated() if objective.met(cost(arch)))
        return StrategyOutcome(
            chosen=Scored(state.current, state.current_accuracy),
            candidates=candidates,
            lines=(
                f"greedy       {len(state.steps)} steps from the largest (top-1 {100 * state.start_accuracy:.2f}%) "
                f"to {100 * state.current_accuracy:.2f}%; greedy slimming as written evaluates {considered} "
                "sub-networks on this path",
            ),
            path=(state.start, *(step.arch for step in state.steps)),
            record={
                "start_accuracy": state.start_accuracy,
                "steps": len(state.steps),
                # What the full greedy search (alg. 1 as written) would have evaluated along this path.
                "shrinks_considered": considered,
                "evaluate_top": options.evaluate_top,
                "actions": actions_note,
            },
        )


def family_actions(supernet: SupernetRun, objective: Objective):
    """The family's own shrink moves and a note on them (EfficientFormer alg. 1: by the importance of
    its choices), or (None, None): the space's."""
    space = supernet.space
    try:
        chosen = get_family(space.family).greedy_actions(space, supernet.state, objective.name)
    except NasError as exc:
        raise NasError(f"{supernet.checkpoint}: {exc}") from None
    return chosen if chosen is not None else (None, None)


def _log_record(step: Step) -> dict:
    """``step`` for search.jsonl: without architectures (state.json keeps them)."""
    record = {k: v for k, v in step.to_dict().items() if k != "arch"}
    if step.screen:
        record["screen"] = [{k: v for k, v in r.items() if k != "arch"} for r in step.screen]
    return record


def _write_summary(
    run: Path,
    state: SearchState,
    cost,
    objective: Objective,
    config: SearchRunConfig,
    options: GreedyOptions,
    table=None,
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
    words = input_size_words(config.img_size, config.train_img_size, "the supernet trained and scores")
    lines += [f"Resolution: {words}.", ""]
    if config.search_images:
        lines += [
            f"Scored on a fixed, class-balanced {config.search_images} images of the search split; BatchNorm "
            f"recalibrated on {config.bn_calib_batches} batches of training images.",
            "",
        ]
    if options.evaluate_top:
        evaluated = 1 + sum(s.evaluated for s in state.steps)
        considered = 1 + sum(s.candidates for s in state.steps)
        lines += [
            f"Screened: after the first step, the {options.evaluate_top} shrinks an accuracy predictor fitted on "
            f"this search's evaluations ranked best, plus {options.explore} of the least recently evaluated "
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
