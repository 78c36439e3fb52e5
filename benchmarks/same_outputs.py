"""Does a refactoring change what the commands write? Runs one small pipeline with the code of two commits
and compares every output, byte for byte apart from wall times, dates, paths and the commit.

    python benchmarks/same_outputs.py --before 9036906            # that commit against the working tree
    python benchmarks/same_outputs.py --before A --after B

The pipeline (tiny EfficientFormerV2 space, scikit-learn's digits, seeded): train-supernet (4 steps), space
show, profile, sample, search with greedy slimming, evolution and random search, a family search of two
targets, compare (2 random networks, 2 steps each), rank-check (4 networks, 2 steps), each command's stdout
(``--json`` where it has one) and every text file its run folder holds. A commit is checked out with
``git worktree`` into a temporary folder; both run with this interpreter (``python -m nas``, the tree first
on ``PYTHONPATH``), one after the other. Prints one line per difference, then ``same: N files`` or
``differ: K of N files`` and the wall time of each side (exit code 1 when any differ).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The pipeline, run in a fresh folder as ``python -m nas ARGS``; {out} is that folder.
PIPELINE = [
    "train-supernet efficientformerv2 --space efficientformerv2-tiny --run {out}/sn --epochs 1 --batch-size 32 "
    "--max-steps 4 --bn-calib-batches 1 --seed 0",
    "space show efficientformerv2-tiny --json",
    "profile efficientformerv2_s0 --device iphone12 --img-size 224 --json",
    "sample --supernet {out}/sn --objective latency --device iphone12 --target 0.636 -n 3 --out {out}/sample --json",
    "search --supernet {out}/sn --objective mes --target 420 --device iphone12 --strategy greedy "
    "--bn-calib-batches 1 --run {out}/greedy --json",
    "search --supernet {out}/sn --objective mes --target 420 --device iphone12 --strategy evolution "
    "--set population=6 --set evaluations=12 --set parents=3 --bn-calib-batches 1 --run {out}/evolution --json",
    "search --supernet {out}/sn --objective mes --target 420 --device iphone12 --strategy random --set evaluations=8 "
    "--bn-calib-batches 1 --run {out}/random --json",
    "search --supernet {out}/sn --objective mes --target 400 440 --device iphone12 --strategy greedy "
    "--bn-calib-batches 1 --run {out}/family --json",
    "compare --searched {out}/greedy/arch.yaml --random 2 --out {out}/compare --img-size 32 --max-steps 2 "
    "--epochs 1 --batch-size 32 --eval-batch-size 128 --log-every 2 --json",
    "rank-check --supernet {out}/sn -n 4 --out {out}/rank --max-steps 2 --epochs 1 --batch-size 32 "
    "--bn-calib-batches 1 --json",
]

TEXT = {".json", ".jsonl", ".yaml", ".yml", ".csv", ".txt", ".md", ".html", ".log"}
# What legitimately differs between two runs of the same code: times, dates, paths, commits, hosts, pids.
MASKS = [
    (
        re.compile(
            r'("?(?:[a-z_]*seconds|[a-z_]*_s|wall[a-z_]*|started|finished|elapsed|time|date|'
            r'created|commit|host|pid|git[a-z_]*|python|when|data_wait|data_ms)"?\s*[:=]\s*)("[^"]*"|[^,}\n]+)'
        ),
        r"\1<masked>",
    ),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?"), "<date>"),
    (re.compile(r"\b\d+(\.\d+)? ?(s|min|ms/step|img/s)\b"), "<duration>"),
]


def tree_at(rev: str | None, scratch: Path) -> Path:
    """The source tree of ``rev`` (a worktree in ``scratch``), or this checkout for None."""
    if rev is None:
        return ROOT
    path = scratch / f"tree-{rev[:12]}"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev], check=True, capture_output=True
    )
    return path


def run_pipeline(tree: Path, out: Path) -> float:
    """Run :data:`PIPELINE` with ``tree``'s code into ``out``; return the wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree), "NAS_LATENCY_DIR": str(out / "tables")}
    shutil.copytree(ROOT / "latency_tables", out / "tables")
    began = time.perf_counter()
    for k, line in enumerate(PIPELINE):
        argv = line.format(out=out).split()
        proc = subprocess.run(
            [sys.executable, "-m", "nas", "-q", *argv], cwd=tree, env=env, capture_output=True, text=True
        )
        (out / f"stdout-{k:02d}-{argv[0]}.txt").write_text(proc.stdout + f"\nexit {proc.returncode}\n")
        (out / f"stderr-{k:02d}-{argv[0]}.txt").write_text(proc.stderr)
    return time.perf_counter() - began


def normalized(path: Path, out: Path, tree: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace").replace(str(out), "<out>").replace(str(tree), "<tree>")
    for pattern, repl in MASKS:
        text = pattern.sub(repl, text)
    return text.splitlines()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the commit to compare against")
    parser.add_argument("--after", help="the other commit (default: this working tree)")
    parser.add_argument("--keep", type=Path, help="keep both output folders here")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="same-outputs-"))
    trees = []
    try:
        outs, walls = [], []
        for rev in (args.before, args.after):
            tree = tree_at(rev, scratch)
            trees.append((rev, tree))
            out = (args.keep or scratch) / f"out-{rev or 'worktree'}"
            out.mkdir(parents=True)
            walls.append(run_pipeline(tree, out))
            outs.append(out)
        files = sorted(
            {
                p.relative_to(o)
                for o in outs
                for p in o.rglob("*")
                if p.is_file()
                and p.suffix in TEXT
                and "tables" not in p.relative_to(o).parts
                and not p.name.startswith("stderr-")
            }
        )
        differ = 0
        for rel in files:
            a, b = outs[0] / rel, outs[1] / rel
            if not (a.exists() and b.exists()):
                differ += 1
                print(f"only in {'after' if b.exists() else 'before'}: {rel}")
                continue
            la, lb = normalized(a, outs[0], trees[0][1]), normalized(b, outs[1], trees[1][1])
            if la != lb:
                differ += 1
                diff = list(difflib.unified_diff(la, lb, "before", "after", n=0, lineterm=""))[2:8]
                print(f"differs: {rel}\n    " + "\n    ".join(diff))
        exits = [o.read_text().rstrip().rsplit("\n", 1)[-1] for o in sorted(outs[1].glob("stdout-*"))]
        print(f"commands: {len(PIPELINE)}, exit codes after: {' '.join(e.split()[-1] for e in exits)}")
        print(
            f"{'same' if not differ else 'differ'}: {differ or len(files)}{' of ' + str(len(files)) if differ else ''}"
            f" files; wall before {walls[0]:.0f} s, after {walls[1]:.0f} s"
        )
        return 1 if differ else 0
    finally:
        for rev, tree in trees:
            if rev is not None:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True
                )
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
