"""The catalog that ``generate`` and ``lock`` work from: the lock for MCP sources, the
repository for the rest, live servers only when asked or when the lock cannot stand in."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from codemodekit.catalog.catalog import Catalog
from codemodekit.catalog.lock import (
    LockedSource,
    LockError,
    discover,
    drift,
    is_remote,
    lock_text,
    locked_catalog,
    read_lock,
    read_lock_text,
    stale,
)
from codemodekit.providers.base import Discovery
from codemodekit.safe_write import write_file
from codemodekit.spec.model import Spec


@dataclass(frozen=True)
class Resolved:
    catalog: Catalog
    lock_file: Path
    lock_text: str
    lock_drift: list[str] = field(default_factory=list)
    """Why the lock on disk differs from ``lock_text`` (empty: it is up to date)."""
    down: dict[str, str] = field(default_factory=dict)
    """Sources that had to be reached and could not (only without ``allow_unavailable``)."""
    live: tuple[str, ...] = ()
    """The sources that were connected to."""


def resolve_catalog(
    spec: Spec,
    lock_file: Path,
    *,
    update: bool = False,
    offline: bool = False,
    allow_unavailable: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Resolved:
    """Build the catalog. ``update``: every source live. ``offline``: no MCP source is
    contacted (a missing or stale entry is reported in ``lock_drift``)."""
    locked = read_lock(lock_file)
    names = list(spec.sources)
    remote = [n for n in names if is_remote(spec.sources[n])]
    why_stale = stale(spec, locked or {}, remote)
    if update:
        live = names
    elif offline:
        live = [n for n in names if n not in remote]
    else:
        live = [n for n in names if n not in remote or n in why_stale]
    found, errors = asyncio.run(discover(spec, live, environ=environ)) if live else ({}, {})
    if errors and not allow_unavailable:
        return Resolved(Catalog.build({}), lock_file, "", down=errors, live=tuple(live))
    discoveries: dict[str, Discovery] = {}
    for name in names:
        if name in found:
            discoveries[name] = found[name]
        elif name not in live and locked is not None and name in locked:
            discoveries[name] = locked[name].discovery
    catalog = Catalog.build(discoveries, sources=names)
    # A source that was down keeps its previous entry: a flaky server never erases the lock.
    kept = {n: locked[n].discovery for n in errors if locked is not None and n in locked}
    text = lock_text(spec, {**kept, **discoveries})
    reasons = _lock_drift(spec, locked, lock_file, text, catalog, why_stale if offline else {})
    return Resolved(catalog, lock_file, text, reasons, live=tuple(live))


def _lock_drift(
    spec: Spec,
    locked: Mapping[str, LockedSource] | None,
    lock_file: Path,
    text: str,
    catalog: Catalog,
    why_stale: Mapping[str, str],
) -> list[str]:
    if locked is None:
        return [f"{lock_file.name} does not exist yet"]
    try:
        if read_lock_text(lock_file) == text:
            return []
    except LockError:
        pass
    reasons = [f"{name}: {why}" for name, why in why_stale.items()]
    reasons += [f"{name}: no longer in the spec" for name in locked if name not in spec.sources]
    compared = [n for n in spec.sources if n in locked and n not in why_stale]
    reasons += [str(d) for d in drift(locked_catalog(locked, compared), catalog, compared)]
    return reasons or ["its contents differ (descriptions of skipped operations or format)"]


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` in one step, so an interrupted write never leaves half a lock; never
    through a link (``safe_write``). Raises ``UnsafeTarget`` or ``OSError``."""
    write_file(path, text)
