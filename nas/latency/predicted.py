"""Predicted latencies: timm models and every block of a space priced by a device's cost model, as a
``predicted`` latency table, and the cost model read back from such a table's header; the table a
command prices with (:func:`table_for`), predicted on first use at an input size a phone has none for."""

from __future__ import annotations

import logging

from nas.config.spaces import load_space
from nas.core.errors import NasError
from nas.core.space import SearchSpace
from nas.latency.costmodel import CostModel, fit_cost_model
from nas.latency.devices import get_device
from nas.latency.graphs import block_ops, timm_ops
from nas.latency.table import LatencyTable, TableHeader, sizes_words, table_path, table_sizes, tables_root
from nas.latency.terms import ON_CHIP_ELEMENTS, Candidate
from nas.metrics.signatures import reachable_signatures

log = logging.getLogger(__name__)


def predict_timm(model_name: str, device: str, img_size: int = 224, model: CostModel | None = None) -> float:
    """Predicted latency (ms) of any timm model on a phone."""
    model = model or fit_cost_model(device)
    return model.predict_ops(timm_ops(model_name, img_size))


def build_predicted_table(
    device: str,
    space: SearchSpace,
    img_size: int = 224,
    num_classes: int = 1000,
    model: CostModel | None = None,
    progress: bool = True,
) -> LatencyTable:
    """A ``predicted`` table: every reachable block priced by ``device``'s fitted cost model.

    The per-network intercept is carried by the head entries, so a network's sum includes it once.
    """
    from tqdm import tqdm

    spec = get_device(device)
    model = model or fit_cost_model(device)
    entries = {}
    for sig in tqdm(
        reachable_signatures(space, img_size, num_classes),
        desc=f"predict blocks for {device}",
        disable=None if progress else True,
    ):
        ms = model.predict_ops(block_ops(space.family, sig), intercept=sig.kind == "head")
        entries[sig.key()] = ms
    header = TableHeader.new(
        device,
        space,
        img_size,
        num_classes,
        "predicted",
        error=model.error_header(space.family),
        method=model.summary(),
        notes=f"Predicted, not measured: {spec.description}. Fitted to the published whole-model latencies in "
        f"latency_tables/published/published_latency.csv (device {spec.published!r}, every campaign; "
        f"reference campaign {spec.reference_campaign!r})."
        + (" Calibrated to timings of networks on a real phone." if model.calibration else ""),
    )
    return LatencyTable(header, entries)


def cost_model_from_table(table: LatencyTable) -> CostModel:
    """The cost model a ``predicted`` table was built with, read back from its header."""
    h = table.header
    m, e = h.method, h.error
    try:
        candidate = Candidate(
            m["grouping"],
            float(m["ratio_r"]),
            tuple(m.get("hardware_terms", {})),
            int(m.get("on_chip_elements", ON_CHIP_ELEMENTS)),
            float(m.get("ridge", 0.0)),
        )
        labels = candidate.labels()
        return CostModel(
            device=h.device,
            candidate=candidate,
            weights=tuple(float(m["weights_ms"][k]) for k in labels),
            intercept_ms=float(m["intercept_ms"]),
            campaign_factors=dict(m.get("campaign_factors", {})),
            fitted_on=tuple(m["fitted_on"]),
            held_out={"family": e["leave_one_family_out"], "model": e["leave_one_model_out"]},
            intervals={k: dict(v) for k, v in e["intervals"].items()},
            fitted_families=tuple(e["fitted_families"]),
            macs_only_loo_mean=float(e["macs_only_loo_mean"]),
            test=e.get("independent_test"),
            in_family_tau=dict(e.get("in_family_kendall_tau", {})),
            calibration=m.get("calibration"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        where = f"{table.path}: " if table.path else ""
        raise NasError(f"{where}not a cost-model table header (missing or bad {exc})") from None


def device_cost_model(device: str) -> CostModel:
    """``device``'s cost model as its shipped predicted tables record it (refitted where none is)."""
    for path in sorted((tables_root() / device).glob("*.json")):
        try:
            table = LatencyTable.read(path)
        except NasError:
            continue
        method = table.header.method
        if table.source == "predicted" and "weights_ms" in method and not method.get("calibration"):
            return cost_model_from_table(table)
    return fit_cost_model(device)


def table_for(device: str, space: SearchSpace | str, img_size: int) -> LatencyTable:
    """The table of ``device`` for ``space`` at ``img_size`` (:meth:`LatencyTable.load`); where a phone
    whose tables of the space are all predicted (not imported, not calibrated to a phone's timings) has
    none at that size, the predicted one, built now with the device's cost model (well under a second).

    A built table is not saved yet (its ``path`` is None): :func:`keep` saves it where ``nas
    build-table`` would, once the command has checked its other inputs, so that a command refused for
    bad input writes nothing. A local device (measured here, which takes long) or a phone with an
    imported table gets the one-line error naming the sizes that exist."""
    spec = get_device(device)
    space = load_space(space)
    if spec.kind == "local" or table_path(device, space.name, img_size).exists():
        return LatencyTable.load(device, space, img_size)
    others = [_read_or_none(table_path(device, space.name, size)) for size in table_sizes(device, space.name)]
    from_phone = [
        t for t in others if t is not None and (t.source != "predicted" or t.header.method.get("calibration"))
    ]
    if from_phone:
        sizes = ", ".join(str(t.header.img_size) for t in from_phone)
        raise NasError(
            f"no latency table for device {device}, space {space.name} at {img_size}x{img_size} "
            f"({sizes_words(device, space.name)}; at {sizes} px from timings on a phone, so none is predicted in "
            f"its place): time its blocks at {img_size} (`nas export-blocks --device {device} --space {space.name} "
            f"--img-size {img_size}`, then `nas import-table`), or price at {sizes} px with --img-size"
        )
    return build_predicted_table(device, space, img_size, model=device_cost_model(device), progress=False)


def keep(table: LatencyTable) -> LatencyTable:
    """Save a table :func:`table_for` built (``path`` None) where ``nas build-table`` would, saying so in
    one info line; a table read from a file is returned as it is."""
    if table.path is None:
        table.save()
        h = table.header
        log.info("built the predicted %s table of %s at %d px: %s", h.device, h.space, h.img_size, table.path)
    return table


def _read_or_none(path) -> LatencyTable | None:
    """The table at ``path``, or None where it cannot be read (it is reported when used at its own size)."""
    try:
        return LatencyTable.read(path)
    except NasError:
        return None
