"""The picture of the search-vs-random study (``search-vs-random.sh``): per supernet seed, every network's top-1
minus the random networks' mean, the searched networks with their 95% intervals, and the margins' mean over the
supernet seeds. It reads only the committed comparisons in ``docs/results/``.

    python docs/results/studies/search_vs_random_figure.py   # writes docs/results/studies/search-vs-random.png
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1]
PICTURE = Path(__file__).with_name("search-vs-random.png")
# The study's comparisons: evolution's (fresh random networks) and greedy's (the same ones), one pair a supernet seed.
STUDY = re.compile(r"compare-v2-main-32px-seed(\d+)-lat224(-greedy)?$")
STRATEGIES = {"evolution": ("tab:blue", "o"), "greedy": ("tab:orange", "s")}


def study_rows(results: Path = RESULTS) -> list[dict]:
    """One row per supernet seed: the random networks' top-1 minus their mean, and for each strategy its margin
    over that mean with the interval, and whether it beats every random network."""
    seeds: dict[int, dict] = {}
    for folder in sorted(results.iterdir()):
        match = STUDY.match(folder.name)
        if not match or not (folder / "result.json").is_file():
            continue
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        s, strategy = result["summary"], "greedy" if match.group(2) else "evolution"
        row = seeds.setdefault(int(match.group(1)), {"seed": int(match.group(1)), "strategies": {}})
        row["randoms"] = [r["top1"] - s["random_top1_mean"] for r in result["rows"] if r["kind"] == "random"]
        if strategy == "evolution":  # where its networks trained (greedy's trained beside them)
            row["trained_on"] = trained_on(result)
        row["strategies"][strategy] = {
            "comparison": folder.name,
            "margin": s["margin_over_random_mean"],
            "ci": s["margin_over_random_mean_ci"],
            "beats_every_random": s["beats_every_random"],
        }
    return [seeds[k] for k in sorted(seeds)]


def trained_on(result: dict) -> str:
    """Where a comparison's networks trained, briefly: the GPU its sources name, else the CPU cores its
    provenance counted (comparisons from before the sources named the hardware trained on the CPU)."""
    hardware = result["sources"].get("hardware", "")
    gpu = re.search(r"trained on (?:NVIDIA )?(.+?) \(CUDA\)", hardware)
    return gpu.group(1) if gpu else f"{result['provenance']['cpus']} CPU cores"


def pooled(rows: list[dict]) -> dict[str, dict]:
    """Each strategy's margin over the random mean, averaged over the supernet seeds that have it, with the
    t-interval over them (``nas.studies.stats.over_comparisons``: none from one seed)."""
    from nas.studies.stats import over_comparisons

    out = {}
    for strategy in STRATEGIES:
        margins = [r["strategies"][strategy]["margin"] for r in rows if strategy in r["strategies"]]
        if margins:
            out[strategy] = {**over_comparisons(margins), "n": len(margins)}
    return out


def draw(rows: list[dict], path: Path = PICTURE) -> dict[str, dict]:
    """Write the picture to ``path``; returns the pooled margins it shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    over = pooled(rows)
    fig, ax = plt.subplots(figsize=(9, 1.8 + 0.75 * (len(rows) + 1)))
    labels = []

    def interval(y: float, k: int, estimate: float, ci, **style) -> None:  # strategy k's margin, 95% interval
        colour, marker = list(STRATEGIES.values())[k]
        low, high = ci or (estimate, estimate)
        xerr = [[100 * (estimate - low)], [100 * (high - estimate)]]
        ax.errorbar(
            100 * estimate, y + 0.15 - 0.3 * k, xerr=xerr, fmt=marker, color=colour, capsize=3, zorder=3, **style
        )

    for y, row in enumerate(rows):
        ax.scatter([100 * d for d in row["randoms"]], [y] * len(row["randoms"]), color="grey", s=22, zorder=2)
        for k, strategy in enumerate(STRATEGIES):
            if strategy in row["strategies"]:
                interval(y, k, row["strategies"][strategy]["margin"], row["strategies"][strategy]["ci"])
        beats = [s for s, m in row["strategies"].items() if m["beats_every_random"]]
        labels.append(
            f"supernet seed {row['seed']} ({row.get('trained_on', '?')})\n"
            f"beats every random: {', '.join(beats) or 'neither'}"
        )
    for k, strategy in enumerate(STRATEGIES):
        if strategy in over:
            interval(len(rows), k, over[strategy]["estimate"], over[strategy]["ci"], mfc="white")
    labels.append(f"mean over {max((p['n'] for p in over.values()), default=0)} seeds\n(t-interval over them)")
    for strategy, (colour, marker) in STRATEGIES.items():
        ax.errorbar([], [], fmt=marker, color=colour, label=f"{strategy}'s network (95% interval)")
    ax.scatter([], [], color="grey", s=22, label="random networks (mean of 3 seeds)")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("top-1 minus the random networks' mean (points)")
    ax.set_title(
        "Searched vs 5 random networks of the same predicted latency (1.2 ms, iPhone 12 at 224 px)\n"
        "EfficientFormerV2 main space, CIFAR-10 at 32 px, 4 epochs on 20,000 images",
        fontsize=9,
    )
    fig.legend(fontsize=7, loc="lower center", ncol=3, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)
    return over


def main(argv: list[str] | None = None) -> int:
    """Draw the picture from the committed comparisons; 2 where there is none."""
    rows = study_rows()
    if not rows:
        sys.stderr.write(f"no study comparison in {RESULTS}\n")
        return 2
    draw(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
