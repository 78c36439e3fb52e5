"""``nas space show SPACE``: the choices per stage and the size of the space."""

from __future__ import annotations

import argparse

from nas.cli.common import add_common, emit
from nas.space import available_spaces, load_space


def add_parser(sub) -> None:
    p = sub.add_parser("space", help="inspect search spaces")
    verbs = p.add_subparsers(dest="space_command", metavar="VERB")
    show = verbs.add_parser("show", help="choices per stage and the number of sub-networks",
                            description=f"Shipped spaces: {', '.join(available_spaces())}.")
    show.add_argument("space", metavar="SPACE", help="space name or YAML path")
    add_common(show)
    show.set_defaults(run=run_show)


def run_show(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    stages = []
    lines = [f"space {space.name}  (family {space.family}, {space.source})"]
    if space.description:
        lines.append(space.description)
    lines.append("")
    lines.append(f"{'stage':<6}{'depths':<22}{'widths':<34}{'expansion ratios':<18}{'MHSA blocks'}")
    for s, st in enumerate(space.stages):
        ratios = ", ".join(map(str, st.expansion_ratios))
        if st.max_expansion_ratios is not None:
            ratios += " (per-slot max)"
        depths = f"{min(st.depths)}-{max(st.depths)}" if list(st.depths) == list(range(min(st.depths), max(st.depths) + 1)) \
            else ", ".join(map(str, st.depths))
        lines.append(f"{s + 1:<6}{depths:<22}{', '.join(map(str, st.widths)):<34}{ratios:<18}"
                     f"{', '.join(map(str, st.attention))}")
        stages.append({"depths": list(st.depths), "widths": list(st.widths),
                       "expansion_ratios": list(st.expansion_ratios), "attention": list(st.attention),
                       "max_expansion_ratios": list(st.max_expansion_ratios) if st.max_expansion_ratios else None})
    largest, smallest = space.largest(), space.smallest()
    lines += ["", f"sub-networks  {space.size:,} ({space.size:.3e})",
              f"largest       {largest.short()}", f"smallest      {smallest.short()}",
              f"members       {', '.join(space.members) or 'none'}"]
    result = {"space": space.name, "family": space.family, "source": space.source, "stages": stages,
              "size": space.size, "largest": largest.to_dict(), "smallest": smallest.to_dict(),
              "members": {k: v.to_dict() for k, v in space.members.items()}}
    emit(result, args.json, lines)
    return 0


