"""The picture of the searched-vs-published study (``searched-vs-published.sh``, issue 59): top-1 trained from
scratch against predicted iPhone 12 latency, the published variants (EfficientFormerV2-S0, S1, S2) as one line
and each supernet seed's searched family (greedy slimming, evolution) as another, every point with its 95%
t-interval over training seeds. It reads only the committed comparisons in ``docs/results/``.

    python docs/results/studies/searched_vs_published_figure.py           # writes searched-vs-published.png and .md
    python docs/results/studies/searched_vs_published_figure.py --check   # exit 1 if the page is not what the files say
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1]
PICTURE = Path(__file__).with_name("searched-vs-published.png")
PAGE = Path(__file__).with_name("searched-vs-published.md")
# The study's comparisons: one per supernet seed, strategy and budget (the target, in ms), and where the margin
# asked for more training seeds, its extension to that many seeds (``-seedsN``: searched network and variant only).
# A supernet is named by its seed, and by ``-eN`` where it trained N epochs instead of 1 (``0-e2``: another arm).
STUDY = re.compile(r"published-v2-main-32px-seed(\d+(?:-e\d+)?)-(greedy|evolution)-([0-9.]+)(?:-seeds(\d+))?$")
FAMILY = re.compile(r"seed(\d+(?:-e\d+)?)-(greedy|evolution)$")
# An extension is a second look at a comparison's data: each look is judged at half the error rate (Bonferroni
# over two looks), so that choosing to look again cannot raise the chance of a false "better" above 5%.
SECOND_LOOK_LEVEL = 0.975
# The most training seeds per network an extension may ask for (a comparison needing more is left as it is).
MOST_SEEDS = 6
STRATEGIES = {"greedy": ("tab:orange", "s"), "evolution": ("tab:blue", "o")}
LINES = {"0": "-", "1": "--"}  # per supernet seed
# The study's budgets (ms) and the variant each one is the predicted latency of (searched-vs-published.sh).
BUDGETS = {1.084: "S0", 1.2: "S1", 1.591: "S2"}


def supernet_words(seed: str) -> str:
    """A supernet's name in a table: its seed, and how long it trained where that was not 1 epoch (``0-e2``)."""
    number, _, epochs = seed.partition("-e")
    return f"{number} ({epochs} epochs)" if epochs else number


def interval(seeds: list[float]) -> tuple[float, float]:
    """Half the width of the 95% t-interval of the mean of ``seeds`` (0 for one seed), in points."""
    from scipy import stats

    n = len(seeds)
    if n < 2:
        return 0.0
    mean = sum(seeds) / n
    sd = (sum((x - mean) ** 2 for x in seeds) / (n - 1)) ** 0.5
    return 100 * float(stats.t.ppf(0.975, n - 1)) * sd / n**0.5


def study_points(results: Path = RESULTS) -> dict:
    """``searched``: per (supernet seed, strategy) the searched network of each budget; ``published``: per variant
    its row (trained the same way in every comparison); both from the comparison that trained them with the most
    seeds; ``tests``: per comparison the Welch test of searched minus its variant, with both networks'
    seeds and, for an extension, the interval it is judged by (``judged_ci`` at ``judged_level``); ``scored``: per
    supernet seed, every network trained with it (by digest) as (supernet score, top-1 trained from scratch)."""
    from nas.studies.stats import welch

    searched: dict[tuple[int, str, float], dict] = {}
    published: dict[str, dict] = {}
    scored: dict[int, dict[str, tuple[float, float]]] = {}
    tests = []
    for folder in sorted(results.iterdir()):
        match = STUDY.match(folder.name)
        if not match or not (folder / "result.json").is_file():
            continue
        seed, strategy, target = match.group(1), match.group(2), float(match.group(3))
        extension = match.group(4) is not None
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        rows = {r["network"]: r for r in result["rows"]}
        row = {**rows["searched"], "target": target}
        key = (seed, strategy, target)
        searched[key] = _most_seeds(searched.get(key), row)
        for r in result["rows"]:
            if r["kind"] == "baseline":
                published[r["network"]] = _most_seeds(published.get(r["network"]), r)
            if r.get("supernet_top1") is not None:
                scored.setdefault(seed, {})[r["digest"]] = (r["supernet_top1"], r["top1"])
        for test in result["summary"].get("vs_baselines", []):
            a, b = rows["searched"]["top1_seeds"], rows[test["network"]]["top1_seeds"]
            level = SECOND_LOOK_LEVEL if extension else test["ci_level"]
            judged = welch(a, b, level)["ci"] if extension else test["ci"]
            tests.append(
                {
                    "comparison": folder.name,
                    "seed": seed,
                    "strategy": strategy,
                    "target": target,
                    **test,
                    "searched_top1": rows["searched"]["top1"],
                    "variant_top1": rows[test["network"]]["top1"],
                    "seeds": (len(a), len(b)),
                    "extension": extension,
                    "judged_ci": judged,
                    "judged_level": level,
                }
            )
    families: dict[tuple[int, str], list[dict]] = {}
    for (seed, strategy, _), row in sorted(searched.items()):
        families.setdefault((seed, strategy), []).append(row)
    return {"searched": families, "published": published, "tests": tests, "scored": scored}


