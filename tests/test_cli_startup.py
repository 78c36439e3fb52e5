"""``nas --help`` answers at once (issue 37): building the parsers and printing every subcommand's help
loads none of the engine's heavy libraries; a subcommand imports the library in its handler.
(``benchmarks/cli_startup.py`` times it; speed is not asserted here.)"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What the parsers and every --help must not import (PyYAML is all they load beyond the standard library).
HEAVY = (
    "torch",
    "torchvision",
    "timm",
    "numpy",
    "scipy",
    "sklearn",
    "pandas",
    "matplotlib",
    "PIL",
    "ray",
    "optuna",
    "onnx",
    "onnxruntime",
    "coremltools",
    "supernets",
)

HELP_OF_EVERY_COMMAND = """
import argparse, contextlib, io, json, sys
from nas.cli.main import build_parser, main

def commands(parser, prefix=()):
    yield prefix
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, prefix + (name,))

helps = {}
for command in commands(build_parser()):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main([*command, "--help"])
        except SystemExit as exc:
            code = exc.code
    helps[" ".join(command)] = {"code": code, "text": out.getvalue()}
print(json.dumps({"helps": helps, "loaded": [m for m in json.loads(sys.argv[1]) if m in sys.modules]}))
"""


def test_every_help_loads_none_of_the_heavy_libraries():
    proc = subprocess.run(
        [sys.executable, "-c", HELP_OF_EVERY_COMMAND, json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    helps = result["helps"]
    assert result["loaded"] == [], f"--help imported {result['loaded']}"
    expected = {"", "search", "space", "space show", "train-supernet", "demo", "compare", "profile", "data pack"}
    assert expected | {"data check"} <= set(helps)
    assert len(helps) == 21  # nas, its 17 subcommands, `nas space show`, `nas data check` and `nas data pack`
    for command, shown in helps.items():
        assert shown["code"] == 0, command
        assert shown["text"].startswith(f"usage: nas {command}".rstrip()), command
    # what the parsers take from light modules
    text = {command: " ".join(shown["text"].split()) for command, shown in helps.items()}
    assert "one of efficientformer, efficientformerv2, swiftformer" in text["train-supernet"]
    assert "Shipped spaces: efficientformer, efficientformer-tiny, efficientformerv2," in text["space show"]
    assert "one of cpu, onnxruntime-cpu, cuda, xnnpack," in text["build-table"]
    assert "one of mes, latency, params" in text["search"] and "(default 3)" in text["search"]
    assert "--epochs INT" in text["train"] and "supernet epochs (default 8)" in text["demo"]


def test_a_usage_error_is_still_one_line_without_loading_the_engine():
    code = (
        "import json, sys\nfrom nas.cli import main\n"
        "codes = [main(argv) for argv in ([], ['space'])]\n"
        "try:\n    main(['search', '--supernet', 'x', '--objective', 'mes', '--target', '-1'])\n"
        "except SystemExit as exc:\n    codes.append(exc.code)\n"
        "print(json.dumps([codes, [m for m in json.loads(sys.argv[1]) if m in sys.modules]]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(HEAVY)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    codes, loaded = json.loads(proc.stdout.splitlines()[-1])
    assert codes == [0, 2, 2] and loaded == []
    assert proc.stderr.splitlines() == [
        "nas search: error: argument --target: expected a positive number, got -1 (see nas search --help)"
    ]


def test_the_public_api_still_imports_from_the_lazy_packages():
    import nas
    import nas.latency
    from nas import ArchConfig, LatencyTable, NasError, SearchSpace, load_space
    from nas.latency import DEVICES, TableHeader, get_device, table_path, tables_root
    from nas.latency import LatencyTable as Table

    assert LatencyTable is Table and callable(load_space) and callable(get_device)
    assert {ArchConfig, NasError, SearchSpace, TableHeader} and callable(table_path) and callable(tables_root)
    assert "iphone12" in DEVICES and set(nas.__all__) <= set(dir(nas))
    assert set(nas.latency.__all__) <= set(dir(nas.latency))


def test_seed_is_shown_where_something_is_drawn_and_taken_everywhere():
    """Issue 60: a report, a profile or a listing draws nothing, so its help does not offer --seed; it
    still takes one (every command does), so scripts that pass it everywhere keep working."""
    import argparse

    from nas.cli.main import build_parser

    def leaves(parser, prefix=()):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield " ".join(prefix), parser
        for action in subs:
            for name, sub in action.choices.items():
                yield from leaves(sub, prefix + (name,))

    drawn_nothing = {"report", "profile", "space show", "import-table", "data check"}
    shown = {name: "--seed" in sub.format_help() for name, sub in leaves(build_parser())}
    assert len(shown) == 18 and drawn_nothing <= shown.keys()
    assert {name for name, has_seed in shown.items() if not has_seed} == drawn_nothing
    assert build_parser().parse_args(["report", "runs/x", "--seed", "3"]).seed == 3


def test_a_torchrun_worker_that_did_not_score_prints_nothing(capsys):
    """``nas train`` and ``train-supernet`` under torchrun: only the main process's result holds the score
    (the others return their step count and so on), so only it prints (the two-process tests run it)."""
    from types import SimpleNamespace

    from nas.cli.common import run_training

    request = SimpleNamespace(run="runs/x")
    assert run_training(lambda r: {"step": 3}, request, False, "top1", lambda r: [f"top-1 {r['top1']}"]) == 0
    assert capsys.readouterr().out == ""
    run_training(lambda r: {"step": 3, "top1": 0.5}, request, False, "top1", lambda r: [f"top-1 {r['top1']}"])
    assert capsys.readouterr().out == "run          runs/x\ntop-1 0.5\n"
