"""A family from one search: ``nas search --target T1 T2 T3 ...`` returns one network per target.

EfficientFormerV2 (§4.2.3) gets its S0, S1, S2 and L from one supernet and one slimming path; this is that,
for any strategy. The targets are searched from the easiest (nearest the largest network) to the hardest,
with one evaluation cache (``evaluations.jsonl`` of the family's folder), so no sub-network is scored twice:

- **greedy** walks one path from the largest network: each target continues the previous target's state
  (:meth:`SearchStrategy.continue_from`), and the network on the path where the target is first met is
  that target's choice. The family costs what the search to its hardest target costs, plus finalists.
- **band strategies** (evolution, random, optuna) search every band; a single search's budget
  (``--set evaluations=N``) becomes ``1.5 N`` for the whole family, split evenly over the bands, and
  each band starts from what earlier bands already evaluated inside it (evolution takes the best of them
  into its first population, at no cost).

Each target gets a search folder of its own (``targets/<target>/``: its ``config.yaml``, the strategy's
files, ``arch.yaml`` and ``result.json``, as a single search writes them), finalists scored there; the
family's folder gets ``family.md``, ``family.png`` (the supernet's score against the cost of everything
evaluated, the family as a line, the space's named members marked) and ``result.json``. A member is named
``RUN@TARGET`` on the command lines of ``nas train`` and ``nas compare`` (:func:`member_arch_path`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path
from typing import Any

from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.runs.folder import SEARCH, RunFolder
from nas.runs.writers import markdown_table, pyplot, save_figure
from nas.search.finalists import finalize
from nas.search.objective import Objective, require_reachable
from nas.search.progress import watched
from nas.search.strategy import Scored, SearchContext, options_dict

log = logging.getLogger(__name__)

#: A family of k targets spends this many times a single search's evaluation budget (band strategies).
FAMILY_BUDGET = 1.5


def target_label(target: float) -> str:
    """The folder name of a target's search (``targets/1.2``): the target as ``%g`` writes it."""
    return f"{target:g}"


def ordered_targets(objective_name: str, targets: list[float] | tuple[float, ...]) -> list[float]:
    """``targets`` from the easiest to meet (nearest the largest network) to the hardest, without repeats:
    latency and parameters from the highest, MES from the lowest."""
    higher_is_better = Objective(objective_name, 1.0).higher_is_better
    unique = sorted(set(float(t) for t in targets))
    return unique if higher_is_better else unique[::-1]


def band_options(options: Any, n_targets: int) -> Any:
    """A strategy's options for one band of a family of ``n_targets``: its ``evaluations`` budget (where it
    has one) is ``FAMILY_BUDGET`` times the single search's, split evenly over the bands."""
    fields = {f.name for f in dataclasses.fields(options)}
    if n_targets < 2 or "evaluations" not in fields:
        return options
    return dataclasses.replace(options, evaluations=max(2, math.ceil(FAMILY_BUDGET * options.evaluations / n_targets)))