def _most_seeds(known: dict | None, row: dict) -> dict:
    """Of two comparisons' rows of one network, the one trained with more seeds (``known`` on a tie)."""
    return row if known is None or len(row["top1_seeds"]) > len(known["top1_seeds"]) else known


def seeds_to_extend(folder: Path) -> int:
    """How many training seeds per network a first comparison of the study asks for before it is judged again
    (0: none). Only a positive margin whose 95% interval still reaches zero is looked at again, with the seeds
    that margin needs at the second look's level (``SECOND_LOOK_LEVEL``, given the two networks' pooled seed
    noise), when that is more than it has and at most ``MOST_SEEDS``. Decided from the first look's data, hence
    the stricter level of the second."""
    from nas.studies.stats import pooled_std, seeds_to_resolve

    result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    rows = {r["network"]: r for r in result["rows"]}
    (test,) = result["summary"]["vs_baselines"]
    if test["ci"] is None or not (test["estimate"] > 0 and test["ci"][0] <= 0):
        return 0
    a, b = rows["searched"]["top1_seeds"], rows[test["network"]]["top1_seeds"]
    needed = seeds_to_resolve(test["estimate"], pooled_std([a, b]), SECOND_LOOK_LEVEL)
    return needed if needed is not None and len(a) < needed <= MOST_SEEDS else 0


