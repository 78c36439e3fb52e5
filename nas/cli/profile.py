"""``nas profile ARCH``: family, parameters and MACs of a named member or an arch YAML."""

from __future__ import annotations

import argparse
from pathlib import Path

from nas.arch import ArchConfig
from nas.cli.common import add_common, emit, positive_int
from nas.cli.space import ATTENTION_LABEL
from nas.errors import NasError
from nas.metrics import count_macs, count_params
from nas.space import available_spaces, load_space


def add_parser(sub) -> None:
    p = sub.add_parser("profile", help="parameters and MACs of an architecture",
                       description="Exact parameters and MACs of a named member (e.g. efficientformerv2_s0) "
                                   "or an arch YAML, at any input size.")
    p.add_argument("arch", metavar="ARCH", help="a named member of a space, or the path of an arch YAML")
    p.add_argument("--space", help="search space (name or YAML path); default: the one that names ARCH, "
                                   "or the family's default space for a YAML")
    p.add_argument("--img-size", type=positive_int, default=224, help="input height and width (default: 224)")
    p.add_argument("--num-classes", type=positive_int, default=1000, help="classifier outputs (default: 1000)")
    add_common(p)
    p.set_defaults(run=run)


def _find_space(arch_spec: str, space_name: str | None):
    if space_name:
        return load_space(space_name)
    path = Path(arch_spec)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return load_space(ArchConfig.load(path).family)
    for name in available_spaces():
        space = load_space(name)
        if arch_spec in space.members:
            return space
    members = sorted({m for n in available_spaces() for m in load_space(n).members})
    raise NasError(f"{arch_spec!r} is not a named member of any space ({', '.join(members)}) "
                   "nor an arch YAML file")


def run(args: argparse.Namespace) -> int:
    space = _find_space(args.arch, args.space)
    label, arch = space.resolve(args.arch)
    params = count_params(arch, args.img_size, args.num_classes)
    macs = count_macs(arch, args.img_size, args.num_classes)
    result = {
        "arch": label, "family": arch.family, "space": space.name, "digest": arch.digest,
        "img_size": args.img_size, "num_classes": args.num_classes, **arch.to_dict(),
        "params": params, "macs": macs,
    }
    result.pop("hidden_widths", None)
    result["hidden_widths"] = [list(h) for h in arch.hidden_widths]
    lines = [
        f"arch         {label}  (digest {arch.digest})",
        f"family       {arch.family}   space {space.name}",
        f"depths       {' '.join(map(str, arch.depths))}",
        f"widths       {' '.join(map(str, arch.widths))}",
        f"attention    {' '.join(map(str, arch.attention))}  ({ATTENTION_LABEL[arch.family]} per stage)",
        f"input        {args.img_size}x{args.img_size}, {args.num_classes} classes",
        f"params       {params / 1e6:.3f} M  ({params:,}, both heads)",
        f"MACs         {macs / 1e9:.3f} G",
    ]
    if arch.block_types:
        result["block_types"] = [list(b) for b in arch.block_types]
        lines.insert(5, "blocks       " + " | ".join(
            " ".join({"mb4d": "4D", "mb3d": "3D", "skip": "-"}[b] for b in types) for types in arch.block_types))
    emit(result, args.json, lines)
    return 0
