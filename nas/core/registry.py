"""One registry for what the engine looks up by name and other packages may add: model families
(:mod:`nas.core.families`) and search strategies (:mod:`nas.search.strategy`).

Names come from three places: objects registered in this process, built-in modules (name -> module,
imported on first use) and an entry-point group that installed packages declare theirs in (loaded on
first use). Listing the names loads nothing. Like timm's model registry, a registry is filled once and
then only read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from nas.core.errors import NasError

T = TypeVar("T")


class LazyRegistry(Generic[T]):
    """Objects of one kind by name, loaded the first time they are asked for.

    ``accepts(obj)`` says whether an object is of the kind (``register`` refuses others with a
    ``TypeError`` from ``refuse(obj)``), and an object is known by its ``name``; ``what`` names the kind
    in messages (``family``, ``search strategy``), ``unknown`` is the message for a name nobody declares
    (``{name}`` and ``{names}`` filled in). An entry point names an object of the kind, a class of it
    (instantiated once), or a module that registers its object when imported; so does a built-in module."""

    def __init__(
        self,
        what: str,
        group: str,
        accepts: Callable[[Any], bool],
        refuse: Callable[[Any], str],
        unknown: str,
        builtin: Mapping[str, str] | None = None,
    ):
        self.what, self.group, self.unknown = what, group, unknown
        self._accepts, self._refuse = accepts, refuse
        self._builtin = dict(builtin or {})
        self._objects: dict[str, T] = {}

    def register(self, obj: T) -> T:
        """Make ``obj`` known by its name (a name registered again is replaced, so a module may be re-imported)."""
        if not self._accepts(obj):
            raise TypeError(self._refuse(obj))
        self._objects[obj.name] = obj
        return obj

    def declared(self) -> dict[str, EntryPoint]:
        """The entry points of the installed packages, by name (not loaded)."""
        return {entry.name: entry for entry in entry_points(group=self.group)}

    def names(self) -> list[str]:
        """Every name: registered, built in and declared, sorted (nothing is loaded)."""
        return sorted({*self._objects, *self._builtin, *self.declared()})

    def get(self, name: str) -> T:
        """The object ``name``, loaded on first use; an unknown one is a :class:`NasError` (``unknown``)."""
        if name not in self._objects:
            if name in self._builtin:
                importlib.import_module(self._builtin[name])
            elif (entry := self.declared().get(name)) is not None:
                self._load(entry)
        try:
            return self._objects[name]
        except KeyError:
            raise NasError(self.unknown.format(name=repr(name), names=", ".join(self.names()))) from None

    def _load(self, entry: EntryPoint) -> None:
        try:
            loaded: Any = entry.load()
        except Exception as exc:  # a broken plug-in is one line, not a traceback from inside it
            raise NasError(f"{self.what} {entry.name!r} ({entry.value}) could not be loaded: {exc}") from None
        if isinstance(loaded, type):
            loaded = loaded()
        if self._accepts(loaded):
            self.register(loaded)
        if entry.name not in self._objects:  # a module that registered nothing, or an object of another name
            raise NasError(
                f"entry point {entry.name} = {entry.value!r} in group {self.group} gave no {self.what} named "
                f"{entry.name!r}: name the object, its class, or a module that registers it"
            )
