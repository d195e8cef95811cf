"""``codemode.lock.json``: what every source offered when it was last reached (ADR 0022).

Like ``uv.lock`` beside ``pyproject.toml``, the lock sits beside ``codemode.toml`` and is
committed. It records each source's discovery (tool names, descriptions, schemas,
annotations, skipped operations) and how the source was reached (command, URL, document —
never a secret), so that ``codemode generate`` and ``generate --check`` rebuild the catalog
without any server or credential: MCP sources come from the lock; OpenAPI documents and
Python modules, which live in the repository, are read directly and their lock entries are
checked like any generated file. ``codemode lock`` refreshes it from the live sources and
``codemode check`` reports how a live source drifted from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codemodekit.bounded_read import UnreadableFile, read_bounded
from codemodekit.catalog.catalog import Catalog
from codemodekit.errors import CodeModeError, SecretUnavailable, SourceUnavailable
from codemodekit.nesting import MAX_NESTING, text_depth_exceeds
from codemodekit.providers.base import Discovery, SkippedTool, ToolSpec, well_formed_discovery
from codemodekit.spec.model import (
    McpHttpSource,
    McpStdioSource,
    OpenApiSource,
    PythonSource,
    SourceSpec,
    Spec,
)

LOCK_FILE = "codemode.lock.json"
LOCK_FORMAT = 1
MAX_LOCK_BYTES = 64 * 1024 * 1024
"""Most bytes read from a lock file (thousands of tools take a few MB)."""
START_TIMEOUT_S = 60.0


class LockError(CodeModeError):
    """The lock is missing, unreadable, or does not match the spec."""


def is_remote(source: SourceSpec) -> bool:
    """True for sources reached over a process or network (MCP): the ones the lock stands in for."""
    return isinstance(source, McpStdioSource | McpHttpSource)


def lock_path(config: Path) -> Path:
    return config.parent / LOCK_FILE


def reached_by(source: SourceSpec, root: Path | None) -> dict[str, Any]:
    """How a source is reached, portable and secret-free: when it changes, its entry is stale."""
    if isinstance(source, McpStdioSource | McpHttpSource) and source.plugin is not None:
        # As written in the plugin (`${PLUGIN_ROOT}` unexpanded): portable, secret-free.
        plugin = source.plugin
        return {
            "kind": "plugin",
            "plugin": plugin.to_json(),
            "path": _portable(plugin.root, root),
            "entry": json.loads(plugin.entry),
        }
    if isinstance(source, McpStdioSource):
        reached: dict[str, Any] = {"kind": "mcp", "command": source.command}
        reached["args"] = list(source.args)
        if source.cwd is not None:  # the same command in another folder: another server
            reached["cwd"] = _portable(source.cwd, root)
        return reached
    if isinstance(source, McpHttpSource):
        return {"kind": "mcp", "url": source.url, "transport": source.transport}
    if isinstance(source, OpenApiSource):
        return {
            "kind": "openapi",
            "document": _portable(source.document, root),
            "base_url": source.base_url,
            "include": list(source.include),
            "exclude": list(source.exclude),
        }
    if isinstance(source, PythonSource):
        reached = {"kind": "python", "module": source.module}
        if source.path:  # the same module name found in other folders: other tools
            reached["path"] = [_portable(folder, root) for folder in source.path]
        return reached
    raise TypeError(f"unknown source type: {type(source).__name__}")


def _portable(path: Path, root: Path | None) -> str:
    """``path`` relative to the spec's folder where it can be (POSIX separators)."""
    if root is not None:
        with contextlib.suppress(ValueError):  # another drive on Windows: keep it absolute
            path = Path(os.path.relpath(path, root))
    return path.as_posix()


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    # `meta` is opaque upstream sideband (never model-visible, never used by codegen): not locked.
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": tool.annotations,
        "provenance": tool.provenance,
        "default_dialect": tool.default_dialect,
        "deprecated": tool.deprecated,
    }


