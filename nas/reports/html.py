"""``nas report RUN``: one self-contained HTML page for any run folder.

The page holds the run's config, its curves (loss, learning rate, images/s), its result, the
search trajectory and Pareto front, the comparison table, and every latency with its source.
Plots are PNG images inlined as data URIs, so the page needs no network and no other file. The
run kind is read from the folder: ``demo.json`` (a demo, whose stages are reported in turn),
``plan.json`` (a comparison), or ``config.yaml``'s ``command`` (supernet, training, search).
Every number shown carries ``data-value`` with the number it was formatted from. The markup is
jinja2's (``nas/templates/report.html.j2``, autoescaped); this module gathers what goes in it.
"""

from __future__ import annotations

import base64
import functools
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError
from nas.core.typed_yaml import dump_yaml, read_yaml

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
td.text, th { text-align: left; } tr.searched { font-weight: bold; background: #fff6e0; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.source { color: #555; font-size: 0.85em; } img { max-width: 100%; }
"""


@functools.cache
def _macros():
    """The template's macros (``page``, ``table``, the cells, ...), each returning escaped markup."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("nas", "templates"),
        autoescape=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("report.html.j2").module


def _render(macro: str, *args: Any) -> str:
    """The template's ``macro`` applied to ``args`` (values escaped, :class:`Markup` kept), as a plain string."""
    return str(getattr(_macros(), macro)(*args))


def number(value: Any, spec: str = ".4g", scale: float = 1.0, key: str = "") -> str:
    """A table cell for a number, with the exact value in ``data-value`` (``-`` for none)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return _render("text_cell", "-" if value is None else value, key)
    shown = value if scale == 1.0 else value * scale
    return _render("number_cell", key, json.dumps(value), format(shown, spec))


def table(head: Iterable[str], rows: Iterable[Iterable[str]], row_class: Iterable[str] | None = None) -> str:
    """An HTML table with header ``head``, rows of rendered cells and an optional CSS class per row."""
    rows = list(rows)
    classes = list(row_class) if row_class is not None else [""] * len(rows)
    marked = [([Markup(cell) for cell in cells], cls) for cells, cls in zip(rows, classes)]  # rendered cells
    return _render("table", list(head), marked)


def text_cell(value: Any) -> str:
    """A left-aligned table cell holding ``value`` (escaped)."""
    return _render("text_cell", value)


def png(fig) -> str:
    """A matplotlib figure as an inline PNG image (closed afterwards)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return _render("image", "plot", base64.b64encode(buffer.getvalue()).decode())


def png_file(path: Path) -> str:
    """A PNG file as an inline image."""
    return _render("image", path.name, base64.b64encode(path.read_bytes()).decode())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NasError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from None


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            break  # a line cut short by an interrupted run
    return records


# --- sections -------------------------------------------------------------------------------------


def config_section(config: Any, title: str = "Config") -> str:
    """``config`` as YAML, collapsed under the heading ``title``."""
    return _render("config_section", title, dump_yaml(config))


def curves_section(metrics: list[dict]) -> str:
    """Loss, learning rate and images/s over the logged steps, and their last values (empty when
    nothing was logged)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [m for m in metrics if not m.get("final") and "loss" in m]
    if not points:
        return ""
    fig, axes = plt.subplots(1, 3, figsize=(12, 3))
    steps = [m["step"] for m in points]
    for ax, key, label in zip(axes, ("loss", "lr", "images_per_s"), ("loss", "learning rate", "images/s")):
        ax.plot(steps, [m.get(key) for m in points])
        ax.set_xlabel("step")
        ax.set_title(label)
        ax.grid(alpha=0.3)
    last = points[-1]
    rows = [[text_cell(k), number(last.get(k), ".4g", key=f"last.{k}")] for k in ("step", "loss", "lr", "images_per_s")]
    return "<h2>Training curves</h2>\n" + png(fig) + "\n" + table(["last logged", "value"], rows)


def result_section(result: dict, title: str = "Result") -> str:
    """The scalar entries of ``result`` as a table under ``title`` (accuracies in percent)."""
    rows = []
    for key, value in result.items():
        if isinstance(value, (dict, list)):
            continue
        scale, spec = (
            (100.0, ".2f") if "top1" in key or key in ("accuracy", "start_accuracy", "chance") else (1.0, ".6g")
        )
        label = f"{key} (%)" if scale == 100.0 else key
        rows.append(
            [
                text_cell(label),
                number(value, spec, scale, key=f"result.{key}")
                if isinstance(value, (int, float)) and not isinstance(value, bool)
                else text_cell(value),
            ]
        )
    return _render("heading", title) + "\n" + table(["", "value"], rows)


def trajectory_section(run: Path) -> str:
    """A search run's steps as a table and plot, and its Pareto front when optuna wrote one."""
    steps = _jsonl(run / "search.jsonl") if (run / "search.jsonl").exists() else []
    state = _read_json(run / "state.json") if (run / "state.json").exists() else None
    out = ["<h2>Search</h2>"]
    if (run / "search.png").exists():  # every strategy's: everything evaluated, the band, finalists, the choice
        out.append(png_file(run / "search.png"))
    result = _read_json(run / "result.json") if (run / "result.json").exists() else {}
    if result.get("finalists"):
        out.append("<h3>Finalists, scored again</h3>")
        out.append(
            table(
                ["digest", "search top-1 (%)", "final top-1 (%)", "final scores"],
                [
                    [
                        text_cell(f["digest"] + (" (chosen)" if f["digest"] == result.get("digest") else "")),
                        number(f["search_accuracy"], ".2f", 100, key="finalist.search_accuracy"),
                        number(f["final_accuracy"], ".2f", 100, key="finalist.final_accuracy"),
                        text_cell(", ".join(f"{100 * x:.2f}" for x in f["final_scores"])),
                    ]
                    for f in result["finalists"]
                ],
            )
        )
    if not steps:  # not greedy slimming: no trajectory of steps
        return "\n".join(out)
    out.append("<h2>Search trajectory</h2>")
    if state is not None:
        out.append(_render("start_accuracy", state["start_accuracy"]))
    rows = [
        [
            number(s["step"], "d", key="step"),
            text_cell(s["action"]),
            text_cell(f"{s.get('evaluated', s['candidates'])} / {s['candidates']}"),
            number(s["accuracy"], ".2f", 100, key="accuracy"),
            number(s["params"] / 1e6, ".3f", key="params_m"),
            number(s.get("latency_ms"), ".3f", key="latency_ms"),
            number(s.get("mes"), ".1f", key="mes"),
            text_cell(s.get("latency_source") or "no latency table"),
        ]
        for s in steps
    ]
    header = [
        "step",
        "action",
        "evaluated / shrinks",
        "top-1 (%)",
        "params (M)",
        "latency (ms)",
        "MES",
        "latency source",
    ]
    out.append(table(header, rows))
    if (run / "trajectory.png").exists():
        out.append(png_file(run / "trajectory.png"))
    front = read_yaml(run / "pareto.yaml", "Pareto front") if (run / "pareto.yaml").exists() else None
    if front:
        out.append("<h2>Pareto front (optuna NSGA-II)</h2>")
        out.append(
            table(
                ["top-1 (%)", "params (M)", "latency (ms)", "MES", "digest"],
                [
                    [
                        number(r["accuracy"], ".2f", 100, key="accuracy"),
                        number(r["params"] / 1e6, ".3f", key="params_m"),
                        number(r.get("latency_ms"), ".3f", key="latency_ms"),
                        number(r.get("mes"), ".1f", key="mes"),
                        text_cell(r["digest"]),
                    ]
                    for r in front
                ],
            )
        )
        if (run / "pareto.png").exists():
            out.append(png_file(run / "pareto.png"))
    return "\n".join(out)


def _flat(mapping: dict, prefix: str = "") -> dict:
    """Nested mappings (the summary's random frontier) as one level of dotted keys."""
    out = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def compare_section(run: Path) -> str:
    """A comparison's ``result.json``: one row per network (the searched one highlighted), the summary
    and the plot."""
    result = _read_json(run / "result.json")
    rows, classes = [], []
    for r in result["rows"]:
        rows.append(
            [
                text_cell(r["network"]),
                number(r["top1"], ".2f", 100, key="top1"),
                number(r.get("top1_std"), ".2f", 100, key="top1_std"),
                text_cell(len(r.get("top1_seeds", [])) or 1),
                number(r.get("top1_ema"), ".2f", 100, key="top1_ema"),
                number(r.get("supernet_top1"), ".2f", 100, key="supernet_top1"),
                number(r["params"] / 1e6, ".3f", key="params_m"),
                number(r["macs"] / 1e6, ".1f", key="macs_m"),
                number(r.get("latency_ms"), ".3f", key="latency_ms"),
                number(r.get("mes"), ".1f", key="mes"),
                text_cell(r["digest"]),
            ]
        )
        classes.append("searched" if r["kind"] == "searched" else "")
    s = result["summary"]
    summary_rows = [
        [text_cell(k), text_cell("-" if v is None else ", ".join(f"{x:.4g}" for x in v))]
        if isinstance(v, list) and all(isinstance(x, float) for x in v)
        else [text_cell(k), number(v, ".4g", key=f"summary.{k}")]
        for k, v in _flat({k: v for k, v in s.items() if k not in ("vs_random", "vs_baselines")}).items()
    ]
    baselines = [
        [
            text_cell(t["network"]),
            text_cell("yes" if t.get("in_band") else "no"),
            number(t["estimate"], ".2f", 100, key="vs_baselines.estimate"),
            text_cell(t["reason"] if t["ci"] is None else f"{100 * t['ci'][0]:+.2f} to {100 * t['ci'][1]:+.2f}"),
            number(t["p"], ".3f", key="vs_baselines.p"),
        ]
        for t in s.get("vs_baselines", [])
    ]
    tests = [
        [
            text_cell(t["network"]),
            number(t["estimate"], ".2f", 100, key="vs_random.estimate"),
            text_cell(t["reason"] if t["ci"] is None else f"{100 * t['ci'][0]:+.2f} to {100 * t['ci'][1]:+.2f}"),
            number(t["p"], ".3f", key="vs_random.p"),
            number(t["p_holm"], ".3f", key="vs_random.p_holm"),
        ]
        for t in s.get("vs_random", [])
    ]
    objective = result["objective"]
    out = [
        _render("heading", f"Searched vs random at {objective['name']} {objective['target']:.4g}"),
        table(
            [
                "network",
                "top-1 (%)",
                "± std over seeds",
                "seeds",
                "top-1 EMA (%)",
                "supernet top-1 (%)",
                "params (M)",
                "MACs (M)",
                "latency (ms)",
                "MES",
                "digest",
            ],
            rows,
            classes,
        ),
        table(["summary", "value"], summary_rows),
        *(
            [
                table(
                    ["searched minus", "difference (points)", "95% CI (Welch)", "one-sided p", "Holm-adjusted p"], tests
                )
            ]
            if tests
            else []
        ),
        *(
            [
                table(
                    ["searched minus baseline", "in the band", "difference (points)", "95% CI (Welch)", "one-sided p"],
                    baselines,
                )
            ]
            if baselines
            else []
        ),
        "<h3>Where the numbers come from</h3>",
        _render("sources", list(result["sources"].items())),
    ]
    if (run / "compare.png").exists():
        out.append(png_file(run / "compare.png"))
    return "\n".join(out)


# --- run kinds ------------------------------------------------------------------------------------


def run_kind(run: Path) -> str:
    """The kind of run in ``run``: ``demo``, ``compare``, ``train-supernet``, ``train`` or ``search``
    (a :class:`NasError` for anything else)."""
    if (run / "demo.json").exists():
        return "demo"
    if (run / "plan.json").exists():
        return "compare"
    if (run / "config.yaml").exists():
        config = read_yaml(run / "config.yaml", "run config")
        command = config.get("command") if isinstance(config, dict) else None
        if command in ("train-supernet", "train", "search"):
            return command
    raise NasError(
        f"{run}: not a run folder of nas (no demo.json, plan.json or config.yaml of train-supernet, train or search)"
    )


def sections(run: Path, kind: str) -> list[str]:
    """The HTML sections of the report of a ``kind`` run (a demo's: those of each of its stages)."""
    if kind in ("train-supernet", "train"):
        out = [
            config_section(read_yaml(run / "config.yaml", "run config")),
            curves_section(_jsonl(run / "metrics.jsonl")),
        ]
        if (run / "result.json").exists():
            result = _read_json(run / "result.json")
            out.append(result_section(result))
            if "importance" in result:
                out.append(config_section(result["importance"], "Block importance (EfficientFormer α)"))
        else:
            out.append("<p>No result yet: the run has not finished.</p>")
        return out
    if kind == "search" and (run / "targets").is_dir():  # a family: one network per target
        out = [config_section(read_yaml(run / "config.yaml", "run config"))]
        if (run / "family.png").exists():
            out.append(png_file(run / "family.png"))
        for target in sorted((run / "targets").iterdir(), key=lambda p: p.name):
            out.append(_render("heading", f"Target {target.name}", 1))
            out.append(trajectory_section(target))
            if (target / "result.json").exists():
                out.append(result_section(_read_json(target / "result.json")))
        return out
    if kind == "search":
        out = [config_section(read_yaml(run / "config.yaml", "run config")), trajectory_section(run)]
        if (run / "result.json").exists():
            out.append(result_section(_read_json(run / "result.json")))
        return out
    if kind == "compare":
        plan = _read_json(run / "plan.json")
        out = [config_section(plan["config"])]
        out.append(
            compare_section(run)
            if (run / "result.json").exists()
            else "<p>No result yet: the comparison has not finished.</p>"
        )
        return out
    demo = _read_json(run / "demo.json")
    out = [
        result_section({k: v for k, v in demo["seconds"].items()}, "Time per stage (s)"),
        result_section({"target_mes": demo["target_mes"], "space": demo["space"], "device": demo["device"]}, "Demo"),
    ]
    for stage in ("supernet", "search", "compare"):
        folder = run / stage
        if folder.is_dir():
            out.append(_render("heading", f"Stage: {stage}", 1))
            out += sections(folder, run_kind(folder))
    return out


def write_report(run: str | Path, out: str | Path | None = None) -> Path:
    """Write the HTML page of ``run`` to ``out`` (default ``run/report.html``); returns its path."""
    run = Path(run)
    if not run.is_dir():
        raise NasError(f"{run}: run folder not found")
    kind = run_kind(run)
    body = "\n".join(s for s in sections(run, kind) if s)
    page = _render("page", kind, run.name, Markup(STYLE), Markup(body))
    out = Path(out) if out else run / "report.html"
    write_text_atomic(out, page)
    return out
