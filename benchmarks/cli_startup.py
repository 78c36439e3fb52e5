"""Wall time of ``nas --help`` and ``nas search --help``, against references measured in the same run
(this machine is shared and noisy): ``python -c pass`` (the interpreter's own start) and ``python -c
"import torch"`` (what every help cost while the parsers loaded the engine; issue 37's target is
under 1 s).

    python benchmarks/cli_startup.py [--repeats 7]

Every command runs as a fresh process, ``--repeats`` times, the commands interleaved so that a change
of the machine's load touches them alike; one line each gives the median and the range in seconds and
the medians' ratios to the two references. ``nas`` is the console script beside this interpreter
(``python -m nas`` where there is none).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from nas.runs.provenance import code_version


def nas_command() -> list[str]:
    """The ``nas`` console script of this interpreter's environment, else ``python -m nas``."""
    script = Path(sys.executable).parent / "nas"
    if script.is_file():
        return [str(script)]
    found = shutil.which("nas")
    return [found] if found else [sys.executable, "-m", "nas"]


def wall_time(argv: list[str]) -> float:
    """Seconds from starting ``argv`` to its exit (its output discarded; a failure is an error)."""
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs of every command (default 7)")
    args = parser.parse_args()

    nas = nas_command()
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import torch'": [sys.executable, "-c", "import torch"],
        "nas --help": [*nas, "--help"],
        "nas search --help": [*nas, "search", "--help"],
    }
    code = code_version()
    print(f"# cli startup: median of {args.repeats} fresh processes each, interleaved; nas is {' '.join(nas)}")
    print(
        f"# commit {code['commit'][:12]}{' + uncommitted changes' if code['dirty'] else ''}, "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    for argv in commands.values():  # warm the file cache: the first start of torch reads ~1 GB
        wall_time(argv)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, argv in commands.items():
            times[name].append(wall_time(argv))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    python, torch = medians["python -c pass"], medians["python -c 'import torch'"]
    for name, ts in times.items():
        print(
            f"{name:<26} median {medians[name]:6.3f} s (range {min(ts):.3f}-{max(ts):.3f})   "
            f"x{medians[name] / python:5.1f} python -c pass   x{medians[name] / torch:.2f} import torch"
        )


if __name__ == "__main__":
    main()