def search_family(request, strategy, prepared, pool, folder: RunFolder) -> dict[str, Any]:
    """Search every target of ``request.targets`` in turn (the family's folder ``folder`` is started and
    locked by the caller, ``pool`` holds the family's evaluation cache); write each target's search folder,
    then the family's ``family.md``, ``family.png`` and ``result.json``. Returns the family's result."""
    run = Path(request.run)
    objective_name = request.objective.name
    targets = ordered_targets(objective_name, request.targets)
    for target in targets:
        require_reachable(prepared.space, prepared.cost, Objective(objective_name, target), prepared.space.largest())
    clock = folder.clock(request.resume)
    members: list[dict[str, Any]] = []
    previous: Path | None = None
    for k, target in enumerate(targets):
        sub = run / "targets" / target_label(target)
        objective = Objective(objective_name, target)
        options = band_options(prepared.options, len(targets))
        config = dataclasses.replace(
            prepared.config,
            target=target,
            targets=(),
            strategy_options={**prepared.config.strategy_options, **options_dict(options)},
        )
        target_folder = RunFolder(sub, SEARCH)
        if target_folder.finished:
            result = target_folder.read_result()
        else:
            resume = target_folder.started
            log.info("family: target %d of %d, %s %g (%s)", k + 1, len(targets), objective_name, target, sub)
            with target_folder.start(config, resume):
                if not resume and previous is not None and hasattr(strategy, "continue_from"):
                    resume = bool(strategy.continue_from(previous, sub))  # greedy: one path
                context = SearchContext(
                    supernet=prepared.supernet,
                    pool=pool,
                    cost=prepared.cost,
                    objective=objective,
                    run=sub,
                    config=config,
                    clock=target_folder.clock(resume),
                    seed=request.seed,
                    resume=resume,
                    table=prepared.table,
                    known=tuple(Scored(a, acc) for a, acc in pool.evaluated()),
                    in_family=True,
                )
                label = f"search {target:g} {objective.unit} ({k + 1} of {len(targets)})"
                known = [(s.arch, s.accuracy) for s in context.known]  # the run's evaluations, read once
                with watched(pool, label, objective, prepared.cost, options, request.progress, 0, known):
                    outcome = strategy.run(context, options)
                    result = finalize(context, outcome, request.final).to_dict()
        # Each target's result counts the run's evaluations so far: what it added is the difference.
        earlier = members[-1]["evaluations"] if members else 0
        members.append(
            {
                "target": target,
                "run": str(sub),
                "new_evaluations": result["evaluations"] - earlier,
                **{k: result.get(k) for k in _MEMBER_KEYS},
            }
        )
        previous = sub
        clock.tick()
    before = pool.searched
    named = _named_members(prepared, pool)
    named_evaluations = pool.searched - before  # those the search had not scored already
    clock.tick()
    record = {
        "family": True,
        "strategy": request.strategy,
        "objective": objective_name,
        "targets": targets,
        "members": members,
        "evaluations": pool.searched,
        "budget_note": _budget_words(request.strategy, prepared.options, len(targets)),
        "named": named,
        "named_evaluations": named_evaluations,
        "latency_source": prepared.config.latency_source,
        "img_size": prepared.config.img_size,
        "train_img_size": prepared.config.train_img_size,
        "provenance": clock.summary(),
    }
    write_text_atomic(run / "family.md", family_markdown(record))
    plot_family(run / "family.png", record, [(a, acc, prepared.cost(a)) for a, acc in pool.evaluated()])
    folder.write_result(record)
    return record


_MEMBER_KEYS = (
    "digest",
    "arch",
    "accuracy",
    "search_accuracy",
    "params",
    "latency_ms",
    "mes",
    "latency_interval_ms",
    "evaluations",
    "extra_evaluations",
    "within_noise",
)


def _budget_words(strategy: str, options: Any, n_targets: int) -> str:
    fields = {f.name for f in dataclasses.fields(options)}
    if "evaluations" in fields:
        per_band = band_options(options, n_targets).evaluations
        return (
            f"{strategy}: a single search's budget of {options.evaluations} evaluations becomes {per_band} per band "
            f"({FAMILY_BUDGET:g}x in all over {n_targets} bands), each band starting from what earlier bands "
            "evaluated inside it"
        )
    return f"{strategy}: one path from the largest network, each target's choice where the path first meets it"


def _named_members(prepared, pool) -> list[dict[str, Any]]:
    """The space's named members (the published variants) with their cost and supernet score at the search's
    fidelity (scored here once, cached), to mark them beside the family."""
    named = []
    members = dict(prepared.space.members)
    if not members:
        return named
    scores = pool.score(list(members.values()))
    for (name, arch), score in zip(members.items(), scores):
        cost = prepared.cost(arch)
        named.append({"name": name, "digest": arch.digest, "accuracy": score, **cost.to_dict()})
    return named