def _tool_from_json(data: Mapping[str, Any]) -> ToolSpec:
    def field(key: str, kinds: type | tuple[type, ...], default: Any) -> Any:
        value = data.get(key, default)
        if not isinstance(value, kinds):
            raise ValueError(f"tool field {key!r} has the wrong type")
        return value

    if not isinstance(data, dict):
        raise ValueError("a tool entry is not an object")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("a tool entry has no name")
    return ToolSpec(
        name=name,
        description=field("description", str, ""),
        input_schema=field("input_schema", (dict, type(None)), None)
        or {"type": "object", "properties": {}},
        output_schema=field("output_schema", (dict, type(None)), None),
        annotations=field("annotations", (dict, type(None)), None) or {},
        provenance=field("provenance", (dict, type(None)), None) or {},
        default_dialect=field("default_dialect", (str, type(None)), None),
        deprecated=field("deprecated", bool, False),
    )


def lock_document(spec: Spec, discoveries: Mapping[str, Discovery]) -> dict[str, Any]:
    sources: dict[str, Any] = {}
    for name in sorted(discoveries):
        discovery = well_formed_discovery(discoveries[name], schemas=False)
        sources[name] = {
            "reached_by": reached_by(spec.sources[name], spec.root),
            "tools": [_tool_json(t) for t in sorted(discovery.tools, key=lambda t: t.name)],
            "skipped": [
                {"name": s.name, "reason": s.reason}
                for s in sorted(discovery.skipped, key=lambda s: s.name)
            ],
        }
    return {"format": LOCK_FORMAT, "generator": "codemodekit", "sources": sources}


def lock_text(spec: Spec, discoveries: Mapping[str, Discovery]) -> str:
    """The lock file's text: deterministic (sources and tools sorted by name), so diffs are
    reviewable. Keys are NOT sorted: a schema's property order is what the declarations show."""
    text = json.dumps(lock_document(spec, discoveries), indent=2, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in a schema: as the catalog holds it
        well_formed = {name: well_formed_discovery(d) for name, d in discoveries.items()}
        text = json.dumps(lock_document(spec, well_formed), indent=2, ensure_ascii=False) + "\n"
    return text


@dataclass(frozen=True, slots=True)
class LockedSource:
    reached_by: Mapping[str, Any]
    discovery: Discovery


MAX_LOCK_NESTING = MAX_NESTING + 8
"""Deepest nesting a lock may hold: a tool schema's bound plus the lock's own levels
(``sources`` → source → ``tools`` → tool → schema)."""


def parse_lock(text: str, *, shown: str = LOCK_FILE) -> dict[str, LockedSource]:
    """The lock's sources; any text that is not a well-formed lock (a wrong type anywhere,
    nesting no real lock has) is ``LockError``, never another exception."""
    try:
        if text_depth_exceeds(text, MAX_LOCK_NESTING):
            # Checked on the text, before a parser recurses through it.
            raise ValueError(f"it nests deeper than {MAX_LOCK_NESTING} levels")
        document = json.loads(text)
        if not isinstance(document, dict) or document.get("format") != LOCK_FORMAT:
            raise ValueError(f"expected format {LOCK_FORMAT}")
        sources = document["sources"]
        if not isinstance(sources, dict):
            raise ValueError("`sources` is not an object")
        out: dict[str, LockedSource] = {}
        for name, entry in sources.items():
            if not isinstance(entry, dict) or not isinstance(entry["reached_by"], dict):
                raise ValueError(f"source {name[:80]!r} is not a lock entry")
            if not isinstance(entry["tools"], list) or not isinstance(entry["skipped"], list):
                raise ValueError(f"source {name[:80]!r} has no tool list")
            tools = tuple(_tool_from_json(t) for t in entry["tools"])
            skipped = tuple(_skipped_from_json(s) for s in entry["skipped"])
            out[name] = LockedSource(entry["reached_by"], Discovery(tools, skipped))
        return out
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, MemoryError) as exc:
        why = str(exc) if isinstance(exc, ValueError | KeyError) else type(exc).__name__
        raise LockError(
            f"{shown} cannot be read ({why[:200]}); recreate it with `codemode lock`"
        ) from None