def draw(points: dict, path: Path = PICTURE) -> None:
    """Top-1 against predicted latency: the published variants' line and each seed's searched families."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    variants = sorted(points["published"].values(), key=lambda r: r["latency_ms"])
    if variants:
        ax.errorbar(
            [r["latency_ms"] for r in variants],
            [100 * r["top1"] for r in variants],
            yerr=[interval(r["top1_seeds"]) for r in variants],
            fmt="D-",
            color="tab:green",
            capsize=3,
            label="published variants (timm's EfficientFormerV2)",
        )
        for r in variants:
            ax.annotate(
                r["network"].replace("efficientformerv2_", "").upper(),
                (r["latency_ms"], 100 * r["top1"]),
                xytext=(6, -12),
                textcoords="offset points",
                color="tab:green",
            )
    for (seed, strategy), rows in sorted(points["searched"].items()):
        rows = sorted(rows, key=lambda r: r["latency_ms"])
        colour, marker = STRATEGIES[strategy]
        ax.errorbar(
            [r["latency_ms"] for r in rows],
            [100 * r["top1"] for r in rows],
            yerr=[interval(r["top1_seeds"]) for r in rows],
            fmt=marker + LINES.get(seed, ":"),  # another arm (a supernet trained longer): dotted
            color=colour,
            alpha=0.6 if seed == "1" else 1.0,
            mfc="white" if "-e" in seed else colour,
            capsize=3,
            label=f"searched, {strategy}, supernet seed {supernet_words(seed)}",
        )
    ax.set_xlabel("predicted iPhone 12 latency at 224 px (ms; a cost model, 80% intervals in each compare.md)")
    ax.set_ylabel("top-1 on CIFAR-10 at 32 px (%), trained from scratch,\nmean and 95% interval over seeds")
    ax.set_title("searched families against the published variants, at each variant's latency")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def verdict(test: dict) -> str:
    """Searched minus its variant in words: better or worse where the interval it is judged by excludes zero
    (an extension's is its second look's, ``judged_ci``)."""
    ci = test["judged_ci"]
    if ci is None:
        return "not judged (one seed)"
    words = "not told apart"
    if ci[0] > 0:
        words = "**searched better**"
    elif ci[1] < 0:
        words = "**variant better**"
    if test["extension"]:
        level = f"{100 * test['judged_level']:g}%"
        words += f" ({level} interval {100 * ci[0]:+.2f} to {100 * ci[1]:+.2f}, a second look)"
    return words


def page(points: dict, results: Path = RESULTS) -> str:
    """``searched-vs-published.md``: one row per committed comparison of the study (supernet seed, strategy,
    budget): both networks' top-1 over their seeds, the margin with its 95% Welch interval, and the verdict;
    then the family searches' evaluations and every comparison's wall time."""
    lines = [
        "# Searched families against the published variants",
        "",
        "Rendered by `docs/results/studies/searched_vs_published_figure.py` from the committed comparisons",
        "(`docs/results/published-*`); the study is `docs/results/studies/searched-vs-published.sh` (issue 59).",
        "Top-1 on CIFAR-10's 10,000 test images at 32 px after 4 epochs on 20,000 training images (`cifar10-rank`),",
        "mean over training seeds; latency predicted for an iPhone 12 at 224 px (a cost model, not a measurement).",
        "",
        f"![Searched networks and the published variants: top-1 against predicted latency]({PICTURE.name})",
        "",
        "| supernet seed | strategy | budget (ms) | searched top-1 (%) | variant | variant top-1 (%) | "
        "searched minus variant (points) | 95% CI (Welch) | seeds | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in sorted(points["tests"], key=lambda t: (t["target"], t["seed"], t["strategy"], t["seeds"])):
        ci = "-" if t["ci"] is None else f"{100 * t['ci'][0]:+.2f} to {100 * t['ci'][1]:+.2f}"
        seeds = f"{t['seeds'][0]}" if t["seeds"][0] == t["seeds"][1] else f"{t['seeds'][0]} and {t['seeds'][1]}"
        lines.append(
            f"| {supernet_words(t['seed'])} | {t['strategy']} | {t['target']:g} | {100 * t['searched_top1']:.2f} | "
            f"{t['network']} | "
            f"{100 * t['variant_top1']:.2f} | {100 * t['estimate']:+.2f} | {ci} | {seeds} | {verdict(t)} |"
        )
    lines += [
        "",
        "Seeds: a comparison whose margin is positive but whose 95% interval still reaches zero is trained again,",
        f"searched network and variant only, with the seeds per network its margin needs (at most {MOST_SEEDS}; the",
        "first 3 seeds' trainings reused): a second look at the same question, decided after the first, so it is",
        f"judged at {100 * SECOND_LOOK_LEVEL:g}% (half the error rate per look: at most 5% over both).",
    ]
    families = sorted(results.glob("family-v2-main-32px-seed*"))
    if families:
        lines += [
            "",
            "| family search | strategy | evaluations | per target (new) | wall time (s) |",
            "|---|---|---|---|---|",
        ]
        for folder in families:
            result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
            wall = json.loads((folder / "wall.json").read_text(encoding="utf-8"))
            per = ", ".join(f"{m['target']:g}: {m['new_evaluations']}" for m in result["members"])
            seconds = sum(s["seconds"] for s in wall["sessions"])
            lines.append(f"| {folder.name} | {result['strategy']} | {result['evaluations']} | {per} | {seconds:.0f} |")
        lines += supernet_view(families, points)
        lines += longer_view(results)
    lines += target_view(points, results)
    return "\n".join(lines) + "\n"


def against_target(points: dict, results: Path = RESULTS) -> list[dict]:
    """Per supernet seed and strategy, issue 59's target: at each of the three budgets the searched network's mean
    top-1 above its variant's, and the interval it is judged by above zero at 2 of the 3. Each budget is read from
    its comparison with the most seeds; ``cells`` holds per budget that test (None: still training) and whether a
    second look is still to come; ``reading`` is ``met``, ``missed`` (a committed final look rules it out) or
    ``open``."""
    judged: dict[tuple[int, str, float], dict] = {}
    for t in points["tests"]:
        key = (t["seed"], t["strategy"], t["target"])
        if key not in judged or t["seeds"][0] > judged[key]["seeds"][0]:
            judged[key] = t
    rows = []
    for seed, strategy in sorted({(s, st) for s, st, _ in judged}):
        cells = {}
        for target in BUDGETS:
            test = judged.get((seed, strategy, target))
            again = test is not None and not test["extension"] and seeds_to_extend(results / test["comparison"]) > 0
            cells[target] = {"test": test, "second_look_to_come": again}
        final = [c["test"] for c in cells.values() if c["test"] is not None and not c["second_look_to_come"]]
        above = sum(c["test"] is not None and c["test"]["estimate"] > 0 for c in cells.values())
        clear = sum(c["test"] is not None and c["test"]["judged_ci"][0] > 0 for c in cells.values())
        still = sum(c["test"] is None or c["second_look_to_come"] for c in cells.values())
        if any(t["estimate"] <= 0 for t in final) or clear + still < 2:
            reading = "missed"
        elif above == len(BUDGETS) and clear >= 2 and not still:
            reading = "met"
        else:
            reading = "open"
        rows.append(
            {"seed": seed, "strategy": strategy, "cells": cells, "above": above, "clear": clear, "reading": reading}
        )
    return rows


def target_view(points: dict, results: Path = RESULTS) -> list[str]:
    """The section that reads the study against issue 59's target, per supernet seed and strategy."""
    lines = [
        "",
        "## Against the target",
        "",
        "Issue 59's target, for each supernet seed: at each of the three budgets the searched network's mean top-1",
        "above its variant's, with the interval of the margin above zero (an extension's: its second look's) at 2 of",
        "the 3. Each strategy is read on its own: taking the better of the two after training would give every",
        "budget two chances. A margin in bold has its interval above zero.",
        "",
        "| supernet seed | strategy | "
        + " | ".join(f"{v}'s budget ({t:g} ms)" for t, v in BUDGETS.items())
        + " | mean above the variant | interval above zero | target |",
        "|---|---|" + "---|" * len(BUDGETS) + "---|---|---|",
    ]
    for row in against_target(points, results):
        cells = []
        for c in row["cells"].values():
            test = c["test"]
            if test is None:
                cells.append("training")
                continue
            margin = f"{100 * test['estimate']:+.2f}"
            margin = f"**{margin}**" if test["judged_ci"][0] > 0 else margin
            if test["extension"]:
                margin += f" ({test['seeds'][0]} seeds)"
            cells.append(margin + (", more seeds training" if c["second_look_to_come"] else ""))
        lines.append(
            f"| {supernet_words(row['seed'])} | {row['strategy']} | {' | '.join(cells)} | "
            f"{row['above']} of {len(BUDGETS)} | "
            f"{row['clear']} of {len(BUDGETS)} | {row['reading']} |"
        )
    return lines


