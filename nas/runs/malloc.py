"""glibc malloc settings that keep freed memory in the process between training steps.

PyTorch's CPU tensors come from ``malloc``. glibc serves a large block from a fresh ``mmap`` and
unmaps it at ``free`` (above a threshold that it moves with the sizes it sees), and gives the top of
its heap back to the OS once more than a threshold is free there. A training step allocates and
frees the same hundreds of megabytes of activations and gradients every step, so under those
defaults part of it is unmapped at the end of a step and page-faulted back in, a zeroed page at a
time, in the next; and which blocks fault changes with the order and sizes of the allocations, so
two networks doing the same arithmetic (a sub-network run through the supernet, whose weights are
gathered into fresh tensors every step, and the same network extracted) differ by more than their
arithmetic (issue 16). Taking no block from mmap, never trimming the heap and growing it 64 MiB at a
time brings that to no faults per step once the heap has grown to the step's peak
(``benchmarks/malloc_settings.py`` counts them and times a step under both settings;
``docs/results/malloc-settings.txt`` is a run of it).

The cost is that the process keeps its peak memory until it exits instead of handing freed pages
back. The settings are the process's, so library code never calls :func:`retain_freed_memory`; the
entry points do: the ``nas`` command line at start, and every Ray worker that it starts
(``worker_process_setup_hook``). ``NAS_MALLOC=system`` keeps glibc's defaults. Elsewhere than glibc
(macOS, musl) it does nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

from nas.core.errors import NasError

log = logging.getLogger(__name__)

#: Environment variable that chooses the setting: ``retain`` (default) or ``system``.
MALLOC_ENV = "NAS_MALLOC"
MALLOC_CHOICES = ("retain", "system")

# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -2, -3, -4
#: Setting it switches glibc's moving threshold off (32 MiB: the largest glibc takes on 64-bit).
MMAP_THRESHOLD = 32 << 20
#: Never give the heap's free top back (the largest value mallopt's int takes).
TRIM_THRESHOLD = (1 << 31) - 1
#: Grow the heap by this much beyond a request, so that a step's new peak takes few brk calls.
TOP_PAD = 64 << 20

#: What :func:`retain_freed_memory` sets, by mallopt parameter name.
RETAIN_SETTINGS = {
    "M_MMAP_THRESHOLD": (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
    "M_TRIM_THRESHOLD": (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
    "M_TOP_PAD": (_M_TOP_PAD, TOP_PAD),
    # no block from mmap at all: a block above the threshold (activations of a large batch at 224 px)
    # would otherwise still be mapped and faulted in at every step
    "M_MMAP_MAX": (_M_MMAP_MAX, 0),
}


def _checked(choice: str, given: str) -> str:
    if choice not in MALLOC_CHOICES:
        raise NasError(f"{given} is not a malloc setting; allowed: {', '.join(MALLOC_CHOICES)}")
    return choice


def malloc_choice(environ=os.environ) -> str:
    """``NAS_MALLOC``'s value (default ``retain``); any other value is a :class:`NasError`."""
    raw = environ.get(MALLOC_ENV, "")
    return _checked(raw.strip().lower() or "retain", f"{MALLOC_ENV}={raw!r}")


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version"):  # only glibc has it (and mallopt's parameters as above)
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc


def retain_freed_memory(choice: str | None = None) -> dict[str, int]:
    """Set glibc's malloc to keep freed memory (see the module's docstring), unless ``choice`` (by
    default ``NAS_MALLOC``) is ``system``. Returns the settings applied, by mallopt parameter name:
    empty where nothing was set (``system``, or not glibc). Safe to call more than once."""
    choice = malloc_choice() if choice is None else _checked(choice, repr(choice))
    libc = _glibc() if choice == "retain" else None
    if libc is None:
        return {}
    applied = {}
    for name, (param, value) in RETAIN_SETTINGS.items():
        if libc.mallopt(param, value) == 1:
            applied[name] = value
        else:
            log.warning("glibc refused mallopt %s=%d; freed memory may be returned to the OS", name, value)
    log.debug("malloc settings: %s", applied)
    return applied


#: ``worker_process_setup_hook`` of the Ray workers that ``nas`` starts (Ray imports it by name).
RAY_SETUP_HOOK = f"{__name__}.retain_freed_memory"
