"""Search spaces as files: ``search_configs/spaces/<name>.yaml`` (or any path), read with the rules
of their family (:func:`nas.core.families.get_family`). The space itself is :class:`nas.core.space.SearchSpace`.
"""

from __future__ import annotations

import os
from pathlib import Path

from nas.config.folder import available_spaces, config_root
from nas.core.arch import ArchConfig
from nas.core.errors import NasError
from nas.core.families import family_rules, get_family
from nas.core.space import SearchSpace
from nas.core.typed_yaml import names_a_file, read_yaml


def recorded_source(space: SearchSpace) -> str:
    """Where the space was read from, as a run records it: a shipped space relative to the
    repository (``search_configs/spaces/x.yaml``), so no machine's path lands in a run's files; a
    user's space file as given."""

    root = config_root().resolve()
    try:
        return str(Path(space.source).resolve().relative_to(root.parent))
    except ValueError:
        return space.source


def load_space(name_or_path: str | os.PathLike) -> SearchSpace:
    """Load a space by name (a file in ``search_configs/spaces/``) or by path."""
    if isinstance(name_or_path, SearchSpace):
        return name_or_path
    text = str(name_or_path)
    path = Path(text)
    if names_a_file(text):
        return SearchSpace.from_file(path, family_rules)
    candidate = config_root() / "spaces" / f"{text}.yaml"
    if not candidate.exists():
        raise NasError(
            f"unknown search space {text!r}; available: {', '.join(available_spaces())} (or give a YAML path)"
        )
    return SearchSpace.from_file(candidate, family_rules)


def find_space(arch_spec: str, space_name: str | None = None) -> SearchSpace:
    """The space an architecture is priced and validated in: ``space_name`` when given; for a named
    member, the space that names it; for an arch YAML, the space of the search run it was written
    by (its folder's ``config.yaml``), else the first space of its family that contains it (the
    family's main space first)."""
    if space_name:
        return load_space(space_name)
    path = Path(arch_spec)
    if names_a_file(arch_spec):
        arch = ArchConfig.load(path)
        get_family(arch.family)  # an unknown family is named as such
        run_config = path.parent / "config.yaml"
        if run_config.exists():
            saved = read_yaml(run_config, "run config") or {}
            if isinstance(saved, dict) and saved.get("space_file") and Path(saved["space_file"]).exists():
                return load_space(saved["space_file"])  # a space file of the user's
            if isinstance(saved, dict) and saved.get("space") in available_spaces():
                return load_space(saved["space"])
        names = [arch.family] + [n for n in available_spaces() if n != arch.family]
        for name in names:
            space = load_space(name)
            if space.family == arch.family and space.contains(arch):
                return space
        load_space(arch.family).validate(arch, where=str(path))  # raises the main space's reason
        return load_space(arch.family)
    for name in available_spaces():
        space = load_space(name)
        if arch_spec in space.members:
            return space
    members = sorted({m for n in available_spaces() for m in load_space(n).members})
    raise NasError(f"{arch_spec!r} is not a named member of any space ({', '.join(members)}) nor an arch YAML file")