def pick_margins(families: list[Path]) -> list[dict]:
    """Per family member: how far its pick stood above the runner-up among the finalists, in the finalists'
    final scoring (every image of the search split), against the gap that scoring's noise can tell apart (as
    the search judged ``within_noise``)."""
    from nas.search.finalists import separable_gap

    margins = []
    for folder in families:
        seed, strategy = FAMILY.search(folder.name).groups()
        for target in sorted((folder / "targets").iterdir(), key=lambda t: float(t.name)):
            result = json.loads((target / "result.json").read_text(encoding="utf-8"))
            scores = sorted((f["final_accuracy"] for f in result["finalists"]), reverse=True)
            told = separable_gap(result["final_noise"]["sd"], result["final_noise"]["draws"])
            margins.append(
                {
                    "seed": seed,
                    "strategy": strategy,
                    "target": float(target.name),
                    "finalists": len(scores),
                    "gap": scores[0] - scores[1] if len(scores) > 1 else None,
                    "told_apart_above": told,
                    "within_noise": result["within_noise"],
                }
            )
    return margins


def pooled_ranking(points: dict) -> dict[int, dict]:
    """Per supernet seed: Kendall's tau between the supernet's score and the top-1 trained from scratch of every
    distinct network the study's comparisons trained with that supernet (searched, variants, random)."""
    from scipy import stats

    pooled = {}
    for seed, by_digest in sorted(points["scored"].items()):
        supernet, trained = zip(*by_digest.values(), strict=True)
        tau = stats.kendalltau(supernet, trained)
        pooled[seed] = {"networks": len(by_digest), "tau": float(tau.statistic), "p": float(tau.pvalue)}
    return pooled


