"""Timing ExecuTorch programs on an Android phone: the adb script ``nas export-blocks`` writes beside
the programs, and the parser that reads what ExecuTorch's ``executor_runner`` printed back.

``executor_runner`` (ExecuTorch's ``examples/portable/executor_runner/executor_runner.cpp``) logs, for
``--num_executions=N``, one line per run and a total::

    Iteration 3 of 50: 1.734000 ms
    Model executed successfully 50 time(s) in 86.912000 ms.

through ExecuTorch's platform layer: on Android to logcat under the tag ``ExecuTorch``
(``runtime/platform/default/android.cpp``), elsewhere to stderr with a ``I 00:00:01.234567
executorch:executor_runner.cpp:779]`` prefix (``runtime/platform/default/posix.cpp``). The script
marks each program's output with ``=== nas-item ID FILE ===``; the parser takes, per item, the median
of the per-run times (the statistic ``nas build-table`` uses), or the total over N when no per-run line
was kept. A line repeated (stderr and logcat both captured) counts once.
"""

from __future__ import annotations

import re
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path

from nas.core.atomic_files import write_text_atomic
from nas.core.errors import NasError

SCRIPT = "time_on_android.sh"
MARKER = "=== nas-item"
_ITEM = re.compile(r"^=== nas-item (\S+) (\S+) ===\s*$")
_ITERATION = re.compile(r"Iteration (\d+) of (\d+): ([0-9.]+) ms")
_TOTAL = re.compile(r"Model executed successfully (\d+) time\(s\) in ([0-9.]+) ms")


def is_runner_log(text: str) -> bool:
    """Whether ``text`` is the output of :data:`SCRIPT` (rather than a ``measurements.csv``)."""
    return any(line.startswith(MARKER) for line in text.splitlines())


@dataclass(frozen=True)
class RunnerLog:
    """What :func:`parse_runner_log` read: latency (ms) per manifest id, and the script's setup line
    (``# device Pixel 6, cores mask c0, threads 1, ...``)."""

    timings: dict[str, float]
    setup: str = ""

    @property
    def local(self) -> bool:
        """Whether the programs ran on this machine (``LOCAL=1``), not on a phone."""
        return self.setup.startswith("this machine")


def parse_runner_log(text: str, source: str = "the log") -> RunnerLog:
    """Latency (ms) per manifest id from the output of :data:`SCRIPT`: the median of each item's
    ``Iteration i of N`` times, else its total over N. An item with neither is an error naming it."""
    items: dict[str, dict] = {}
    current = None
    setup = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if current is None and line.startswith("# ") and not setup:
            setup = line[2:].strip()
            continue
        marker = _ITEM.match(line)
        if marker:
            current = items.setdefault(marker.group(1), {"line": number, "runs": {}, "total": None})
            continue
        if line.startswith(MARKER):
            raise NasError(f"{source}: line {number}: malformed item marker {line.strip()!r}")
        if current is None:
            continue  # adb's own output before the first item
        if m := _ITERATION.search(line):
            current["runs"][int(m.group(1))] = float(m.group(3))
        elif m := _TOTAL.search(line):
            current["total"] = (int(m.group(1)), float(m.group(2)))
    if not items:
        raise NasError(f"{source}: no '{MARKER} ID FILE ===' line: not the output of {SCRIPT}")
    timings = {}
    for key, item in items.items():
        if item["runs"]:
            timings[key] = statistics.median(item["runs"].values())
        elif item["total"] and item["total"][0] > 0:
            timings[key] = item["total"][1] / item["total"][0]
        else:
            raise NasError(
                f"{source}: item {key} (line {item['line']}) has no 'Model executed successfully' line: "
                "executor_runner failed on it; see its output there"
            )
    return RunnerLog(timings, setup)


