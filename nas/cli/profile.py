"""``nas profile ARCH``: family, parameters and MACs of a named member or an arch YAML."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, add_input_args, emit
from nas.core.errors import NasError


def add_parser(sub) -> None:
    """Register the ``nas profile`` subcommand on ``sub``."""
    p = sub.add_parser(
        "profile",
        help="parameters and MACs of an architecture",
        description="Exact parameters and MACs of a named member (e.g. efficientformerv2_s0) "
        "or an arch YAML, at any input size.",
    )
    p.add_argument("arch", metavar="ARCH", nargs="?", help="a named member of a space, or the path of an arch YAML")
    p.add_argument("--timm", metavar="MODEL", help="price any timm model instead of ARCH (needs --device)")
    p.add_argument("--device", help="also show latency (with its source) and MES on this device's table")
    p.add_argument("--table", help="latency table file (default: the device's table for the space)")
    p.add_argument(
        "--space",
        help="search space (name or YAML path); default: the one that names ARCH, "
        "or the family's default space for a YAML",
    )
    add_input_args(
        p,
        "input height and width (default: the size the search that wrote ARCH priced at, else 224)",
        "classifier outputs (default: the classes of the run that wrote ARCH, else 1000)",
    )
    add_common(p, draws=False)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``nas profile``: print the parameters and MACs of ARCH (latency and MES too with
    ``--device``), or price ``--timm MODEL``; return the exit code."""
    from nas.config.spaces import find_space
    from nas.core.families import get_family
    from nas.latency import LatencyTable
    from nas.metrics import count_macs, count_params, mes

    if args.timm:
        return run_timm(args)
    if not args.arch:
        raise NasError("give ARCH (a named member or an arch YAML) or --timm MODEL")
    space = find_space(args.arch, args.space)
    label, arch = space.resolve(args.arch)
    pricing = pricing_defaults(args.arch)
    args.img_size = args.img_size or pricing.get("img_size", 224)
    args.num_classes = args.num_classes or pricing.get("num_classes", 1000)
    params = count_params(arch, args.img_size, args.num_classes)
    macs = count_macs(arch, args.img_size, args.num_classes)
    result = {
        "arch": label,
        "family": arch.family,
        "space": space.name,
        "digest": arch.digest,
        "img_size": args.img_size,
        "num_classes": args.num_classes,
        **arch.to_dict(),
        "params": params,
        "macs": macs,
    }
    lines = [
        f"arch         {label}  (digest {arch.digest})",
        f"family       {arch.family}   space {space.name}",
        f"depths       {' '.join(map(str, arch.depths))}",
        f"widths       {' '.join(map(str, arch.widths))}",
        f"attention    {' '.join(map(str, arch.attention))}  ({get_family(arch.family).attention_label} per stage)",
        f"input        {args.img_size}x{args.img_size}, {args.num_classes} classes",
        f"params       {params / 1e6:.3f} M  ({params:,}, both heads)",
        f"MACs         {macs / 1e9:.3f} G",
    ]
    if args.device:
        table = LatencyTable.load(args.device, space, args.img_size, path=args.table)
        latency = table.latency(arch)  # as nas search prices it: params with this head, latency with the table's
        interval = table.interval(latency)
        result.update(
            device=args.device,
            latency_ms=latency,
            latency_interval_ms=list(interval) if interval else None,
            interval_level=table.interval_level if interval else None,
            latency_source=table.header.source,
            latency_error=table.header.error,
            mes=mes(params, latency),
        )
        lines += [
            f"latency      {table.format_latency(latency)} on {args.device}  [{table.describe_source()}]",
            f"MES          {mes(params, latency):.1f}  (100 x (params/3M)^-0.5 x (latency/1 ms)^-1)",
        ]
    if arch.block_types:
        result["block_types"] = [list(b) for b in arch.block_types]
        lines.insert(
            5,
            "blocks       "
            + " | ".join(
                " ".join({"mb4d": "4D", "mb3d": "3D", "skip": "-"}[b] for b in types) for types in arch.block_types
            ),
        )
    emit(result, args.json, lines)
    return 0


