"""Render ``docs/results/*.md`` from the committed run folders beside this script, one Jinja2 template per page
(``templates/<page>.md.j2``), so no figure can drift from its files.

    python docs/results/generate.py            # render every page
    python docs/results/generate.py --check    # exit 1 if a committed page differs from what its files say
    python docs/results/generate.py --rejudge  # first judge every comparison and ranking study again

The folders are found by their names (``supernet-*``, ``search-*``, ``compare-*``, ``rank-check-*``, and the
benchmarks' ``*.txt`` outputs); every figure is read from their ``config.yaml`` or ``plan.json``, ``result.json``
and ``wall.json``. This script only loads them, renders each run's ``nas`` command from its recorded settings
(checked against the real parser) and counts verdicts; the wording and the dated judgement are in the templates.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path

import jinja2
import yaml

HERE = Path(__file__).resolve().parent
PAGES = ("index.md", "comparisons.md", "rank-checks.md", "fast-search.md")


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _folders(prefix: str) -> list[Path]:
    return sorted(p for p in HERE.glob(f"{prefix}*") if (p / "result.json").is_file())


def wall_seconds(folder: Path) -> float | None:
    """A run's wall time over all its sessions (``wall.json``), else what its provenance recorded."""
    if (folder / "wall.json").is_file():
        return sum(s["seconds"] for s in _json(folder / "wall.json")["sessions"])
    return (_json(folder / "result.json").get("provenance") or {}).get("wall_seconds")


def wall_words(folder: Path) -> str:
    """A run's wall time; where its trainings ran elsewhere (``device-trainings.json``, trainings_elsewhere.py, in
    it or the folder it shares a draw with), that run's too: its own clock timed only what ran here."""
    words = duration(wall_seconds(folder))
    for path in sorted(HERE.glob("*/device-trainings.json")):
        run, where = _json(path), f"{path.parent.name}/device-trainings.json"
        if mine := [t for t in run["trainings"] if f"/{folder.name}/runs/" in f"/{t['run']}"]:
            n, took = len(run["trainings"]), duration(run["wall_seconds"])
            words += f" here; its {len(mine)} trainings on {run['gpu']}, in one run of {n} ({took}, `{where}`)"
    return words


