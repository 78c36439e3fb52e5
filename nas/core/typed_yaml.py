"""YAML into typed, frozen dataclasses that reject unknown keys.

Every config in the project (spaces, architectures, recipes, run configs in :mod:`nas.runs.config`)
goes through :func:`read_yaml` and :func:`from_mapping`, so a malformed file, an unknown key, a
value of the wrong type or out of its range (:func:`setting`) always gives one
:class:`~nas.core.errors.NasError` line naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from nas.core.errors import NasError

#: ``setting(REQUIRED, ...)``: a field with rules but no default.
REQUIRED = dataclasses.MISSING


def setting(
    default: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    exclusive: str = "",
    choices: tuple | None = None,
    words: tuple[str, ...] = (),
    free: bool = False,
    help: str = "",
) -> Any:
    """A dataclass field with its valid values, checked by :func:`from_mapping` and
    :func:`check_settings`: a range (``low``/``high``, inclusive unless ``exclusive`` says ``"low"``, ``"high"``
    or ``"both"``) or ``choices``.
    ``words`` are names an integer field (typed ``int | str``) also accepts, such as ``"auto"``.
    ``free`` marks a setting that does not change a run's result (threads, logging, caching), so a
    resumed run may change it; every other field must match (:func:`differences`). ``help`` says what
    the field means, for a command-line option's help and the reference pages."""
    meta = {
        "low": low,
        "high": high,
        "low_open": exclusive in ("low", "both"),
        "high_open": exclusive in ("high", "both"),
        "choices": choices,
        "words": words,
        "free": free,
        "help": help,
    }
    return dataclasses.field(default=default, metadata=meta)  # default MISSING: required


def value_problem(value: Any, meta: Mapping[str, Any]) -> str | None:
    """What is wrong with ``value`` under a :func:`setting`'s rules (``None`` when it is fine)."""
    if meta.get("choices") is not None and value not in meta["choices"]:
        return f"must be one of {', '.join(map(str, meta['choices']))}, got {value!r}"
    if meta.get("words"):
        return _word_or_int_problem(value, meta)
    low, high = meta.get("low"), meta.get("high")
    if (low is None and high is None) or value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    below = low is not None and (value <= low if meta.get("low_open") else value < low)
    above = high is not None and (value >= high if meta.get("high_open") else value > high)
    if not (below or above):
        return None
    if low is not None and high is not None:
        left, right = ("(" if meta.get("low_open") else "["), (")" if meta.get("high_open") else "]")
        return f"must be in {left}{low:g}, {high:g}{right}, got {value:g}"
    if low is not None:
        return f"must be {'above' if meta.get('low_open') else 'at least'} {low:g}, got {value:g}"
    return f"must be {'below' if meta.get('high_open') else 'at most'} {high:g}, got {value:g}"


def _word_or_int_problem(value: Any, meta: Mapping[str, Any]) -> str | None:
    """One message for a field that takes one of its ``words`` or an integer in its range, naming both."""
    if value in meta["words"]:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value_problem(value, {**meta, "words": ()}) is None:
        return None
    bounds = []
    if meta.get("low") is not None:
        bounds.append(f"{'above' if meta.get('low_open') else 'at least'} {meta['low']:g}")
    if meta.get("high") is not None:
        bounds.append(f"{'below' if meta.get('high_open') else 'at most'} {meta['high']:g}")
    integer = "an integer" + (" of " + " and ".join(bounds) if bounds else "")
    return f"must be {' or '.join(meta['words'])} or {integer}, got {value!r}"


def check_settings(obj: Any, name_of: Callable[[str], str], only: set[str] | None = None) -> None:
    """Check every field of the dataclass ``obj`` (or those in ``only``) against its
    :func:`setting` rules; the first problem is a :class:`NasError` naming the field as
    ``name_of(field)`` (a flag, or ``file: field``)."""
    for f in dataclasses.fields(obj):
        if only is not None and f.name not in only:
            continue
        problem = value_problem(getattr(obj, f.name), f.metadata)
        if problem:
            raise NasError(f"{name_of(f.name)} {problem}")