def timing_script(items: list[dict], iterations: int = 50, warmup: int = 5) -> str:
    """The bash script that times every ``.pte`` of ``items`` (manifest items) on a phone over adb."""
    listing = "\n".join(f"{item['id']} {shlex.quote(item['file'])}" for item in items)
    return f"""#!/usr/bin/env bash
# Times every ExecuTorch program of this export on an Android phone with executor_runner, over adb.
# Written by `nas export-blocks`; docs/how-to/measure-an-android-phone.md says how to build the runner.
#
#   RUNNER=path/to/executor_runner bash {SCRIPT} > timings.log
#   nas import-table timings.log --manifest manifest.json
#
# Settings (environment): RUNNER (required: executor_runner built for arm64-v8a), SERIAL (adb device),
# CORES (taskset mask; default: the cores of highest maximum frequency), THREADS (default 1),
# WARMUP (default {warmup}), ITERATIONS (default {iterations}), ONLY (time only the ids starting with it:
# ONLY=n times the whole networks alone, for `nas import-table --refit`). LOCAL=1 runs a runner built
# for this machine here instead, without adb (the same programs and kernels on this CPU).
set -euo pipefail
cd "$(dirname "$0")"
: "${{RUNNER:?set RUNNER to an executor_runner built for arm64-v8a (see the how-to)}}"
THREADS=${{THREADS:-1}} WARMUP=${{WARMUP:-{warmup}}} ITERATIONS=${{ITERATIONS:-{iterations}}}
# adb reads stdin, which would swallow the list of programs below: it gets /dev/null instead.
adb_() {{ if [ -n "${{SERIAL:-}}" ]; then adb -s "$SERIAL" "$@"; else adb "$@"; fi < /dev/null; }}
if [ -n "${{LOCAL:-}}" ]; then
    CORES=${{CORES:-$(printf %x $((1 << $(nproc --ignore=1))))}}  # one core, the last
    echo "# this machine ($(uname -m)), cores mask $CORES, threads $THREADS, warmup $WARMUP, iterations $ITERATIONS"
    run() {{
        taskset "$CORES" "$RUNNER" --model_path="$1" --cpu_threads="$THREADS" --print_output=none \
            --num_executions="$2" 2>&1 < /dev/null
    }}
    while read -r id file; do
        case "$id" in "${{ONLY:-}}"*) ;; *) continue ;; esac
        echo "=== nas-item $id $file ==="
        run "$file" "$WARMUP" > /dev/null
        run "$file" "$ITERATIONS"
    done <<'ITEMS'
{listing}
ITEMS
    exit 0
fi
DIR=/data/local/tmp/nas-timing
if [ -z "${{CORES:-}}" ]; then  # the big cores: those whose maximum frequency is the highest
    CORES=$(adb_ shell 'max=0; for c in /sys/devices/system/cpu/cpu[0-9]*; do
        f=$(cat $c/cpufreq/cpuinfo_max_freq); [ "$f" -gt "$max" ] && max=$f; done; mask=0
        for c in /sys/devices/system/cpu/cpu[0-9]*; do n=${{c##*cpu}}
        [ "$(cat $c/cpufreq/cpuinfo_max_freq)" -eq "$max" ] && mask=$((mask | (1 << n))); done
        printf %x $mask' | tr -d '\r')
fi
echo "# device $(adb_ shell getprop ro.product.model | tr -d '\r'), cores mask $CORES, threads $THREADS," \
    "warmup $WARMUP, iterations $ITERATIONS"
adb_ shell mkdir -p "$DIR" >&2
adb_ push "$RUNNER" "$DIR/executor_runner" >&2
adb_ shell chmod +x "$DIR/executor_runner" >&2
run() {{
    adb_ shell taskset "$CORES" "$DIR/executor_runner" --model_path="$DIR/model.pte" --cpu_threads="$THREADS" \
        --print_output=none --num_executions="$1" 2>&1
}}
while read -r id file; do
    case "$id" in "${{ONLY:-}}"*) ;; *) continue ;; esac
    adb_ push "$file" "$DIR/model.pte" >&2
    echo "=== nas-item $id $file ==="
    run "$WARMUP" > /dev/null
    adb_ logcat -c
    run "$ITERATIONS"
    adb_ logcat -d -s ExecuTorch:I
done <<'ITEMS'
{listing}
ITEMS
"""


def write_timing_script(out: Path, items: list[dict]) -> Path:
    """Write :func:`timing_script` for ``items`` as ``out/time_on_android.sh`` (executable)."""
    path = out / SCRIPT
    write_text_atomic(path, timing_script(items))
    path.chmod(0o755)
    return path
