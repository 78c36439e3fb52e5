"""Timing on a real phone: export every block (and the named members) as files the phone's runtime
loads (Core ML ML programs for an iPhone, ExecuTorch XNNPACK programs for an Android phone) with a
manifest, then import the timings taken on the device into an ``imported`` latency table.

See docs/how-to/measure-a-phone.md (Xcode's Core ML performance report) and
docs/how-to/measure-an-android-phone.md (``executor_runner`` over adb) for the steps in between.
"""

from __future__ import annotations

import csv
import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from nas.config.spaces import load_space
from nas.core.arch import ArchConfig
from nas.core.atomic_files import write_bytes_atomic, write_text_atomic
from nas.core.errors import NasError
from nas.core.families import build_static
from nas.core.signature import BlockSignature
from nas.core.space import SearchSpace
from nas.export import to_coreml
from nas.latency import android, xnnpack
from nas.latency.devices import DEVICES, get_device
from nas.latency.fewshot import calibrate
from nas.latency.fit import relative_nnls
from nas.latency.opcount import record_ops
from nas.latency.predicted import build_predicted_table, device_cost_model
from nas.latency.published import Fact
from nas.latency.table import (
    LatencyTable,
    TableHeader,
    table_path,
    today,
    tool_versions,
)
from nas.metrics.signatures import block_input, build_block, reachable_signatures
from nas.quantize import XNNPACK_INT8_SCHEME, quantize_int8, timing_calibration
from nas.runs.writers import write_json

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
CSV_COLUMNS = ("id", "latency_ms")
#: What each runtime's files are called, and how the phone times them (a table's ``method.timing``).
RUNTIMES = {
    "coreml": (".mlpackage", "per-block Core ML predictions timed on the phone"),
    "executorch": (".pte", "per-block ExecuTorch XNNPACK programs timed on the phone by executor_runner"),
}


def export_runtime(device: str, runtime: str | None = None) -> str:
    """The runtime ``nas export-blocks`` writes for ``device``: its own (``runtime`` may only confirm it)."""
    spec = get_device(device)
    phones = [name for name, d in DEVICES.items() if d.kind == "phone"]
    if spec.kind != "phone":
        raise NasError(
            f"export-blocks writes files to time on a phone; {device} is measured here by "
            f"`nas build-table --device {device}` (phones: {', '.join(phones)})"
        )
    if runtime is not None and runtime != spec.export_runtime:
        raise NasError(
            f"{device} is timed through {spec.export_runtime}, not {runtime} ("
            + ", ".join(f"{name}: {DEVICES[name].export_runtime}" for name in phones)
            + ")"
        )
    return spec.export_runtime


def plan_export(
    device: str,
    space: SearchSpace,
    img_size: int = 224,
    num_classes: int = 1000,
    networks: bool = True,
    limit: int | None = None,
    runtime: str | None = None,
) -> dict:
    """The manifest of an export: every reachable block (the first ``limit``) and, unless limited,
    every named member, each with an id, its block key or architecture and its file name."""
    spec = get_device(device)
    runtime = export_runtime(device, runtime)
    suffix = RUNTIMES[runtime][0]
    versions = tool_versions()
    if runtime == "executorch":
        versions["executorch"] = xnnpack.executorch_version()
    sigs = reachable_signatures(space, img_size, num_classes)
    items = [
        {"id": f"b{i:04d}", "kind": "block", "key": s.key(), "file": f"blocks/b{i:04d}_{s.kind}{suffix}"}
        for i, s in enumerate(sigs[:limit])
    ]
    if networks and limit is None:  # a limited export cannot price whole networks
        items += [
            {
                "id": f"n{i:02d}",
                "kind": "network",
                "name": name,
                "arch": arch.to_dict(),
                "file": f"networks/{name}{suffix}",
            }
            for i, (name, arch) in enumerate(space.members.items())
        ]
    return {
        "format": "nas-block-export/1",
        "device": device,
        "space": space.name,
        # a space given as a YAML path is read back from it (import-table), a built-in one by name
        "space_file": str(Path(space.source).resolve()) if space.source else None,
        "family": space.family,
        "img_size": img_size,
        "num_classes": num_classes,
        "runtime": spec.runtime,
        "export_runtime": runtime,
        "date": today(),
        "tool_versions": versions,
        **({"quantization": XNNPACK_INT8_SCHEME} if spec.quantization == "int8" else {}),
        "csv_columns": list(CSV_COLUMNS),
        "complete": limit is None,
        "items": items,
    }


def write_manifest(manifest: dict, out: str | Path) -> None:
    """Write ``manifest.json`` and the ``measurements.csv`` template (one empty row per item) to ``out``;
    for ExecuTorch programs also the adb script that times them (:mod:`nas.latency.android`)."""
    out = Path(out)
    write_json(out / MANIFEST, manifest)
    write_text_atomic(
        out / "measurements.csv",
        ",".join(CSV_COLUMNS) + "\n" + "".join(f"{item['id']},\n" for item in manifest["items"]),
    )
    if manifest.get("export_runtime") == "executorch":
        android.write_timing_script(out, manifest["items"])