def _skipped_from_json(data: Any) -> SkippedTool:
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("name"), str)
        or not isinstance(data.get("reason"), str)
    ):
        raise ValueError("a skipped entry needs a string name and reason")
    return SkippedTool(data["name"], data["reason"])


def read_lock_text(path: Path) -> str | None:
    """The text of the lock at ``path`` (a regular file, bounded); ``None`` when there is none."""
    try:
        return read_bounded(path, MAX_LOCK_BYTES).decode("utf-8")
    except UnreadableFile as exc:
        if exc.missing:
            return None
        raise LockError(
            f"{path} {exc.reason}; remove it and recreate it with `codemode lock`"
        ) from None
    except UnicodeDecodeError as exc:
        raise LockError(
            f"{path} cannot be read (not UTF-8: {exc.reason}); recreate it with `codemode lock`"
        ) from None


def read_lock(path: Path) -> dict[str, LockedSource] | None:
    """The lock at ``path``; ``None`` when there is none."""
    text = read_lock_text(path)
    return None if text is None else parse_lock(text, shown=str(path))


def stale(spec: Spec, locked: Mapping[str, LockedSource], names: Iterable[str]) -> dict[str, str]:
    """``{source: why}`` for each of ``names`` whose lock entry cannot stand in for it."""
    out: dict[str, str] = {}
    for name in names:
        entry = locked.get(name)
        if entry is None:
            out[name] = "not in the lock"
        elif dict(entry.reached_by) != reached_by(spec.sources[name], spec.root):
            out[name] = "its configuration changed since the lock was written"
    return out


async def discover(
    spec: Spec, names: Iterable[str], *, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Discovery], dict[str, str]]:
    """Start each named source once, take its discovery, close it: ``(discoveries, errors)``."""
    from codemodekit.providers.factory import build_provider

    names = list(names)
    providers = {
        name: build_provider(
            spec.sources[name], limits=spec.limits, root=spec.root, environ=environ
        )
        for name in names
    }
    errors: dict[str, str] = {}

    async def one(name: str) -> Discovery | None:
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                return await providers[name].start(lambda _discovery: None)
        except (SourceUnavailable, SecretUnavailable) as exc:
            errors[name] = str(exc)
        except TimeoutError:
            errors[name] = f"did not come up within {START_TIMEOUT_S:.0f} s"
        except Exception as exc:  # a provider bug: name the type, never a possibly secret text
            errors[name] = f"failed to start ({type(exc).__name__})"
        return None

    try:
        results = await asyncio.gather(*(one(name) for name in names))
    finally:
        await asyncio.gather(*(p.aclose() for p in providers.values()), return_exceptions=True)
    discoveries = {n: d for n, d in zip(names, results, strict=True) if d is not None}
    return discoveries, errors


@dataclass(frozen=True, slots=True)
class Drift:
    source: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    @property
    def summary(self) -> str:
        """``1 added (ping); 1 removed (pid); 1 changed (echo)``."""
        parts = [
            f"{len(names)} {what} ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})"
            for what, names in (
                ("added", self.added),
                ("removed", self.removed),
                ("changed", self.changed),
            )
            if names
        ]
        return "; ".join(parts)

    def __str__(self) -> str:
        return f"{self.source}: {self.summary}"


def drift(locked: Catalog, live: Catalog, sources: Iterable[str]) -> list[Drift]:
    """How each of ``sources`` differs between two catalogs (normalized, model-visible parts)."""
    out = []
    for source in sources:
        before = {t.name: t.fingerprint() for t in locked.source_tools(source)}
        after = {t.name: t.fingerprint() for t in live.source_tools(source)}
        changed = tuple(sorted(n for n in before.keys() & after.keys() if before[n] != after[n]))
        added = tuple(sorted(after.keys() - before.keys()))
        removed = tuple(sorted(before.keys() - after.keys()))
        if added or removed or changed:
            out.append(Drift(source, added, removed, changed))
    return out


def locked_catalog(locked: Mapping[str, LockedSource], sources: Iterable[str]) -> Catalog:
    names = [s for s in sources if s in locked]
    return Catalog.build({n: locked[n].discovery for n in names}, sources=names)