def family_markdown(record: dict[str, Any]) -> str:
    """``family.md``: one row per target with its network and cost, then the named members."""
    lines = [
        f"# A family from one search: {record['strategy']}, {record['objective']} "
        + ", ".join(f"{t:g}" for t in record["targets"]),
        "",
        f"{record['evaluations']} sub-networks scored at the search's fidelity in all; {record['budget_note']}.",
        "",
        "Accuracy: top-1 on the supernet run's search split with the supernet's weights (BatchNorm recalibrated), "
        "not trained from scratch: at the search's fidelity, as every evaluated network and the named members "
        "were scored, and each choice's finalists' score (the whole search split, more calibration).",
        "",
    ]
    if record.get("latency_source"):
        lines += [f"Latency: {record['latency_source']}.", ""]
    cells = [
        [
            f"{m['target']:g}",
            f"`{m['run']}/arch.yaml`",
            f"{100 * m['search_accuracy']:.2f}%",
            f"{100 * m['accuracy']:.2f}%",
            f"{m['params'] / 1e6:.3f}",
            _latency_cell(m),
            "-" if m.get("mes") is None else f"{m['mes']:.1f}",
            m["new_evaluations"],
        ]
        for m in record["members"]
    ]
    lines += markdown_table(
        [
            "target",
            "network",
            "supernet top-1 (search's fidelity)",
            "finalists' score",
            "params (M)",
            "latency (ms)",
            "MES",
            "new evaluations",
        ],
        cells,
    )
    if record["named"]:
        lines += [
            "",
            "The space's named members, at the search's fidelity:",
            "",
            *markdown_table(
                ["member", "supernet top-1", "params (M)", "latency (ms)", "MES"],
                [
                    [
                        n["name"],
                        f"{100 * n['accuracy']:.2f}%",
                        f"{n['params'] / 1e6:.3f}",
                        "-" if n.get("latency_ms") is None else f"{n['latency_ms']:.3f}",
                        "-" if n.get("mes") is None else f"{n['mes']:.1f}",
                    ]
                    for n in record["named"]
                ],
            ),
        ]
    return "\n".join(lines) + "\n"


def _latency_cell(member: dict[str, Any]) -> str:
    if member.get("latency_ms") is None:
        return "-"
    interval = member.get("latency_interval_ms")
    return f"{member['latency_ms']:.3f}" + (" ({:.3f}–{:.3f})".format(*interval) if interval else "")


def plot_family(path: Path, record: dict[str, Any], evaluated: list) -> None:
    """``family.png``: the supernet score against cost (predicted latency, else parameters) of every network
    the family's search evaluated, the chosen family as a line, each target as a dashed line, and the space's
    named members marked."""
    plt = pyplot()
    with_latency = all(c.latency_ms is not None for _, _, c in evaluated) and bool(evaluated)

    def x_of(entry: dict[str, Any]) -> float:
        return entry["latency_ms"] if with_latency else entry["params"] / 1e6

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter(
        [c.latency_ms if with_latency else c.params / 1e6 for _, _, c in evaluated],
        [100 * acc for _, acc, _ in evaluated],
        s=8,
        color="tab:gray",
        alpha=0.4,
        label=f"evaluated ({len(evaluated)})",
    )
    members = sorted(record["members"], key=x_of)
    ax.plot(
        [x_of(m) for m in members],
        [100 * m["search_accuracy"] for m in members],
        "o-",
        color="tab:red",
        label="the family",
    )
    if record["objective"] in ("latency", "params"):
        for m in members:
            ax.axvline(m["target"] / (1 if with_latency else 1e6), color="tab:red", alpha=0.25, linestyle="--")
    for named in record["named"]:
        ax.scatter(x_of(named), 100 * named["accuracy"], marker="D", s=50, color="tab:green", zorder=3)
        ax.annotate(
            named["name"],
            (x_of(named), 100 * named["accuracy"]),
            xytext=(4, -10),
            textcoords="offset points",
            fontsize=7,
        )
    ax.set_xlabel("predicted latency (ms; family.md says where it comes from)" if with_latency else "parameters (M)")
    ax.set_ylabel("supernet top-1 on the search split (%, the search's fidelity)")
    ax.set_title(f"a family from one {record['strategy']} search")
    ax.margins(x=0.12)  # room for the members' names
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


def member_arch_path(spec: str) -> str:
    """A family member named ``RUN@TARGET`` (``runs/family@1.2``) as the path of its ``arch.yaml``; any other
    ``spec`` as it is. An unknown target is a :class:`NasError` that lists the family's."""
    run, sep, target = spec.rpartition("@")
    if not sep or not run or not Path(run, "targets").is_dir():
        return spec
    try:
        wanted = float(target)
    except ValueError:
        raise NasError(f"{spec}: {target!r} is not a target (a number)") from None
    found = {
        float(p.name): p for p in Path(run, "targets").iterdir() if (p / "arch.yaml").is_file() and _number(p.name)
    }
    for value, folder in found.items():
        if math.isclose(value, wanted, rel_tol=1e-9):
            return str(folder / "arch.yaml")
    raise NasError(
        f"{spec}: the family in {run} has no finished member at {target}; its members: "
        + (", ".join(f"{run}@{v:g}" for v in sorted(found)) or "none yet")
    )


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
