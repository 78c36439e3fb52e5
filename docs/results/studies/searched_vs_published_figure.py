"""The picture of the searched-vs-published study (``searched-vs-published.sh``, issue 59): top-1 trained from
scratch against predicted iPhone 12 latency, the published variants (EfficientFormerV2-S0, S1, S2) as one line
and each supernet seed's searched family (greedy slimming, evolution) as another, every point with its 95%
t-interval over training seeds. It reads only the committed comparisons in ``docs/results/``.

    python docs/results/studies/searched_vs_published_figure.py   # writes searched-vs-published.png beside it
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1]
PICTURE = Path(__file__).with_name("searched-vs-published.png")
# The study's comparisons: one per supernet seed, strategy and budget (the target, in ms).
STUDY = re.compile(r"published-v2-main-32px-seed(\d+)-(greedy|evolution)-([0-9.]+)$")
STRATEGIES = {"greedy": ("tab:orange", "s"), "evolution": ("tab:blue", "o")}


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
    """``searched``: per (supernet seed, strategy) the searched network of each budget; ``published``: per
    variant its row (trained the same way in every comparison; the first one found); ``tests``: per comparison
    the Welch test of searched minus its variant."""
    searched: dict[tuple[int, str], list[dict]] = {}
    published: dict[str, dict] = {}
    tests = []
    for folder in sorted(results.iterdir()):
        match = STUDY.match(folder.name)
        if not match or not (folder / "result.json").is_file():
            continue
        seed, strategy, target = int(match.group(1)), match.group(2), float(match.group(3))
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        rows = result["rows"]
        searched.setdefault((seed, strategy), []).append({**rows[0], "target": target})
        for row in rows:
            if row["kind"] == "baseline":
                published.setdefault(row["network"], row)
        for test in result["summary"].get("vs_baselines", []):
            tests.append({"comparison": folder.name, "seed": seed, "strategy": strategy, "target": target, **test})
    return {"searched": searched, "published": published, "tests": tests}


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
            fmt=marker + ("-" if seed == 0 else "--"),
            color=colour,
            alpha=1.0 if seed == 0 else 0.6,
            capsize=3,
            label=f"searched, {strategy}, supernet seed {seed}",
        )
    ax.set_xlabel("predicted iPhone 12 latency at 224 px (ms; a cost model, 80% intervals in each compare.md)")
    ax.set_ylabel("top-1 on CIFAR-10 at 32 px (%), trained from scratch,\nmean and 95% interval over seeds")
    ax.set_title("searched families against the published variants, at each variant's latency")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    """Draw the picture from the committed comparisons and print each test; 2 when there is none yet."""
    points = study_points()
    if not points["searched"]:
        print("no committed comparison of the study yet", file=sys.stderr)
        return 2
    draw(points)
    for t in points["tests"]:
        ci = "not estimable" if t["ci"] is None else f"{100 * t['ci'][0]:+.2f} to {100 * t['ci'][1]:+.2f}"
        print(f"{t['comparison']}: searched minus {t['network']} {100 * t['estimate']:+.2f} points (95% CI {ci})")
    print(f"wrote {PICTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
