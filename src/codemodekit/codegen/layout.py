"""Which file declares which tool: normalized, collision-free names and prefix shards.

Source names are preserved exactly in ``tools[...]``, but filenames must be portable:
lowercase ``[a-z0-9-]`` only (case-insensitive file systems), and two names that normalize
alike (``a-b`` and ``a_b``) both get a short hash of their exact name appended, so neither
depends on the other's existence order.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

SHARD_THRESHOLD = 200
"""A source with more tools than this gets prefix shards."""
MAX_SHARD_TOOLS = 100
"""No shard declares more tools than this."""
MIN_SHARD_TOOLS = 5
"""Prefix groups smaller than this are merged into their parent's remainder shard."""
_MAX_PREFIX_DEPTH = 3
_REST = "other"

_SLUG_JUNK = re.compile(r"[^a-z0-9]+")
_SEGMENT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def slug(text: str) -> str:
    """``Deployment API`` → ``deployment-api``; never empty."""
    return _SLUG_JUNK.sub("-", text.lower()).strip("-") or "x"


def _short_hash(text: str, size: int = 6) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:size]


def disambiguate(names: Iterable[str]) -> dict[str, str]:
    """Exact name → filename part, unique; colliding slugs all get ``-<hash>`` suffixes.

    A suffixed part can still meet another name's own slug (``a-b`` and ``a_b`` give
    ``a-b-648fa9``, which is also the slug of a source named so): the parts that meet get
    a longer hash, then the whole one. Every name keeps a part of its own, whatever else
    is there, and no source's declarations overwrite another's."""
    by_slug: dict[str, list[str]] = {}
    for name in sorted(set(names)):
        by_slug.setdefault(slug(name), []).append(name)
    out: dict[str, str] = {}
    for base, group in by_slug.items():
        for name in group:
            out[name] = base if len(group) == 1 else f"{base}-{_short_hash(name)}"
    for size in (12, 64):
        parts = Counter(out.values())
        meeting = [name for name, part in out.items() if parts[part] > 1]
        if not meeting:
            break
        for name in meeting:
            out[name] = f"{slug(name)}-{_short_hash(name, size)}"
    return out


def _segments(name: str) -> list[str]:
    """``issues_listComments`` → ``["issues", "list", "comments"]``."""
    return [s.lower() for s in _SEGMENT.findall(name)] or [name.lower()]


def shard(names: Sequence[str]) -> dict[str, list[str]]:
    """Group tool names by leading name segments into shards of at most ``MAX_SHARD_TOOLS``.

    A prefix group too large is split by its next segment; groups too small are merged
    into a remainder named after their parent (``other`` at the top); a group that cannot
    be split further is cut into numbered chunks. Labels are not yet filename-safe.
    """
    result: dict[str, list[str]] = {}

    def put(label: str, members: list[str]) -> None:
        while label in result:  # a numbered chunk may meet a real prefix such as ``v-1``
            label = f"{label}-{_REST}"
        result[label] = members

    def emit(label: str, members: list[str]) -> None:
        if len(members) <= MAX_SHARD_TOOLS:
            put(label, members)
            return
        for i in range(0, len(members), MAX_SHARD_TOOLS):
            put(f"{label}-{i // MAX_SHARD_TOOLS + 1}", members[i : i + MAX_SHARD_TOOLS])

    def split(prefix: tuple[str, ...], members: list[str]) -> None:
        depth = len(prefix)
        groups: dict[tuple[str, ...], list[str]] = {}
        for name in members:
            segments = _segments(name)
            key = tuple(segments[: depth + 1]) if len(segments) > depth else prefix
            groups.setdefault(key, []).append(name)
        remainder: list[str] = []
        for key, group in sorted(groups.items()):
            if key == prefix or len(group) < MIN_SHARD_TOOLS:
                remainder.extend(group)
            elif len(group) > MAX_SHARD_TOOLS and depth + 1 < _MAX_PREFIX_DEPTH:
                split(key, group)
            else:
                emit("-".join(key), group)
        if remainder:
            emit("-".join(prefix) if prefix else _REST, sorted(remainder))

    split((), sorted(names))
    return dict(sorted(result.items()))


@dataclass(frozen=True, slots=True)
class SourceLayout:
    source: str
    file: str
    """``tools.<source>.d.ts``."""
    shards: Mapping[str, tuple[str, ...]]
    """Shard filename → tool names; empty when the source is small."""


def plan(
    sources: Sequence[str], tools_by_source: Mapping[str, Sequence[str]]
) -> list[SourceLayout]:
    """The per-source files and shards for a catalog."""
    parts = disambiguate(sources)
    layouts: list[SourceLayout] = []
    for source in sources:
        names = list(tools_by_source.get(source, ()))
        base = f"tools.{parts[source]}"
        shards: dict[str, tuple[str, ...]] = {}
        if len(names) > SHARD_THRESHOLD:
            groups = shard(names)
            labels = disambiguate(groups)
            for label, members in groups.items():
                shards[f"{base}.{labels[label]}.d.ts"] = tuple(members)
        layouts.append(SourceLayout(source, base + ".d.ts", dict(sorted(shards.items()))))
    return layouts