@dataclass(frozen=True)
class BlockExport:
    """What ``nas export-blocks`` writes: the blocks of a space at ``img_size`` with ``num_classes``, with
    its named members as whole networks (``networks``), at most ``limit`` items (None: all), through
    ``runtime`` (None: the device's own), every item's weights and input drawn from ``seed``."""

    img_size: int = 224
    num_classes: int = 1000
    networks: bool = True
    limit: int | None = None
    runtime: str | None = None
    seed: int = 0


def export_blocks(
    device: str, space: SearchSpace, out: str | Path, export: BlockExport = BlockExport(), progress: bool = True
) -> dict:
    """Write the blocks (and named members) of :func:`plan_export` as the device's files (``.mlpackage``
    or ``.pte``), a ``manifest.json`` and a CSV template to fill in on the phone. Existing files are kept,
    so an interrupted export continues where it stopped. An ExecuTorch item records the operators
    XNNPACK took and those left to portable kernels (``operators``). Each item's weights and example
    input are drawn from ``export.seed`` alone, so a file is the same whether or not the export was resumed."""
    from tqdm import tqdm

    img_size, num_classes, seed = export.img_size, export.num_classes, export.seed
    manifest = plan_export(device, space, img_size, num_classes, export.networks, export.limit, export.runtime)
    runtime = manifest["export_runtime"]
    out = Path(out)
    desc = f"export {runtime} for {device}"
    for item in tqdm(manifest["items"], desc=desc, disable=None if progress else True):
        path = out / item["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        with torch.random.fork_rng(devices=[]):  # the caller's generator untouched
            torch.manual_seed(seed)
            if item["kind"] == "block":
                sig = BlockSignature.from_key(item["key"])
                module, x = build_block(space.family, sig), block_input(space.family, sig)
            else:
                module = build_static(ArchConfig.from_dict(item["arch"]), img_size=img_size, num_classes=num_classes)
                x = torch.randn(1, 3, img_size, img_size)
        item["input_shape"] = list(x.shape)
        if runtime == "coreml":
            if not path.exists():
                to_coreml(module, x, path)
            continue
        operators = path.with_suffix(".operators.json")
        if path.exists() and operators.exists():
            item["operators"] = json.loads(operators.read_text(encoding="utf-8"))
            continue
        if "quantization" in manifest:  # int8: calibrated as the measured int8 table's blocks are
            module = quantize_int8(module, timing_calibration(x))
        lowered = xnnpack.lower(module, x)
        item["operators"] = lowered.operators()
        write_json(operators, item["operators"])
        write_bytes_atomic(path, lowered.program)  # last: a program on disk has its operators beside it
    write_manifest(manifest, out)
    return manifest


def _read_manifest(path: Path) -> dict:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NasError(f"{path}: manifest not found (written by `nas export-blocks`)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise NasError(f"{path}: corrupt manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "nas-block-export/1":
        raise NasError(f"{path}: not a manifest written by `nas export-blocks`")
    return manifest


def _read_timings(path: Path, ids: set[str], device: str) -> tuple[dict[str, float], str]:
    """Latency (ms) per manifest id from the filled-in CSV, or from the output of the adb script
    (:func:`nas.latency.android.parse_runner_log`), and how they were timed (the script's setup line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NasError(f"{path}: timings not found (a measurements.csv or the output of {android.SCRIPT})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NasError(f"{path}: unreadable ({exc})") from None
    if android.is_runner_log(text):
        log_ = android.parse_runner_log(text, str(path))
        if log_.local:
            raise NasError(
                f"{path}: these programs ran on {log_.setup.split(',')[0]} (LOCAL=1), not on a {device}; "
                "this machine's table through the same kernels is `nas build-table --device xnnpack`"
            )
        unknown = sorted(set(log_.timings) - ids)
        if unknown:
            raise NasError(f"{path}: unknown id {unknown[0]!r}; ids come from the manifest")
        return log_.timings, log_.setup
    try:
        rows = list(csv.DictReader(text.splitlines()))
    except csv.Error as exc:
        raise NasError(f"{path}: unreadable CSV ({exc})") from None
    if not rows or set(CSV_COLUMNS) - set(rows[0]):
        raise NasError(
            f"{path}: expected a CSV with the columns {', '.join(CSV_COLUMNS)} or the output of {android.SCRIPT}"
        )
    timings = {}
    for line, row in enumerate(rows, start=2):
        key, value = (row.get("id") or "").strip(), (row.get("latency_ms") or "").strip()
        if not value:
            continue  # not measured (yet)
        if key not in ids:
            raise NasError(f"{path}: line {line}: unknown id {key!r}; ids come from the manifest")
        try:
            ms = float(value)
        except ValueError:
            raise NasError(f"{path}: line {line}: latency_ms {value!r} is not a number") from None
        if not ms > 0:
            raise NasError(f"{path}: line {line}: latency_ms must be positive, got {ms}")
        timings[key] = ms
    return timings, "entered in the CSV"


def import_table(
    csv_path: str | Path, manifest_path: str | Path, out: str | Path | None = None, refit: bool = False
) -> tuple[LatencyTable, LatencyTable | None]:
    """An ``imported`` table from phone timings; with whole-network timings it is calibrated like a
    measured table and its error is the median APE of its sums against them. With ``refit`` the
    network timings also calibrate the phone's cost model (few-shot); the calibrated ``predicted``
    table is returned second (and saved beside the imported one).

    With ``refit`` and no block timed, only a few whole networks: there is no imported table
    (``None`` first) and the calibrated predicted table is saved at ``out`` or the device's default
    path, so a new phone needs a handful of timings, not one per block."""
    manifest_path = Path(manifest_path)
    manifest = _read_manifest(manifest_path)
    space_file = manifest.get("space_file")
    device = manifest["device"]
    space = load_space(space_file if space_file and Path(space_file).is_file() else manifest["space"])
    spec = get_device(device)
    if refit and spec.published is None:
        raise NasError(
            f"--refit calibrates a cost model fitted to published timings, and {device} has none; time every "
            "block of the manifest and import without --refit"
        )
    items = manifest["items"]
    timings, timed_how = _read_timings(Path(csv_path), {item["id"] for item in items}, device)
    blocks = [item for item in items if item["kind"] == "block"]
    missing = [item for item in blocks if item["id"] not in timings]
    img_size, num_classes = manifest["img_size"], manifest["num_classes"]
    networks = [
        (item, ArchConfig.from_dict(item["arch"]))
        for item in items
        if item["kind"] == "network" and item["id"] in timings
    ]
    if refit and len(missing) == len(blocks):
        path = Path(out) if out else table_path(device, space.name, img_size)
        return None, _refit(device, space, img_size, num_classes, networks, timings, csv_path, path)
    if missing:
        raise NasError(
            f"{csv_path}: {len(missing)} of {len(blocks)} blocks have no latency_ms, e.g. "
            f"{missing[0]['id']} ({missing[0]['key']}); time every block in the manifest, or only whole "
            "networks with --refit"
        )
    entries = {item["key"]: timings[item["id"]] for item in blocks}
    header = TableHeader.new(
        device,
        space,
        img_size,
        num_classes,
        "imported",
        tool_versions=manifest.get("tool_versions", {}),
        method={
            "from": str(csv_path),
            "manifest": str(manifest_path),
            "timing": RUNTIMES[manifest.get("export_runtime", "coreml")][1],
            "timed": timed_how,
        },
        notes=f"Timed on a real {device} ({spec.description})."
        + ("" if manifest.get("complete", True) else " Partial: exported with --limit."),
    )
    table = LatencyTable(header, entries)
    if networks:
        sums = np.array([table.latency(arch) for _, arch in networks])
        measured = np.array([timings[item["id"]] for item, _ in networks])
        if len(networks) >= 2:
            scale, offset = relative_nnls(np.stack([sums, np.ones_like(sums)], axis=1), measured)
            entries = {k: v * scale + (offset if k.startswith("head:") else 0.0) for k, v in entries.items()}
            header = replace(
                header,
                method=dict(
                    header.method,
                    calibration={
                        "model": "end_to_end = scale * sum(block timings) + offset",
                        "scale": float(scale),
                        "offset_ms": float(offset),
                        "fit_on": [item["name"] for item, _ in networks],
                    },
                ),
            )
            table = LatencyTable(header, entries)
            sums = np.array([table.latency(arch) for _, arch in networks])
        apes = np.abs(sums - measured) / measured
        kind = "in-sample, after calibration" if len(networks) >= 2 else "uncalibrated"
        header = replace(
            header,
            error={
                "metric": f"median absolute percentage error vs whole networks ({kind})",
                "value": round(float(np.median(apes)), 4),
                "checked_on": [item["name"] for item, _ in networks],
            },
        )
    else:
        header = replace(header, error={"metric": "not estimated: the CSV has no whole-network timings", "value": 0.0})
    table = LatencyTable(header, table.entries)
    table.save(out or table_path(device, space.name, img_size))
    refitted = None
    if refit:
        path = table.path.with_name(table.path.stem + ".refit-predicted.json")
        refitted = _refit(device, space, img_size, num_classes, networks, timings, csv_path, path)
    return table, refitted


def _refit(device, space, img_size, num_classes, networks, timings, csv_path, path: Path) -> LatencyTable:
    """Few-shot calibration of the device's cost model to the whole networks timed on the phone
    (:func:`nas.latency.fewshot.calibrate`), then a predicted table from it, saved at ``path``."""
    if not networks:
        raise NasError("--refit needs whole-network timings in the CSV (the manifest's n.. rows)")
    facts = [
        Fact(
            item["name"],
            timings[item["id"]],
            f"timed on the phone ({csv_path})",
            tuple(
                record_ops(
                    build_static(arch, img_size=img_size, num_classes=num_classes, device="meta"),
                    (1, 3, img_size, img_size),
                )
            ),
            campaign=f"{device}/imported",
            family=arch.family,
        )
        for item, arch in networks
    ]
    model = calibrate(device_cost_model(device), facts)
    table = build_predicted_table(device, space, img_size, num_classes, model=model, progress=False)
    table.save(path)
    return table
