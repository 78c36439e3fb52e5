"""Measured latency tables: time every block signature of a space on a local device.

Blocks are timed in isolation (batch 1, warm-up, median of repeated runs, threads fixed and
recorded). Isolated blocks run with warm caches and read low against whole networks, so the table
is calibrated: whole sub-networks are timed end to end, ``e2e = scale * sum(isolated) + offset``
is fitted to them (non-negative least squares on relative error), every entry is scaled and the
offset is carried by the head entries. The fidelity check then times other sub-networks (the named
members and fresh random ones) and reports the median absolute percentage error of the table.
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.families import build_static
from nas.core.space import SearchSpace
from nas.export import onnx_bytes
from nas.latency import xnnpack
from nas.latency.devices import get_device, local_devices
from nas.latency.fit import relative_nnls
from nas.latency.table import (
    LatencyTable,
    TableHeader,
    table_path,
    today,
    tool_versions,
)
from nas.metrics.signatures import block_input, build_block, reachable_signatures
from nas.quantize import TIMING_CALIBRATION, XNNPACK_INT8_SCHEME, quantize_int8, timing_calibration
from nas.runs.lock import RunLock
from nas.runs.progress import tracked

log = logging.getLogger(__name__)

#: A table's ``method`` key listing, per block of an ``xnnpack`` table, the operators that ran on
#: ExecuTorch's portable kernels instead of XNNPACK (empty when the whole block was delegated).
OUTSIDE_XNNPACK = "operators_outside_xnnpack"


@dataclass(frozen=True)
class TimingConfig:
    """How long to time: ``warmup`` calls, then at least ``min_seconds`` of timed blocks of calls and
    at least ``min_repeats`` blocks (torch.utils.benchmark's blocked autorange)."""

    warmup: int = 5
    min_repeats: int = 20
    min_seconds: float = 0.3
    threads: int = 1
    #: The busy guard (see :meth:`Timer.busy_words`): a timing is taken again, ``busy_wait_s`` later,
    #: when a reference program timed just before or after it ran over ``busy_tolerance`` times its
    #: fastest time in this process; at most ``busy_retries`` times (0: no guard).
    busy_tolerance: float = 1.25
    busy_retries: int = 3
    busy_wait_s: float = 20.0


@dataclass(frozen=True)
class MeasurementPlan:
    """How a measured table is built: how each block and network is timed, and how many networks calibrate
    it (random ones besides the largest and smallest) and check it (the members and random ones, ``seed + 1``)."""

    timing: TimingConfig = TimingConfig()
    calibration_archs: int = 6
    check_random: int = 4
    seed: int = 0


class Timer:
    """Times a module on one input on a local device; returns the median in ms."""

    def __init__(self, device: str, config: TimingConfig):
        spec = get_device(device)
        if spec.kind != "local":
            raise NasError(
                f"device {device} cannot be measured here: {spec.description}; "
                f"local devices: {', '.join(local_devices())}"
            )
        if device == "cuda" and not torch.cuda.is_available():
            raise NasError("device cuda: no CUDA GPU is visible on this machine")
        self.device = device
        self.config = config
        self.executorch = spec.executorch
        #: ``int8``: each module is quantized (PT2E, XNNPACK's quantizer) before it is lowered and timed.
        self.quantization = spec.quantization
        self.torch_device = "cuda" if device == "cuda" else "cpu"
        #: The CPUs this process was pinned to for timing (xnnpack: as the phone script pins the big cores).
        self.pinned_cpus: list[int] | None = None
        if self.executorch:
            xnnpack.set_threads(config.threads)
            self.pinned_cpus = _pin_to_last_cpus(config.threads)
        #: The program of the last module timed on ``xnnpack`` (its operators say what left XNNPACK).
        self.last_lowered: xnnpack.Lowered | None = None
        #: Per input shape, the time of a call that computes nothing (see :meth:`time_block`), in ms.
        self.call_overhead_ms: dict[tuple[int, ...], float] = {}
        self._reference: Callable[[], object] | None = None
        #: The busy guard's record: the reference program's fastest time (ms), how many timings were
        #: taken again because it ran slow, and how many were kept although it still did.
        self.reference_floor_ms: float | None = None
        self.retimed = 0
        self.kept_busy = 0

    def _repeat(self, run: Callable[[], object]) -> float:
        """The median time of ``run`` in ms: torch.utils.benchmark's blocked autorange (blocks of calls
        long enough that the timer's own cost is negligible, the accelerator synchronised, torch's
        threads set for the measurement alone), after ``warmup`` calls, over ``min_seconds`` and at
        least ``min_repeats`` blocks."""
        cfg = self.config
        timer = _benchmark_timer()(stmt="run()", globals={"run": run}, num_threads=cfg.threads)
        for _ in range(cfg.warmup):
            run()
        times: list[float] = []
        min_run_time = cfg.min_seconds
        while True:
            measured = timer.blocked_autorange(min_run_time=min_run_time)
            times += measured.times  # per call: each block's time over its calls
            if len(times) >= cfg.min_repeats:
                return statistics.median(times) * 1e3
            # A slow module's blocks are one call each: time as many more as are missing.
            min_run_time = (cfg.min_repeats - len(times)) * measured.median * measured.number_per_run

    def _guarded(self, run: Callable[[], object]) -> float:
        """:meth:`_repeat` behind the busy guard: other work on the machine slows a timing (an int8 network
        here read 1.749 and 2.340 ms in two runs), and a calibration fitted to slow timings misprices every
        entry (the main int8 table's first scale was 1.234, timed again quiet 1.077). A reference program
        is timed before and after ``run``; while it runs over ``busy_tolerance`` times its fastest time,
        wait and time ``run`` again."""
        cfg = self.config
        for attempt in range(cfg.busy_retries + 1):
            before = self._reference_ms() if cfg.busy_retries else 0.0
            measured = self._repeat(run)
            if not cfg.busy_retries:
                return measured
            slowest = max(before, self._reference_ms())
            assert self.reference_floor_ms is not None
            if slowest <= cfg.busy_tolerance * self.reference_floor_ms:
                return measured
            ratio = slowest / self.reference_floor_ms
            if attempt < cfg.busy_retries:
                self.retimed += 1
                log.warning(
                    "the machine is busy (a reference program ran %.2fx its fastest time); timing again in %.0f s",
                    ratio,
                    cfg.busy_wait_s,
                )
                time.sleep(cfg.busy_wait_s)
        self.kept_busy += 1
        log.warning("still busy after %d tries (reference at %.2fx): the timing is kept", cfg.busy_retries, ratio)
        return measured

    def _reference_ms(self) -> float:
        """The time of a fixed small convolution on this device's runtime, in ms (0.1 s of blocks of calls;
        not the timing config, so that a guard's cost stays small); the fastest so far is kept."""
        if self._reference is None:
            with torch.random.fork_rng():  # the reference's weights leave the caller's random stream alone
                module = _Reference().eval().to(self.torch_device)
            x = torch.randn(1, 32, 16, 16, generator=torch.Generator().manual_seed(0)).to(self.torch_device)
            if self.executorch:
                program = xnnpack.Program(xnnpack.lower(module, x).program)
                self._reference = lambda: program(x)
            else:
                self._reference = lambda: _run_inference(module, x)  # inference mode, wherever it is called
        timer = _benchmark_timer()(stmt="run()", globals={"run": self._reference}, num_threads=self.config.threads)
        self._reference()
        ms = statistics.median(timer.blocked_autorange(min_run_time=0.1).times) * 1e3
        self.reference_floor_ms = ms if self.reference_floor_ms is None else min(self.reference_floor_ms, ms)
        return ms

    def busy_words(self) -> str | None:
        """What the busy guard did, in words (None when it never fired): ``2 timings taken again ...``."""
        return busy_words(self.busy_record())

    def busy_record(self) -> dict[str, object]:
        """The guard's record for a table's ``method``."""
        cfg = self.config
        return {
            "model": "each timing is bracketed by timings of a fixed reference convolution; it is taken again "
            f"(after {cfg.busy_wait_s:.0f} s, at most {cfg.busy_retries} times) while the reference runs over "
            f"{cfg.busy_tolerance:.2f}x its fastest time",
            "reference_floor_ms": None if self.reference_floor_ms is None else round(self.reference_floor_ms, 6),
            "retimed": self.retimed,
            "kept_busy": self.kept_busy,
        }

    def time(self, module: nn.Module, x: torch.Tensor) -> float:
        module = module.eval().to(self.torch_device)
        x = x.to(self.torch_device)
        if self.device == "onnxruntime-cpu":
            return self._time_onnx(module, x)
        if self.executorch:
            return self._time_xnnpack(module, x)
        with torch.inference_mode():  # thread-local: it holds inside the benchmark's timing loop
            return self._guarded(lambda: module(x))

    def time_program(self, program: xnnpack.Program, x: torch.Tensor) -> float:
        """The median time of a loaded ExecuTorch program on ``x``, in ms (an exported file, as shipped)."""
        if not self.executorch:
            raise NasError(f"device {self.device} does not run ExecuTorch programs; time them on xnnpack")
        return self._guarded(lambda: program(x))

    def time_block(self, module: nn.Module, x: torch.Tensor) -> float:
        """The time of one block as it adds to a whole network: :meth:`time` less, on ``xnnpack``, the
        fixed cost of a program call (entering the runtime, wrapping input and output) that a network
        pays once, not once per block. It is timed on a program that adds 1 to an input of the block's
        shape (5-8 us here, as much as a small block's compute: left in, it overprices small networks)."""
        measured = self.time(module, x)
        if not self.executorch:
            return measured
        shape, lowered = tuple(x.shape), self.last_lowered
        if shape not in self.call_overhead_ms:
            self.call_overhead_ms[shape] = self.time(_AddOne(), x)
            self.last_lowered = lowered  # the block's program, not the empty one
        return max(measured - self.call_overhead_ms[shape], 0.0)

    def _time_xnnpack(self, module: nn.Module, x: torch.Tensor) -> float:
        # The program a phone's executor_runner loads, run by the same runtime and backend here.
        if self.quantization == "int8":
            module = quantize_int8(module, timing_calibration(x))
        self.last_lowered = xnnpack.lower(module, x)
        program = xnnpack.Program(self.last_lowered.program)
        return self._guarded(lambda: program(x))

    def _time_onnx(self, module: nn.Module, x: torch.Tensor) -> float:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.config.threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(onnx_bytes(module, x, "x"), options, providers=["CPUExecutionProvider"])
        feed = {"x": x.numpy()}
        return self._guarded(lambda: session.run(None, feed))


def busy_words(record: dict) -> str | None:
    """A busy guard's record (:meth:`Timer.busy_record`, a table's ``method.busy_guard``) in words; None when
    it never fired."""
    retimed, kept = record["retimed"], record["kept_busy"]
    if not (retimed or kept):
        return None
    words = f"{retimed} timings taken again while the machine was busy"
    if kept:
        words += f", {kept} kept although it stayed busy: read them as upper bounds"
    return words


def _benchmark_timer() -> type:
    """``torch.utils.benchmark.Timer``, imported when first timed: the import loads
    ``torch.utils.cpp_extension``, which warns on a machine without CUDA that it found none (noise on the
    stderr of every command that merely imports this module)."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        from torch.utils.benchmark import Timer as BenchmarkTimer
    finally:
        logger.setLevel(level)
    return BenchmarkTimer


def _pin_to_last_cpus(count: int) -> list[int] | None:
    """Pin this process to the last ``count`` CPUs it may use, so the scheduler cannot move a timed run
    between cores (unpinned, one small network's median moved by 70% between processes here)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))[-count:]
    os.sched_setaffinity(0, cpus)
    return cpus


def _run_inference(module: nn.Module, x: torch.Tensor) -> object:
    with torch.inference_mode():
        return module(x)


class _Reference(nn.Sequential):
    """The busy guard's reference program: a 3x3 and a 1x1 convolution on a 32x16x16 input (about 50 us)."""

    def __init__(self):
        super().__init__(nn.Conv2d(32, 64, 3, padding=1), nn.GELU(), nn.Conv2d(64, 32, 1))


class _AddOne(nn.Module):
    """A program that computes next to nothing: its time is a runtime call's fixed cost."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1.0


def measure_network(timer: Timer, arch: ArchConfig, img_size: int, num_classes: int) -> float:
    """End-to-end latency of ``arch``'s static model, in ms."""
    model = build_static(arch, img_size=img_size, num_classes=num_classes)
    return timer.time(model, torch.randn(1, 3, img_size, img_size))


@dataclass(frozen=True)
class CheckRow:
    """One network of a table check: the table's sum against its measured end-to-end latency (ms)."""

    name: str
    digest: str
    table_ms: float
    measured_ms: float

    @property
    def ape(self) -> float:
        return abs(self.table_ms - self.measured_ms) / self.measured_ms


def check_archs(space: SearchSpace, n_random: int, seed: int) -> list[tuple[str, ArchConfig]]:
    """The named members and ``n_random`` random sub-networks (``seed``) to check a table on."""
    rng = random.Random(seed)
    archs = [(name, arch) for name, arch in space.members.items()]
    archs += [(f"random-{i}", space.sample(rng)) for i in range(n_random)]
    return archs


def check_table(
    table: LatencyTable, space: SearchSpace, timer: Timer, archs: list[tuple[str, ArchConfig]], progress: bool = True
) -> list[CheckRow]:
    """The table's sum against the measured end-to-end latency of every arch."""
    rows = []
    for name, arch in tracked(archs, "check end to end", progress, unit="timed"):
        rows.append(
            CheckRow(
                name,
                arch.digest,
                table.latency(arch),
                measure_network(timer, arch, table.header.img_size, table.header.num_classes),
            )
        )
    return rows


def median_ape(rows: list[CheckRow]) -> float:
    """Median absolute percentage error of ``rows``, as a fraction."""
    return float(statistics.median(r.ape for r in rows))


def build_measured_table(
    device: str,
    space: SearchSpace,
    img_size: int = 224,
    num_classes: int = 1000,
    plan: MeasurementPlan = MeasurementPlan(),
    out: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    recalibrate: bool = False,
) -> LatencyTable:
    """Measure every block of ``space`` on a local ``device``, calibrate, check, and save (``plan``: how).
    ``recalibrate``: keep the block timings of the complete table at ``out`` and time its calibration and
    check networks again (a table calibrated while the machine was busy is mispriced as a whole)."""
    timing = plan.timing
    timer = Timer(device, timing)
    out = Path(out) if out else table_path(device, space.name, img_size)
    if recalibrate:
        return _recalibrate(space, timer, out, img_size, num_classes, plan, progress)
    spec = get_device(device)
    versions = {**tool_versions(), "executorch": xnnpack.executorch_version()} if spec.executorch else None
    quantization = (
        {"quantization": {"scheme": XNNPACK_INT8_SCHEME, "calibration": TIMING_CALIBRATION}}
        if spec.quantization
        else {}
    )
    header = TableHeader.new(
        device,
        space,
        img_size,
        num_classes,
        "measured",
        threads=timing.threads,
        complete=False,
        **({"tool_versions": versions} if versions else {}),
        method={
            "timing": {
                "warmup": timing.warmup,
                "min_repeats": timing.min_repeats,
                "min_seconds": timing.min_seconds,
                "statistic": "median",
                "timer": "torch.utils.benchmark blocked_autorange",
            },
            **quantization,
        },
    )
    raw: dict[str, float] = {}
    if out.exists():
        if not resume:
            raise NasError(f"{out} exists; pass --resume to finish a partial table or --out to write elsewhere")
        previous = LatencyTable.read(out)
        p = previous.header
        _require_same_build(p, out, "resume", device, space.name, img_size, num_classes, timing.threads)
        if p.complete:
            log.info("%s is complete; nothing to resume", out)
            return previous
        raw = dict(previous.entries)
        if OUTSIDE_XNNPACK in p.method:
            header = replace(header, method=dict(header.method, **{OUTSIDE_XNNPACK: p.method[OUTSIDE_XNNPACK]}))
    out.parent.mkdir(parents=True, exist_ok=True)
    with RunLock(out.parent, "build-table", name=f".{out.name}.lock"):
        if not resume and out.exists():  # written by a build that finished before we took the lock
            raise NasError(f"{out} exists; pass --resume to finish a partial table or --out to write elsewhere")
        return _measure_calibrate_check(space, timer, header, raw, out, plan, progress)


def _measure_calibrate_check(
    space: SearchSpace,
    timer: Timer,
    header: TableHeader,
    raw: dict[str, float],
    out: Path,
    plan: MeasurementPlan,
    progress: bool,
) -> LatencyTable:
    """Time the blocks not in ``raw`` (saved as it goes), then calibrate and check the table: the device,
    input size and classes are ``header``'s."""
    device, img_size, num_classes = header.device, header.img_size, header.num_classes
    partial = LatencyTable(header, raw)

    sigs = reachable_signatures(space, img_size, num_classes)
    todo = [s for s in sigs if s.key() not in raw]
    log.info("%d block signatures, %d to measure", len(sigs), len(todo))
    last_save = time.monotonic()
    outside = dict(header.method.get(OUTSIDE_XNNPACK, {}))
    for sig in tracked(todo, f"time blocks on {device}", progress, unit="timed"):
        block = build_block(space.family, sig)
        raw[sig.key()] = timer.time_block(block, block_input(space.family, sig))
        if timer.last_lowered is not None:
            outside[sig.key()] = dict(timer.last_lowered.fallback)
            header = replace(header, method=dict(header.method, **{OUTSIDE_XNNPACK: outside}))
            partial.header = header
        if time.monotonic() - last_save > 20:
            partial.entries = raw
            partial.save(out)  # atomic: an interrupted build resumes from here
            last_save = time.monotonic()
    if timer.pinned_cpus is not None:
        header = replace(header, method=dict(header.method, pinned_cpus=timer.pinned_cpus))
    if timer.call_overhead_ms:
        overhead = {
            "model": "block entry = its program's median time less that of a program adding 1 to an input of "
            "its shape (a call's fixed cost, paid once per network)",
            "ms_by_input_shape": {
                "x".join(map(str, s)): round(ms, 6) for s, ms in sorted(timer.call_overhead_ms.items())
            },
        }
        header = replace(header, method=dict(header.method, call_overhead=overhead))
        partial.header = header
    partial.entries = raw
    partial.save(out)
    return _calibrate_and_check(space, timer, header, raw, out, plan, progress)


def _require_same_build(
    previous: TableHeader, out: Path, action: str, device: str, space: str, img_size: int, classes: int, threads: int
) -> None:
    """Refuse to ``action`` a table built for another device, space, input size, head or thread count."""
    p = previous
    if (p.device, p.space, p.img_size, p.num_classes, p.threads) != (device, space, img_size, classes, threads):
        raise NasError(
            f"{out}: cannot {action}: it was built for {p.device}/{p.space} at {p.img_size} with "
            f"{p.num_classes} classes and {p.threads} threads"
        )


def _recalibrate(
    space: SearchSpace, timer: Timer, out: Path, img_size: int, num_classes: int, plan: MeasurementPlan, progress: bool
) -> LatencyTable:
    """Refit the calibration of the complete measured table at ``out`` on fresh end-to-end timings, its
    block timings kept: each entry's isolated time is recovered from the recorded scale and offset."""
    if not out.exists():
        raise NasError(f"{out} does not exist; --recalibrate refits a complete measured table (give it with --out)")
    previous = LatencyTable.read(out)
    p = previous.header
    if (p.source, p.complete) != ("measured", True) or "calibration" not in p.method:
        raise NasError(
            f"{out}: --recalibrate needs a complete measured table; this one is {p.source}"
            + ("" if p.complete else ", incomplete (finish it with --resume)")
        )
    _require_same_build(
        p, out, "recalibrate here", timer.device, space.name, img_size, num_classes, timer.config.threads
    )
    cal = p.method["calibration"]
    raw = {
        k: ((v - cal["offset_ms"]) if k.startswith("head:") else v) / cal["scale"] for k, v in previous.entries.items()
    }
    method = {k: v for k, v in p.method.items() if k not in ("calibration", "busy_guard")}
    method["recalibrated"] = {"date": today(), "previous_calibration": cal, "previous_error": p.error}
    header = replace(p, complete=False, error={}, method=method)
    with RunLock(out.parent, "build-table", name=f".{out.name}.lock"):
        return _calibrate_and_check(space, timer, header, raw, out, plan, progress)


def fit_calibration(sums: np.ndarray, end_to_end: np.ndarray) -> tuple[float, float, str]:
    """``(scale, offset, fit)`` with ``end_to_end ~ scale * sums + offset`` in relative error.

    When the networks timed end to end do not follow their block sums (on a space whose networks differ
    by little, timing noise can time the largest below the smallest), the non-negative two-term fit puts
    the scale at 0 and would price every network alike: a search would have nothing to choose by, and a
    recalibration could not recover the block timings. The scale alone is fitted then (offset 0), which
    keeps the blocks' order, and ``fit`` says so."""
    scale, offset = relative_nnls(np.stack([sums, np.ones_like(sums)], axis=1), end_to_end)
    if scale > 0:
        return float(scale), float(offset), "scale and offset"
    (scale,) = relative_nnls(sums[:, None], end_to_end)
    log.warning(
        "the %d networks timed end to end do not follow their block sums (a scale-and-offset fit weighs the "
        "blocks at 0); fitted the scale alone. Time the table on a quiet machine or with more calibration networks",
        len(sums),
    )
    return float(scale), 0.0, "scale only: the networks timed end to end did not follow their block sums"


def _calibrate_and_check(
    space: SearchSpace,
    timer: Timer,
    header: TableHeader,
    raw: dict[str, float],
    out: Path,
    plan: MeasurementPlan,
    progress: bool,
) -> LatencyTable:
    """Fit ``e2e = scale * sum + offset`` to whole networks timed end to end, scale ``raw`` (isolated block
    times) by it, check the result on other networks and save the complete table to ``out``."""
    img_size, num_classes = header.img_size, header.num_classes
    # Calibrate on random sub-networks (not the ones the check uses).
    rng = random.Random(plan.seed)
    calib = [space.sample(rng) for _ in range(plan.calibration_archs)] + [space.largest(), space.smallest()]
    raw_table = LatencyTable(replace(header, complete=True), raw)
    sums = np.array([raw_table.latency(a) for a in calib])
    e2e = np.array(
        [
            measure_network(timer, a, img_size, num_classes)
            for a in tracked(calib, "calibrate end to end", progress, unit="timed")
        ]
    )
    scale, offset, fit = fit_calibration(sums, e2e)
    fit_ape = float(np.median(np.abs(scale * sums + offset - e2e) / e2e))
    entries = {k: v * scale for k, v in raw.items()}
    for key in entries:
        if key.startswith("head:"):
            entries[key] += offset  # the per-network overhead rides on the one head every network has
    method = dict(
        header.method,
        calibration={
            "model": "end_to_end = scale * sum(isolated block medians) + offset",
            "fit": fit,
            "scale": round(float(scale), 6),
            "offset_ms": round(float(offset), 6),
            "fit_on": [a.digest for a in calib],
            "end_to_end_ms": [round(float(ms), 6) for ms in e2e],
            "fit_median_ape": round(fit_ape, 4),
            "uncalibrated_median_ape": round(float(np.median(np.abs(sums - e2e) / e2e)), 4),
        },
    )
    table = LatencyTable(replace(header, complete=True, method=method), entries)

    rows = check_table(table, space, timer, check_archs(space, plan.check_random, plan.seed + 1), progress)
    if timer.config.busy_retries:
        method["busy_guard"] = timer.busy_record()
    table = LatencyTable(
        replace(
            table.header,
            method=method,
            error={
                "metric": "median absolute percentage error, table vs end to end",
                "value": round(median_ape(rows), 4),
                "checked_on": [r.name for r in rows],
                "max": round(max(r.ape for r in rows), 4),
            },
        ),
        entries,
    )
    table.save(out)
    return table