def duration(seconds: float | None) -> str:
    """``2 h 3 min``, ``41 min 48 s`` or ``9 s``; ``not recorded`` for None."""
    if seconds is None:
        return "not recorded"
    h, rest = divmod(round(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m} min" if h else (f"{m} min {s} s" if m else f"{s} s")


def _word(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return format(value, "g") if isinstance(value, float) else str(value)


def recipe_args(recorded: dict, name: str | None = None, option: str = "--recipe", used_by: str = "") -> list[str]:
    """``--recipe NAME`` and the overrides that turn that named recipe into the ``recorded`` one (when the run
    recorded no name: of the recipes whose first line says they are used by ``nas USED_BY``, the one that needs
    the fewest). A second recipe (``--full-recipe``) has no overrides: the closest name."""
    from nas.config.recipe import available_recipes, config_root, load_recipe, recipe_from_saved

    def header(candidate: str) -> str:
        return (config_root() / "recipes" / f"{candidate}.yaml").read_text(encoding="utf-8").split("\n", 1)[0]

    want = dataclasses.asdict(recipe_from_saved(recorded))

    def changed(candidate: str) -> dict:
        base = dataclasses.asdict(load_recipe(candidate))
        return {k: v for k, v in want.items() if base[k] != v}

    candidates = [n for n in available_recipes() if f"nas {used_by}" in header(n)] or available_recipes()
    name = name or min(candidates, key=lambda n: len(changed(n)))
    if option != "--recipe":
        return [option, name]
    return [option, name, *(a for k, v in changed(name).items() for a in (f"--{k.replace('_', '-')}", _word(v)))]


def _supernet_run(folder: Path, recorded: list[str]) -> str:
    """The run folder a supernet trained in: the shortest recorded ``--supernet`` path naming it, else runs/NAME."""
    name = folder.name.removeprefix("supernet-")
    return min((p for p in recorded if Path(p).name.endswith(name)), key=len, default=f"runs/{name}")


def checked(argv: list) -> str:
    """``argv`` as one shell line, after the real ``nas`` parser accepted it (a bad flag exits with its error)."""
    from nas.cli.main import build_parser

    argv = [_word(a) for a in argv]
    build_parser().parse_args(argv[1:])
    return shlex.join(argv)


def supernets(recorded: list[str]) -> list[dict]:
    """Every supernet run: its settings, result, command and wall time."""
    runs = []
    for folder in _folders("supernet-"):
        config, result = _yaml(folder / "config.yaml"), _json(folder / "result.json")
        recipe = config["recipe"]
        argv = ["nas", "train-supernet", config["family"], "--space", config["space"]]
        argv += [*recipe_args(recipe, used_by="train-supernet"), "--data", config["data"]]
        argv += ["--run", _supernet_run(folder, recorded), "--seed", config["seed"]]
        argv += ["--init", config["init"]] if config.get("init") else []
        if result["step"] < result["train_split"] // recipe["batch_size"] * recipe["epochs"]:  # stopped early
            argv += ["--max-steps", result["step"]]
        runs.append({"name": folder.name, "config": config, "result": result, "command": checked(argv)})
    return runs


def table_note(config: dict) -> str:
    """What a run's command cannot reproduce: the latency table it priced with, when not the one shipped now."""
    from nas.runs.checkpoint import file_digest

    shipped = HERE.parents[1] / f"latency_tables/{config.get('device')}/{config['space']}-{config['img_size']}.json"
    if not config.get("table_digest") or (shipped.is_file() and file_digest(shipped) == config["table_digest"]):
        return ""
    return f"priced with latency table {config['table_digest']}, not the one shipped now: the command prices anew"


def searches() -> list[dict]:
    """Every search run: its settings, result, command and the value of its objective it reached."""
    runs = []
    for folder in _folders("search-"):
        config, result = _yaml(folder / "config.yaml"), _json(folder / "result.json")
        from nas.cli.search import command_line

        argv = command_line(config, f"runs/{folder.name}")
        reached = {"mes": result["mes"], "latency": result["latency_ms"], "params": result["params"]}
        runs.append({"name": folder.name, "config": config, "result": result, "reached": reached[config["objective"]]})
        runs[-1].update(command=checked(argv), table_note=table_note(config))
    return runs


def comparisons(searched: dict[str, dict]) -> list[dict]:
    """Every comparison: its result, plan, command, the space it ran in and whether it is on the tiny space."""
    runs = []
    for folder in _folders("compare-"):
        plan, result = _json(folder / "plan.json")["config"], _json(folder / "result.json")
        search, own = searched.get(plan["searched_digest"]), result["rows"][0]["supernet_top1"] or 1
        arch = f"runs/{search['name']}/arch.yaml" if search else f"runs/{folder.name}/archs/searched.yaml"
        random = [] if plan.get("random_from") else ["--random", plan["random"]]
        argv = ["nas", "compare", "--searched", arch, *random, "--seeds", plan.get("seeds", 1)]
        argv += ["--objective", plan["objective"], "--tolerance", plan["tolerance"]]
        argv += ["--target", f"{plan['target']:g}"] if plan.get("target") else []
        argv += ["--device", plan["device"]] if plan.get("device") else []
        argv += ["--price-size", plan["img_size"]] if plan.get("img_size") else []
        argv += [*recipe_args(plan["recipe"], plan.get("recipe_name") or None), "--data", plan["data"]]
        argv += ["--supernet", plan.get("supernet") or "none"]
        calibration = plan.get("bn_calib_batches")
        if calibration and (not search or calibration != search["config"].get("bn_calib_batches")):
            argv += ["--bn-calib-batches", plan["bn_calib_batches"]]
        argv += ["--random-from", plan["random_from"]] if plan.get("random_from") else []
        argv += ["--out", f"runs/{folder.name}", "--seed", plan["seed"]]
        runs.append(
            {
                "name": folder.name,
                "result": result,
                "s": result["summary"],
                "tiny": result["space"].endswith("-tiny"),
                "randoms": [r["digest"] for r in result["rows"][1:]],
                "passed_over": [r["network"] for r in result["rows"][1:] if (r["supernet_top1"] or 0) > own],
                "command": checked(argv),
                "table_note": table_note(plan),
                # Given its search's target, or reusing such a comparison's random networks: the study's pairs.
                "strategy": search["config"].get("strategy", "greedy") if search else None,
                "target_given": plan.get("target") is not None,
                "random_from": plan.get("random_from"),
            }
        )
    return runs


def rank_checks() -> list[dict]:
    """Every ranking study: its result, command and the best ranking other than the supernet's."""
    runs = []
    for folder in _folders("rank-check-"):
        plan, result = _json(folder / "plan.json")["config"], _json(folder / "result.json")
        own = ["-n", plan["n"], *recipe_args(plan["recipe"], plan.get("recipe_name") or None)]
        argv = ["nas", "rank-check", "--supernet", plan["supernet"], *([] if plan.get("compared_from") else own)]
        if plan.get("full_n"):
            argv += [*recipe_args(plan["full_recipe"], option="--full-recipe"), "--full-n", plan["full_n"]]
        argv += ["--data", plan["data"], "--device", plan["device"]] if plan.get("device") else ["--data", plan["data"]]
        argv += ["--price-size", plan["img_size"]] if plan.get("img_size") else []
        if plan["bn_calib_batches"] != plan["recipe"]["bn_calib_batches"]:
            argv += ["--bn-calib-batches", plan["bn_calib_batches"]]
        reused = [plan["scratch_from"]] if plan.get("scratch_from") else plan.get("compared_from", [])  # or theirs
        argv += ["--out", f"runs/{folder.name}", "--seed", plan["seed"], *(["--scratch-from", *reused] * bool(reused))]
        others = {k: v for k, v in result["rankings"].items() if k not in ("supernet", "recorded supernet")}  # free
        best = max(others, key=lambda k: -2 if others[k]["kendall_tau"] is None else others[k]["kendall_tau"])
        runs.append({"name": folder.name, "plan": plan, "result": result, **result["rankings"]})
        runs[-1].update(best=best, paired=others[best]["supernet_minus_tau"], command=checked(argv))
    return runs


def pilots() -> list[dict]:
    """Every ``nas headroom`` pilot (``pilot-*``): its command and summary (spread over noise, verdict)."""
    runs = []
    for folder in _folders("pilot-"):
        c = _json(folder / "plan.json")["config"]
        argv = ["nas", "headroom", "--space", c["space"], "--objective", c["objective"], "--target", f"{c['target']:g}"]
        argv += ["--tolerance", c["tolerance"], "--networks", c["random"], "--seeds", c["seeds"]]
        argv += [*(["--device", c["device"]] if c.get("device") else []), *recipe_args(c["recipe"], c["recipe_name"])]
        argv += ["--price-size", c["img_size"]] if c["img_size"] != c["recipe"]["img_size"] else []
        argv += [*(["--data", c["data"]] if c.get("data") else []), "--out", f"runs/{folder.name}", "--seed", c["seed"]]
        summary = _json(folder / "result.json")["summary"]
        runs.append({"name": folder.name, "summary": summary, "command": checked(argv)})
    return runs


def tally(compares: list[dict]) -> dict:
    """The counts the comparison verdicts quote: comparisons and independent groups (comparisons that share a
    random network count once, :func:`nas.studies.compare_plan.draw_groups`), wins, margins above zero, and where the
    searched network lies against the random frontier."""
    from nas.studies.compare_plan import draw_groups

    groups = draw_groups({c["name"]: c["randoms"] for c in compares})
    for i, group in enumerate(groups, 1):
        for c in compares:
            if c["name"] in group:
                c.update(group=i, shared=len(group) > 1)

    def fit(c: dict, cost: str) -> dict:
        return c["s"].get("frontier", {}).get(cost, {})

    def names(test) -> list[str]:
        return [c["name"] for c in compares if test(c)]

    beats = names(lambda c: c["s"].get("beats_every_random"))
    macs = names(lambda c: fit(c, "log_macs").get("estimable"))
    lat = names(lambda c: fit(c, "latency_ms").get("estimable"))
    return {
        "n": len(compares),
        "groups": len(groups),
        "beats": beats,
        "beats_groups": len({c["group"] for c in compares if c["name"] in beats}),
        "tiny": names(lambda c: c["tiny"]),
        "mean_above": names(lambda c: (c["s"]["margin_over_random_mean_ci"] or [0])[0] > 0),
        "macs_fits": macs,
        "macs_above": [n for n in macs if fit(_by(compares, n), "log_macs")["residual_ci"][0] > 0],
        "macs_below": [n for n in macs if fit(_by(compares, n), "log_macs")["residual_ci"][1] < 0],
        "most_macs": names(lambda c: fit(c, "log_macs").get("searched_rank_by_cost") == 1),
        "extrapolated": names(lambda c: fit(c, "log_macs").get("extrapolated")),
        "lat_fits": lat,
        "lat_above": [n for n in lat if fit(_by(compares, n), "latency_ms")["residual_ci"][0] > 0],
        "passed_over": names(lambda c: c["passed_over"]),  # the supernet scores a random network above it
    }


def _by(runs: list[dict], name: str) -> dict:
    return next(r for r in runs if r["name"] == name)


def benchmarks() -> list[dict]:
    """Every benchmark output (``*.txt``): its comment lines, its table and its rows' verdicts."""
    outputs = []
    for path in sorted(HERE.glob("*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines()
        comments = [line[2:] for line in lines if line.startswith("# ")]
        command = re.match(r"python [^:(]*", comments[0])
        rows = [line for line in lines if line.startswith("runs/")]
        found = [re.search(r"(?:wall time|done in) ([\d.]+ \w+)|^([\d.]+ \w+) in all", c) for c in comments]
        cost = next((m.group(1) or m.group(2) for m in found if m), None)
        output = dict(name=path.name, command=command and command.group(0).strip(), comments=comments, cost=cost)
        output.update(whole="scores all images" in comments[0], table=[x for x in lines if not x.startswith("#")])
        output.update(rows=len(rows), held=sum("FAIL:" not in x for x in rows))
        outputs.append({**output, "same": sum(x.endswith("same architecture") for x in rows)})
    return outputs


def context() -> dict:
    """Everything the templates read: the run folders, grouped by kind, with their verdicts counted."""
    search_runs = searches()
    ranks = rank_checks()
    recorded = [s["config"]["supernet"] for s in search_runs] + [r["plan"]["supernet"] for r in ranks]
    compares = comparisons({s["result"]["digest"]: s for s in search_runs})
    by_objective = {}
    for c in compares:
        by_objective.setdefault(c["result"]["objective"]["name"], []).append(c)
    fast = [b for b in benchmarks() if b["name"].startswith("fast-search")]
    provenance = [_json(path).get("provenance") or {} for path in sorted(HERE.glob("*/result.json"))]
    cpus = sorted({p["cpus"] for p in provenance if p.get("cpus")})
    gpus = sorted({p["cuda"] for p in provenance if p.get("cuda")})
    return {
        "supernets": supernets(recorded),
        "searches": search_runs,
        "compares": compares,
        "objectives": {name: {"runs": runs, **tally(runs)} for name, runs in by_objective.items()},
        "ranks": ranks,
        "pilots": pilots(),
        "ranks_above": [r["name"] for r in ranks if (r["paired"]["ci"] or [0])[0] > 0],
        "benchmarks": benchmarks(),
        "fast": fast,
        "machines": f"{' or '.join(map(str, cpus))} CPU cores, " + (", ".join(gpus) or "no GPU"),
    }


def _ci(ci: list[float] | None, scale: float = 100.0) -> str:
    return "not estimable" if ci is None else f"{scale * ci[0]:+.2f} to {scale * ci[1]:+.2f}"


def environment() -> jinja2.Environment:
    """The templates' environment: strict about missing values, with the number formats the pages share."""
    from nas.studies.stats import over_comparisons

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        pct=lambda x: f"{100 * x:.2f}",  # a fraction as a percentage
        pts=lambda x: f"{100 * x:+.2f}",  # a difference of fractions in percentage points
        ci=_ci,  # an interval of fractions in points
        tau=lambda x: "-" if x is None else f"{x:+.2f}",
        tci=lambda ci: _ci(ci, 1.0),  # an interval of a rank correlation
        p=lambda p: "p not estimable" if p is None else ("p < 0.001" if p < 0.001 else f"p = {p:.3f}"),
        over=lambda values: over_comparisons(list(values)),  # a figure's mean over independent comparisons
        duration=duration,
        wall=lambda name: wall_words(HERE / name),
        g=lambda x: format(x, "g"),
        names=lambda items: ", ".join(f"`{x}`" for x in items) or "none",
    )
    return env


def render() -> dict[str, str]:
    """Every page's text, from its template and the committed files."""
    env, data = environment(), context()
    return {page: env.get_template(f"{page}.j2").render(**data) for page in PAGES}


def rejudge_all() -> None:
    """Judge every committed comparison and ranking study again from its rows with the current statistics, no
    training (:func:`nas.studies.compare.rejudge`, :func:`nas.studies.rankcheck.rejudge`)."""
    from nas.studies import compare, rankcheck

    for folder in _folders("compare-"):
        compare.rejudge(folder)
    for folder in _folders("rank-check-"):
        rankcheck.rejudge(folder)


def main(argv: list[str] | None = None) -> int:
    """Render (or, with ``--check``, compare) every page; 1 when a checked page or a study's statistics differ."""
    from nas.studies import compare, rankcheck

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--rejudge", action="store_true", help="first judge every comparison and ranking study again")
    args = parser.parse_args(argv)
    if args.rejudge:
        rejudge_all()
    status = 0
    studies = [(f, compare) for f in _folders("compare-")] + [(f, rankcheck) for f in _folders("rank-check-")]
    for folder in [f for f, module in studies if module.stale(f)]:
        status = 1
        print(f"{folder.name}: its statistics differ from the current nas/studies/stats.py; run generate.py --rejudge")
    if not args.check:  # the pages' pictures, from the same files (figures.py beside this script)
        spec = importlib.util.spec_from_file_location("results_figures", HERE / "figures.py")
        spec.loader.exec_module(figures := importlib.util.module_from_spec(spec))
        figures.draw_all(HERE, rank_checks())
    for page, text in render().items():
        path = HERE / page
        if not args.check:
            path.write_text(text, encoding="utf-8")
            continue
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old != text:
            status = 1
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), page, page))
    return status


if __name__ == "__main__":
    sys.exit(main())