def differences(saved: Any, now: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """The fields in which two dataclasses of one type differ, nested dataclasses included, leaving
    out those marked ``free``: what forbids resuming one run with the other's settings."""
    out = []
    for f in dataclasses.fields(now):
        if f.metadata.get("free"):
            continue
        a, b = getattr(saved, f.name), getattr(now, f.name)
        if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
            out += differences(a, b, f"{prefix}{f.name}.")
        elif isinstance(a, dict) and isinstance(b, dict) and a != b:  # options: name the key that differs
            out += [(f"{prefix}{f.name}.{k}", a.get(k), b.get(k)) for k in {**a, **b} if a.get(k) != b.get(k)]
        elif a != b:
            out.append((prefix + f.name, a, b))
    return out


def names_a_file(name_or_path: str | os.PathLike) -> bool:
    """Whether an argument that is a name or a path (a space, a recipe, an architecture) is a path: it ends
    in ``.yaml``/``.yml``, holds a path separator, or is an existing file. One rule for every such argument."""
    text = str(name_or_path)
    path = Path(text)
    return path.suffix in (".yaml", ".yml") or os.sep in text or path.is_file()


def read_yaml(path: str | os.PathLike, what: str = "file") -> Any:
    """Parse a YAML file; any problem becomes a one-line :class:`NasError` naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NasError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise NasError(f"{path}: is a directory, expected a YAML {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NasError(f"{path}: cannot read {what}: {exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise NasError(f"{path}: malformed YAML{where}: {problem}") from None


def dump_yaml(data: Any) -> str:
    """YAML text with keys in insertion order and short lists on one line."""

    class _Dumper(yaml.SafeDumper):
        pass

    def _represent_list(dumper: yaml.SafeDumper, value: list) -> yaml.Node:
        flow = all(not isinstance(v, (list, tuple, dict)) for v in value)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)

    _Dumper.add_representer(list, _represent_list)
    _Dumper.add_representer(tuple, _represent_list)
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is None:
        return getattr(tp, "__name__", str(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    args = typing.get_args(tp)
    if origin is tuple:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"mapping of {_type_name(args[1])}"
    return str(tp)


def convert(value: Any, tp: Any, where: str) -> Any:
    """Convert a parsed YAML value to type ``tp``; ``where`` names the field in errors."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return convert(value, arg, where)
            except NasError as exc:
                errors.append(str(exc))
        raise NasError(errors[0] if len(errors) == 1 else f"{where}: expected {_type_name(tp)}, got {value!r}")
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise NasError(f"{where}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise NasError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(convert(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(args, value)))
    if origin is dict:
        key_tp, val_tp = typing.get_args(tp)
        if not isinstance(value, Mapping):
            raise NasError(f"{where}: expected a mapping, got {value!r}")
        return {convert(k, key_tp, where): convert(v, val_tp, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return from_mapping(tp, value, where)
    if tp is bool:
        if not isinstance(value, bool):
            raise NasError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise NasError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NasError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise NasError(f"{where}: expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported config type {tp!r} at {where}")


def from_mapping(cls: type, data: Any, where: str) -> Any:
    """Build the frozen dataclass ``cls`` from a mapping, rejecting unknown and missing keys."""
    if not isinstance(data, Mapping):
        raise NasError(
            f"{where}: expected a mapping with keys {', '.join(f.name for f in dataclasses.fields(cls))}; "
            f"got {type(data).__name__}"
        )
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise NasError(f"{where}: unknown key {unknown[0]!r}; allowed keys: {', '.join(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, field in fields.items():
        sub = f"{where}.{name}" if where else name
        if name in data:
            if field.metadata.get("words"):  # one message naming the words and the range, whatever the type
                problem = value_problem(data[name], field.metadata)
                if problem:
                    raise NasError(f"{sub} {problem}")
            kwargs[name] = convert(data[name], hints[name], sub)
            problem = value_problem(kwargs[name], field.metadata)
            if problem:
                raise NasError(f"{sub} {problem}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise NasError(f"{where}: missing key {name!r}")
    return cls(**kwargs)