def supernet_view(families: list[Path], points: dict) -> list[str]:
    """The section that says what the supernet could tell apart: each pick's margin over the runner-up among
    the finalists against the noise of that scoring, and the pooled ranking of every network trained."""
    lines = [
        "",
        "## What the supernet could tell apart",
        "",
        "Each target's pick against the runner-up among its finalists, both scored with the supernet's weights on",
        "every image of the search split (`final_accuracy`), and the gap that this scoring's noise can tell apart",
        "(twice the standard deviation of a difference of two final scores, as `nas.search.finalists` judges it):",
        "",
        "| supernet seed | strategy | target (ms) | finalists | pick minus runner-up (points) | told apart above "
        "(points) | within noise |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in pick_margins(families):
        gap = "-" if m["gap"] is None else f"{100 * m['gap']:.2f}"
        told = f"{100 * m['told_apart_above']:.2f}"
        lines.append(
            f"| {supernet_words(m['seed'])} | {m['strategy']} | {m['target']:g} | {m['finalists']} | {gap} | {told} | "
            f"{'yes' if m['within_noise'] else 'no'} |"
        )
    lines += [
        "",
        "Kendall's tau between the supernet's score and the top-1 trained from scratch, over every distinct network",
        "the committed comparisons trained with each supernet (searched networks, variants and random networks of",
        "all three budgets together; a band alone is narrower and ranks worse):",
        "",
        "| supernet seed | networks | Kendall's tau | p |",
        "|---|---|---|---|",
    ]
    for seed, r in pooled_ranking(points).items():
        lines.append(f"| {supernet_words(seed)} | {r['networks']} | {r['tau']:.2f} | {r['p']:.3f} |")
    return lines


def longer_rankings(results: Path = RESULTS) -> list[dict]:
    """The ranking studies of a supernet trained longer (``longer-supernet.sh``): per study the supernet, how many of
    the networks its seed's comparisons trained it ranked, its tau and the recorded (1-epoch) supernet's, and the
    paired difference of the two with its interval."""
    studies = []
    for folder in sorted(results.glob("rank-check-v2-main-32px-seed*-e*")):
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        now, then = result["rankings"]["supernet"], result["rankings"]["recorded supernet"]
        seed = re.search(r"seed(\d+-e\d+)$", folder.name).group(1)
        studies.append(
            {
                "study": folder.name,
                "seed": seed,
                "networks": result["n"],
                "tau": now["kendall_tau"],
                "tau_ci": now["kendall_tau_ci"],
                "recorded_tau": then["kendall_tau"],
                "difference": then["supernet_minus_tau"]["difference"],
                "difference_ci": then["supernet_minus_tau"]["ci"],
            }
        )
    return studies


def longer_view(results: Path = RESULTS) -> list[str]:
    """Where a supernet was trained longer: its ranking of the same networks against the 1-epoch one's."""
    studies = longer_rankings(results)
    if not studies:
        return []
    lines = [
        "",
        "Trained longer (`longer-supernet.sh`): the same supernet (recipe, data, seed) trained for more epochs, its",
        "ranking of the networks its seed's comparisons trained against the 1-epoch supernet's recorded scores of",
        "the same networks (`nas rank-check --scratch-from` the comparisons: nothing trained again), with the",
        "paired interval of the difference:",
        "",
        "| supernet seed | networks | Kendall's tau (95% CI) | 1 epoch's tau | longer minus 1 epoch (paired 95% CI) |",
        "|---|---|---|---|---|",
    ]
    for r in studies:
        ci, dci = r["tau_ci"], r["difference_ci"]
        tau = f"{r['tau']:.2f}" + ("" if ci is None else f" ({ci[0]:+.2f} to {ci[1]:+.2f})")
        diff = f"{r['difference']:+.2f}" + ("" if dci is None else f" ({dci[0]:+.2f} to {dci[1]:+.2f})")
        lines.append(
            f"| [{supernet_words(r['seed'])}](../{r['study']}/rank.md) | {r['networks']} | {tau} | "
            f"{r['recorded_tau']:.2f} | {diff} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Draw the picture and write the page from the committed comparisons (``--check``: only compare the page);
    2 when there is no comparison yet."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed page differs")
    parser.add_argument(
        "--seeds-to-extend", metavar="COMPARISON", help="print how many seeds the comparison asks for (0: none)"
    )
    args = parser.parse_args(argv)
    if args.seeds_to_extend:
        print(seeds_to_extend(Path(args.seeds_to_extend)))
        return 0
    points = study_points()
    if not points["searched"]:
        print("no committed comparison of the study yet", file=sys.stderr)
        return 2
    text = page(points)
    if args.check:
        return 0 if PAGE.is_file() and PAGE.read_text(encoding="utf-8") == text else 1
    draw(points)
    PAGE.write_text(text, encoding="utf-8")
    for t in points["tests"]:
        ci = "not estimable" if t["ci"] is None else f"{100 * t['ci'][0]:+.2f} to {100 * t['ci'][1]:+.2f}"
        print(f"{t['comparison']}: searched minus {t['network']} {100 * t['estimate']:+.2f} points (95% CI {ci})")
    print(f"wrote {PICTURE} and {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