def pricing_defaults(arch: str) -> dict:
    """The input size and class count an arch YAML was priced with by the run that wrote it
    (``nas search`` or ``nas sample``: ``config.yaml`` beside it), so one file gets one MES."""
    from pathlib import Path

    from nas.core.typed_yaml import read_yaml

    config_path = Path(arch).parent / "config.yaml"
    if not Path(arch).is_file() or not config_path.is_file():
        return {}
    saved = read_yaml(config_path, "run config")
    if not isinstance(saved, dict) or saved.get("command") not in ("search", "sample"):
        return {}
    return {k: saved[k] for k in ("img_size", "num_classes") if isinstance(saved.get(k), int) and saved[k] > 0}


def run_timm(args: argparse.Namespace) -> int:
    """Price a timm model as it runs (re-parameterised where timm can fuse it): predicted for phones
    (cost model, with its interval), measured end to end for local devices."""
    args.img_size = args.img_size or 224
    args.num_classes = args.num_classes or 1000
    import torch

    from nas.latency import get_device
    from nas.latency.costmodel import INTERVAL_LEVEL
    from nas.metrics import mes

    if not args.device:
        raise NasError("--timm needs --device (e.g. --device iphone12)")
    device = get_device(args.device)
    from nas.latency.graphs import fused_timm_model, timm_network

    interval = None
    if device.kind == "phone":
        from nas.latency.predicted import device_cost_model
        from nas.latency.published import timm_family

        net = timm_network(args.timm, args.img_size, args.num_classes)
        ops, params, fusion = net.ops, net.params, net.fusion
        model = device_cost_model(args.device)
        latency = model.predict_ops(ops)
        family = timm_family(args.timm, model.fitted_families)
        interval = model.interval(latency, family)
        fam, loo = model.held_out["family"], model.held_out["model"]
        source = (
            f"predicted for {args.device} by a cost model fitted to {len(model.fitted_on)} published models; "
            f"nested leave-one-family-out mean APE {100 * fam['mean']:.1f}% (signed {100 * fam['signed_mean']:+.1f}%), "
            f"leave-one-model-out {100 * loo['mean']:.1f}%"
        )
    else:
        from nas.latency.measure import Timer, TimingConfig
        from nas.latency.opcount import record_ops

        # The model that is timed is the one counted: fused once, timed, then its operators recorded.
        timed, fusion = fused_timm_model(args.timm, args.img_size, args.num_classes)
        params = sum(p.numel() for p in timed.parameters())
        timer = Timer(args.device, TimingConfig(busy_retries=0))  # one quick look, not a table: no waiting
        latency = timer.time(timed, torch.randn(1, 3, args.img_size, args.img_size))
        ops = record_ops(timed, (1, 3, args.img_size, args.img_size))  # moves it to the meta device
        source = f"measured end to end on {args.device} ({device.runtime}, batch 1, 1 thread)"
    macs = sum(op.macs for op in ops)
    result = {
        "timm_model": args.timm,
        "img_size": args.img_size,
        "num_classes": args.num_classes,
        "params": params,
        "macs": macs,
        "fusion": fusion,
        "device": args.device,
        "latency_ms": latency,
        "latency_interval_ms": list(interval) if interval else None,
        "interval_level": INTERVAL_LEVEL if interval else None,
        "latency_source": source,
        "mes": mes(params, latency),
    }
    shown = f"{latency:.3f} ms" + (
        f" ({interval[0]:.3f}–{interval[1]:.3f}, {100 * INTERVAL_LEVEL:.0f}%)" if interval else ""
    )
    lines = [
        f"timm model   {args.timm}  ({fusion})",
        f"input        {args.img_size}x{args.img_size}, {args.num_classes} classes",
        f"params       {params / 1e6:.3f} M  (the graph priced)",
        f"MACs         {macs / 1e9:.3f} G",
        f"latency      {shown}  [{source}]",
        f"MES          {mes(params, latency):.1f}",
    ]
    emit(result, args.json, lines)
    return 0
