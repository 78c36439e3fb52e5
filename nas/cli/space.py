"""``nas space show SPACE``: the choices per stage and the size of the space."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, emit
from nas.config.folder import available_spaces


def add_parser(sub) -> None:
    """Register the ``nas space`` subcommand (verb ``show``) on ``sub``."""
    p = sub.add_parser("space", help="inspect search spaces")
    verbs = p.add_subparsers(dest="space_command", metavar="VERB")
    show = verbs.add_parser(
        "show",
        help="choices per stage and the number of sub-networks",
        description=f"Shipped spaces: {', '.join(available_spaces())}.",
    )
    show.add_argument("space", metavar="SPACE", help="space name or YAML path")
    add_common(show, draws=False)
    show.set_defaults(handler=run_show)


def compact(values) -> str:
    """``1, 2, 3, 4`` -> ``1-4``; ``16, 32, 48, 64`` -> ``16-64 /16``; otherwise a list."""
    values = list(values)
    if len(values) >= 3:
        step = values[1] - values[0]
        if step > 0 and all(b - a == step for a, b in zip(values, values[1:])):
            return f"{values[0]}-{values[-1]}" + ("" if step == 1 else f" /{step}")
    return ", ".join(map(str, values))


def run_show(args: argparse.Namespace) -> int:
    """Run ``nas space show``: print the choices per stage, size, largest and smallest sub-networks and
    named members of SPACE; return the exit code."""
    from nas.config.spaces import load_space
    from nas.core.families import get_family

    space = load_space(args.space)
    stages = []
    lines = [f"space {space.name}  (family {space.family}, {space.source})"]
    if space.description:
        lines.append(space.description)
    lines.append("")
    lines.append(
        f"{'stage':<6}{'depths':<8}{'widths':<34}{'expansion ratios':<22}{get_family(space.family).attention_label}"
    )
    for s, st in enumerate(space.stages):
        ratios = compact(st.expansion_ratios) + (" (per-slot max)" if st.max_expansion_ratios is not None else "")
        lines.append(f"{s + 1:<6}{compact(st.depths):<8}{compact(st.widths):<34}{ratios:<22}{compact(st.attention)}")
        stages.append(
            {
                "depths": list(st.depths),
                "widths": list(st.widths),
                "expansion_ratios": list(st.expansion_ratios),
                "attention": list(st.attention),
                "max_expansion_ratios": list(st.max_expansion_ratios) if st.max_expansion_ratios else None,
            }
        )
    largest, smallest = space.largest(), space.smallest()
    lines += [
        "",
        f"sub-networks  {space.size:,} ({space.size:.3e})",
        f"largest       {largest.short()}",
        f"smallest      {smallest.short()}",
        f"members       {', '.join(space.members) or 'none'}",
    ]
    result = {
        "space": space.name,
        "family": space.family,
        "source": space.source,
        "stages": stages,
        "size": space.size,
        "largest": largest.to_dict(),
        "smallest": smallest.to_dict(),
        "members": {k: v.to_dict() for k, v in space.members.items()},
    }
    emit(result, args.json, lines)
    return 0
