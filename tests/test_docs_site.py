"""The documentation site cannot go stale: it builds with warnings as errors (a broken link, a missing
page, a docstring mkdocstrings cannot read), its generated reference pages are what the code renders
now, the CLI reference names every option of every subcommand, the hand-written reference pages name
every field they describe, and every ``nas ...`` command line in README.md and docs/ parses with the
real parser."""

import argparse
import contextlib
import dataclasses
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from nas.cli.main import build_parser
from nas.cli.reference import PAGES, md_text, option_strings, walk_commands

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: What rendering the reference pages must not import (it runs where `nas --help` runs).
HEAVY = ("torch", "torchvision", "timm", "numpy", "supernets")


def _env() -> dict[str, str]:
    """This checkout first on the path, and no user setting that changes what the pages list."""
    env = {k: v for k, v in os.environ.items() if k != "NAS_CONFIG_DIR"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["NO_MKDOCS_2_WARNING"] = "1"
    return env


# --- the site ---------------------------------------------------------------------------------


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("mkdocs", "material", "mkdocstrings_handlers")),
    reason="mkdocs, mkdocs-material and mkdocstrings[python] are dev dependencies (pip install -e .[dev])",
)
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", "mkdocs.yml", "--site-dir", tmp_path],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    problems = [line for line in proc.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert proc.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(problems or [proc.stderr[-3000:]])
    for page in ("reference/cli", "reference/api", "reference/recipes", "reference/spaces", "reference/run-folders"):
        assert (tmp_path / page / "index.html").is_file(), page
    api = (tmp_path / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in (
        "nas.core.arch.ArchConfig",
        "nas.config.spaces.load_space",
        "nas.core.families.build_supernet",
        "nas.latency.table.LatencyTable",
        "nas.train.supernet.train_supernet",
        "nas.search.engine.search",
        "nas.studies.stats.welch",
    ):
        assert f'id="{name}"' in api, f"{name} is not in the API page"


# --- generated pages --------------------------------------------------------------------------

RENDER = """
import json, sys
from nas.cli.reference import PAGES
pages = {path: render() for path, render in PAGES.items()}
print(json.dumps({"pages": pages, "loaded": [m for m in json.loads(sys.argv[1]) if m in sys.modules]}))
"""


@pytest.fixture(scope="module")
def rendered():
    """Every generated page as a fresh interpreter renders it (this process may have registered test
    families or changed settings that a page lists), and what rendering imported."""
    proc = subprocess.run(
        [sys.executable, "-c", RENDER, json.dumps(HEAVY)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_generated_page_is_what_the_code_renders_now(rendered, page):
    committed = (ROOT / page).read_text(encoding="utf-8") if (ROOT / page).exists() else ""
    fresh = rendered["pages"][page]
    if committed != fresh:
        old, new = committed.splitlines(), fresh.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        pytest.fail(
            f"{page} is stale; regenerate with `python -m nas.cli.reference --write`.\n"
            f"first difference at line {first + 1}:\n  committed: {old[first] if first < len(old) else '<end>'}\n"
            f"  now:       {new[first] if first < len(new) else '<end>'}"
        )


def test_rendering_the_reference_loads_none_of_the_engine(rendered):
    assert rendered["loaded"] == []


def _sections(text: str) -> dict[str, str]:
    """The CLI page's sections by command (``data check``), from its ``## nas ...`` headings."""
    parts = re.split(r"^#{2,4} nas (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def test_the_cli_reference_names_every_option_of_every_subcommand(monkeypatch):
    # The page lists the shipped families; the registry in this process may also hold a test family
    # (tests/test_family_plugin.py registers one on import), so the help is built from the declared ones.
    import nas.core.families

    monkeypatch.setattr(nas.core.families._FAMILIES, "_objects", {})
    text = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    sections = _sections(text)
    commands = list(walk_commands(build_parser()))
    assert len(commands) >= 19  # 16 subcommands, `space show`, `data check`, `data pack`
    for words, parser, _ in commands:
        name = " ".join(words)
        assert name in sections, f"no section for `nas {name}`"
        section = sections[name]
        for option in option_strings(parser):
            # `--seed SEED`, or a long form after its short one: `-v, --verbose`
            assert re.search(rf"(`|`-\w, ){re.escape(option)}[ `,]", section), f"`nas {name}` lacks {option}"
        for action in parser._actions:
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                assert f"`{action.metavar or action.dest}`" in section, f"`nas {name}` lacks {action.dest}"
            if action.help and action.help is not argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
                shown = md_text(parser.formatter_class(prog=parser.prog)._expand_help(action)).rstrip(".")
                assert shown in section, f"`nas {name}`: the help of {action.option_strings or action.dest} is missing"
    assert "`-v, --verbose`" in text


def test_every_recipe_field_has_a_meaning_and_a_row():
    from nas.config.recipe import Recipe

    text = (ROOT / "docs" / "reference" / "recipes.md").read_text(encoding="utf-8")
    for f in dataclasses.fields(Recipe):
        assert f.metadata.get("help"), f"Recipe.{f.name} has no help"
        assert f"| `{f.name}` |" in text and f"`--{f.name.replace('_', '-')}`" in text, f.name


def test_every_space_file_field_has_a_row():
    from nas.core.arch import ArchConfig
    from nas.core.space import _SpaceFile
    from nas.core.stage import StageSpace

    text = (ROOT / "docs" / "reference" / "spaces.md").read_text(encoding="utf-8")
    for cls in (_SpaceFile, StageSpace, ArchConfig):
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in text, f"{cls.__name__}.{f.name}"


def test_the_run_folder_reference_names_every_file_and_setting():
    from nas.runs import folder
    from nas.runs.config import RUN_CONFIGS

    text = (ROOT / "docs" / "reference" / "run-folders.md").read_text(encoding="utf-8")
    files = [folder.CHECKPOINT, folder.CONFIG, folder.PLAN, folder.RESULT, folder.METRICS, "wall.json", ".lock"]
    files += [*folder.SEARCH.also_marks, "evaluations.jsonl", "search.jsonl", "arch.yaml", "summary.md"]
    files += ["compare.md", "compare.csv", "compare.png", "rank.md", "rank.csv", "proxies.json", "importance.json"]
    files += ["supernet_evaluations.jsonl", "pareto.yaml", "optuna.db", "manifest.json", "shards.json", "demo.json"]
    for name in files:
        assert f"`{name}`" in text, name
    for command, config in RUN_CONFIGS.items():
        for f in dataclasses.fields(config):
            assert f"`{f.name}`" in text, f"{command}: {f.name}"


# --- command lines in the docs ----------------------------------------------------------------

SHELL_BLOCK = re.compile(r"^([ \t]*)```+[ \t]*(bash|console|sh|shell)\b[^\n]*\n(.*?)^\1```", re.S | re.M)
ANY_BLOCK = re.compile(r"^([ \t]*)```+[^\n]*\n.*?^\1```+[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)([^`\n]+?)\1")


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _argv(words: list[str]) -> list[str] | None:
    """The arguments after ``nas`` of one simple command (``nas ...``, ``python -m nas ...``,
    ``torchrun ... -m nas ...``, environment assignments first); None for other programs."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if words and words[0] == "nas":
        return words[1:]
    for i in range(len(words) - 1):
        if words[i] == "-m" and words[i + 1] == "nas" and Path(words[0]).name.startswith(("python", "torchrun")):
            argv = words[i + 2 :]
            # torchrun passes what follows `--` to the module (python -m nas does not strip it)
            return argv[1:] if Path(words[0]).name.startswith("torchrun") and argv[:1] == ["--"] else argv
    return None


def _simple_commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line (split at ``&&``, ``||``, ``;`` and ``|``), comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token and set(token) <= set(";&|"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def command_lines(path: Path) -> list[tuple[int, str, list[str], bool]]:
    """Every ``nas`` command line of a Markdown file: (line number, text, argv, from a fenced block)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for block in SHELL_BLOCK.finditer(text):
        first_line = text.count("\n", 0, block.start(3)) + 1
        console = block.group(2) == "console"
        lines = block.group(3).splitlines()
        i = 0
        while i < len(lines):
            start, line = i, lines[i].strip()
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i].strip()
            i += 1
            if console:
                if not line.startswith("$ "):
                    continue  # output
                line = line[2:]
            line = line.removeprefix("$ ")
            try:
                commands = _simple_commands(line)
            except ValueError as exc:  # unbalanced quotes
                found.append((first_line + start, line, ["<shell>", str(exc)], True))
                continue
            for words in commands:
                argv = _argv(words)
                if argv is not None:
                    found.append((first_line + start, line, argv, True))
    prose = ANY_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for span in CODE_SPAN.finditer(prose):
        if not span.group(2).strip().startswith("nas "):
            continue
        line_no = prose.count("\n", 0, span.start()) + 1
        try:
            commands = _simple_commands(span.group(2).strip())
        except ValueError:
            continue
        for words in commands:
            argv = _argv(words)
            if argv is not None:
                found.append((line_no, span.group(2).strip(), argv, False))
    return found


#: A value written as a placeholder (``-n N``, ``--strategy NAME``): argparse's complaint about it is not
#: the document's fault.
PLACEHOLDER = re.compile(r"(got|value:|choice:) '([A-Z][A-Z0-9_]*)'")
#: What an inline fragment (a code span in prose naming a command and perhaps an option, such as
#: `nas search --resume` or `nas export --checkpoint`) may leave out: required arguments, option values.
FRAGMENT_GAPS = ("the following arguments are required", "expected one argument", "expected at least one argument")


def parse_problem(argv: list[str], fragment: bool) -> str | None:
    """argparse's message for ``nas ARGV`` (None when it parses). A placeholder value in capitals is
    accepted; a ``fragment`` may also leave out required arguments and option values."""
    if argv[:1] == ["<shell>"]:
        return f"not a shell line: {argv[1]}"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code in (0, None):
            return None  # --help
        message = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exc.code}"
        if PLACEHOLDER.search(message) or (fragment and any(gap in message for gap in FRAGMENT_GAPS)):
            return None
        return message
    return None


@pytest.mark.parametrize("path", _docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_nas_command_line_parses(path):
    problems = [
        f"{path.relative_to(ROOT)}:{line}: `{text}`: {problem}"
        for line, text, argv, fenced in command_lines(path)
        if (problem := parse_problem(argv, fragment=not fenced))
    ]
    assert not problems, "\n".join(problems)


def test_the_command_line_finder_finds_and_judges_commands(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Run `nas search --supernet runs/sn` or `nas space show x.yaml`; `nas data check|pack` name commands.\n\n"
        "```bash\n"
        "# a comment\n"
        "nas train-supernet efficientformerv2 --space efficientformerv2-tiny \\\n"
        "    --epochs 2 --run runs/sn   # trailing comment\n"
        "NAS_CONFIG_DIR=x python -m nas search --supernet runs/sn --objective mes --target 100 && echo done\n"
        "torchrun --nproc-per-node 2 -m nas train efficientformerv2_s0 --epochs two\n"
        "torchrun --nproc-per-node 2 -m nas -- compare --searched ARCH.yaml --random N\n"
        "```\n\n"
        "```console\n$ nas profile efficientformerv2_s0 --json\nparams 3.6 M\n```\n\n"
        "```python\nnas.search()\n```\n",
        encoding="utf-8",
    )
    found = command_lines(page)
    argvs = [argv for _, _, argv, _ in found]
    assert ["train-supernet", "efficientformerv2", "--space", "efficientformerv2-tiny", "--epochs", "2", "--run"] == (
        argvs[0][:7]
    )
    assert [line for line, *_ in found][:5] == [5, 7, 8, 9, 13]
    assert ["search", "--supernet", "runs/sn", "--objective", "mes", "--target", "100"] in argvs
    assert ["profile", "efficientformerv2_s0", "--json"] in argvs
    assert ["search", "--supernet", "runs/sn"] in argvs and ["data", "check"] in argvs
    assert ["compare", "--searched", "ARCH.yaml", "--random", "N"] in argvs
    judged = {" ".join(argv): parse_problem(argv, fragment=not fenced) for _, _, argv, fenced in found}
    assert judged["train efficientformerv2_s0 --epochs two"] == (
        "nas train: error: argument --epochs: invalid int value: 'two' (see nas train --help)"
    )
    assert judged["search --supernet runs/sn"] is None  # an inline fragment may leave out required options
    assert sum(problem is not None for problem in judged.values()) == 1
    assert parse_problem(["export", "--checkpoint"], fragment=True) is None
    assert parse_problem(["export", "--checkpoint"], fragment=False) is not None
    assert parse_problem(["search", "--strategy", "fast"], fragment=True).startswith("nas search: error: argument")
    assert parse_problem(["search", "--supernet", "runs/sn"], fragment=False).endswith(
        "the following arguments are required: --objective, --target (see nas search --help)"
    )


def test_the_readme_is_a_front_door():
    """README (issue 60): at most 120 lines; set-up with the Python version and the two commands; a demo to try;
    the workflow; one picture whose caption is at most two sentences and links to its evidence."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections[:3] == ["## Set up", "## Try it in 6 minutes", "## On your data and your phone"]
    setup = text.split("## Set up")[1].split("## ")[0]
    assert "Python 3.10" in setup and 'pip install torch==2.14.1 torchvision==0.29.1 -e ".[dev]"' in setup
    assert 'python -m pytest -q -n 2 --dist loadgroup -m "not slow"' in setup
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(pictures) == 1 and (ROOT / pictures[0]).is_file()
    caption = text.split(pictures[0] + ")")[1].strip().split("\n\n")[0]
    assert caption.startswith("*") and caption.endswith("*")
    sentences = re.split(r"(?<=[.:])\s+(?=[A-Z])", " ".join(caption.strip("*").split()))
    assert len([s for s in sentences if s.endswith(".")]) <= 2 and "](docs/results/" in caption


def test_the_faqs_backbone_answer_runs_as_written(tmp_path, monkeypatch):
    """docs/faq.md's detection-backbone answer: its Python block, on a searched arch of the tiny space, gives the
    four stages' feature maps at strides 4, 8, 16 and 32."""
    from nas import load_space

    faq = (DOCS / "faq.md").read_text(encoding="utf-8")
    answer = faq.split("## Can I use a searched network as a detection backbone?")[1]
    (code,) = re.findall(r"```python\n(.*?)```", answer, flags=re.S)
    monkeypatch.chdir(tmp_path)
    load_space("efficientformerv2-tiny").members["efficientformerv2_tiny_max"].save(tmp_path / "runs/search/arch.yaml")
    scope: dict = {}
    exec(compile(code, "faq.md", "exec"), scope)
    assert [tuple(f.shape[-2:]) for f in scope["features"]] == [(56, 56), (28, 28), (14, 14), (7, 7)]
