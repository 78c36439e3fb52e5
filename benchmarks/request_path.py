"""How far does a search's request wander before it reaches the strategy? Follows ``nas search`` call by
call, in process, from the command line's handler to the strategy's ``run``, and counts the project
modules the request passes through.

    python benchmarks/request_path.py                 # this checkout
    python benchmarks/request_path.py --tree /path    # another checkout (a git worktree of an older commit)

A call is on the request's path when one of its arguments is the request or one of the objects it is
unpacked into on the way (the parsed arguments, the request, the prepared search, the supernet run, the
evaluation spec, the run config, the search context). The path is the sequence of those calls' modules;
a *stay* is a run of consecutive calls in one module, a *return* a stay in a module the path had already
left. Prints the modules in order of first visit, then ``modules N, stays S, returns R`` (issue 62's
targets: at most 15 modules and 15 returns). The supernet is the tiny EfficientFormerV2 space's, trained
4 steps on scikit-learn's digits first (about a minute).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: The request and what it is unpacked into (class names, so that older commits' private ones count too).
CARRIERS = {
    "Namespace",
    "SearchRequest",
    "_Prepared",
    "PreparedSearch",
    "SupernetRun",
    "EvalSpec",
    "SearchRunConfig",
    "SearchContext",
}


def trace(tree: Path, supernet: Path, run: Path, every_call: bool = False) -> list[str]:
    """The modules of the calls on the request's path (``every_call``: of every project call), in order, up
    to the strategy's ``run``."""
    sys.path.insert(0, str(tree))
    from nas.cli import main

    path: list[str] = []
    done = False

    def profile(frame, event, arg):
        nonlocal done
        if event != "call" or done:
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(("nas.", "supernets")):
            return
        code = frame.f_code
        args = [frame.f_locals.get(name) for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]]
        if code.co_name == "run" and args and type(args[0]).__name__.endswith("Strategy"):
            path.append(module)
            done = True
            return
        if every_call or any(type(a).__name__ in CARRIERS for a in args):
            path.append(module)

    argv = ["-q", "search", "--supernet", str(supernet), "--objective", "mes", "--target", "420"]
    argv += ["--device", "iphone12", "--strategy", "greedy", "--bn-calib-batches", "1", "--run", str(run)]
    sys.setprofile(profile)
    try:
        main(argv)
    finally:
        sys.setprofile(None)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--supernet", type=Path, help="a trained supernet run of the tiny space (default: train one)")
    parser.add_argument(
        "--every-call", action="store_true", help="count every call into project code, not only the request's"
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="request-path-"))
    # Tables predicted on the way (the tiny space at 32 px) go to a copy, not into the checkout.
    os.environ["NAS_LATENCY_DIR"] = str(shutil.copytree(args.tree / "latency_tables", scratch / "tables"))
    supernet = args.supernet
    if supernet is None:
        supernet = scratch / "sn"
        train = ["train-supernet", "efficientformerv2", "--space", "efficientformerv2-tiny", "--run", str(supernet)]
        train += ["--epochs", "1", "--batch-size", "32", "--max-steps", "4", "--bn-calib-batches", "1", "-q"]
        env = {**os.environ, "PYTHONPATH": str(args.tree)}
        subprocess.run([sys.executable, "-m", "nas", *train], check=True, cwd=args.tree, env=env)
    path = trace(args.tree, supernet, scratch / "search", args.every_call)
    stays = [m for i, m in enumerate(path) if i == 0 or path[i - 1] != m]
    seen: list[str] = []
    returns = 0
    for module in stays:
        if module in seen:
            returns += 1
        else:
            seen.append(module)
    for module in seen:
        print(f"  {module}")
    print(f"calls {len(path)}, modules {len(seen)}, stays {len(stays)}, returns {returns}")


if __name__ == "__main__":
    main()
