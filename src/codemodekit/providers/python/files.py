"""The files Python would read to import a tools module, checked before it reads them.

Python's import machinery opens a module's file and reads it whole: a ``tools.py`` that is
a FIFO blocks the process forever, one that links to ``/dev/zero`` ends in a MemoryError,
and an import root that is a FIFO is opened by the zip importer. ``unsafe_import`` finds
the module the way the import system's path finder would (without executing anything:
parent packages are located, not imported) and checks, with ``stat`` only, that each file
on the way (every package ``__init__``, the module, their cached bytecode) is a regular
file of sane size, and each import root a directory or a regular file.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import stat
import sys
from collections.abc import Iterable

from codemodekit.bounded_read import describe_mode

MAX_MODULE_FILE_BYTES = 32 * 1024 * 1024
"""Largest Python source or bytecode file imported as (part of) a tools module."""
_SOURCE_SUFFIXES = (*importlib.machinery.SOURCE_SUFFIXES, *importlib.machinery.BYTECODE_SUFFIXES)


def _unsafe_file(path: str, *, bounded: bool) -> str | None:
    try:
        info = os.stat(path)  # follows links: what Python would open
    except OSError:
        return None  # missing or unreadable: the import reports it
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is {describe_mode(info.st_mode)}, not a regular file"
    if bounded and info.st_size > MAX_MODULE_FILE_BYTES:
        return f"{path} is {info.st_size} bytes, over the {MAX_MODULE_FILE_BYTES} byte limit"
    return None


def _unsafe_root(path: str) -> str | None:
    try:
        info = os.stat(path)
    except OSError:
        return None  # a missing root is skipped by Python too
    if stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
        return None
    return f"import root {path} is {describe_mode(info.st_mode)}, not a directory"


def _unsafe_spec(spec: importlib.machinery.ModuleSpec) -> str | None:
    origin = spec.origin
    if origin is None and spec.submodule_search_locations is not None:
        # A namespace package: perhaps only because its __init__ is not a regular file.
        return _hidden("__init__", spec.submodule_search_locations)
    if not spec.has_location or origin is None:
        return None  # built in or frozen: no file
    bounded = origin.endswith(_SOURCE_SUFFIXES)
    problem = _unsafe_file(origin, bounded=bounded)
    if problem is not None or not origin.endswith(tuple(importlib.machinery.SOURCE_SUFFIXES)):
        return problem
    try:
        cached = importlib.util.cache_from_source(origin)
    except (NotImplementedError, ValueError):
        return None
    return _unsafe_file(cached, bounded=True)


def _hidden(name: str, search: Iterable[str]) -> str | None:
    """A non-regular file where the module ``name`` would be (the finder ignores it)."""
    suffixes = (*importlib.machinery.all_suffixes(), f"{os.sep}__init__.py")
    for root in search:
        if not isinstance(root, str) or not root:
            continue
        for suffix in suffixes:
            problem = _unsafe_file(os.path.join(root, name + suffix), bounded=False)
            if problem is not None:
                return problem
    return None


def unsafe_roots(roots: Iterable[str]) -> str | None:
    """Why one of ``roots`` must not join ``sys.path``, or None."""
    for root in roots:
        problem = _unsafe_root(root)
        if problem is not None:
            return problem
    return None


def unsafe_import(module: str) -> str | None:
    """Why importing ``module`` from the current ``sys.path`` is refused, or None."""
    search: list[str] | None = None
    parts = module.split(".")
    for index in range(len(parts)):
        name = ".".join(parts[: index + 1])
        loaded = sys.modules.get(name)
        if loaded is not None:
            spec = getattr(loaded, "__spec__", None)
        else:
            try:
                spec = importlib.machinery.PathFinder.find_spec(name, search)
            except (ImportError, OSError, ValueError):
                return None  # the import itself reports a module it cannot find
            if spec is None:
                # The path finder skips what is not a regular file: say what is there.
                return _hidden(parts[index], search if search is not None else sys.path)
            problem = _unsafe_spec(spec)
            if problem is not None:
                return problem
        locations = getattr(spec, "submodule_search_locations", None) if spec else None
        if locations is None:
            return None
        search = list(locations)
    return None


__all__ = ["MAX_MODULE_FILE_BYTES", "unsafe_import", "unsafe_roots"]
