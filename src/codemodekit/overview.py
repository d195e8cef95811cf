"""What an agent is told about the sources when it connects (issue 20, docs/adr/0031).

``CodeMode.sources_overview()`` gives one ``SourceOverview`` per source (name, one-line
description, tool counts, status); ``overview_text`` renders them for the MCP server's
``instructions``. The text names no catalog revision and no tool, lists sources in the
spec's order and is bounded (``MAX_SOURCES_LISTED`` sources, ``DESCRIPTION_CHARS`` each),
so the same spec with the same sources up gives the same text: clients cache prompts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from codemodekit.catalog.catalog import accessor

MAX_SOURCES_LISTED = 30
DESCRIPTION_CHARS = 160


@dataclass(frozen=True, slots=True)
class SourceOverview:
    name: str
    """The namespace: ``tools.<name>``."""
    kind: str
    description: str
    """``codemode.toml``'s ``description``, else the upstream's own; may be empty."""
    tools: int
    """Tools a run can call."""
    listed: int
    """Tools the source lists (``tools`` of them callable; the rest have unsupported schemas)."""
    status: str
    """The source's health status (``ok``, ``degraded``, ``connecting``, ``unavailable``…)."""

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "tools": self.tools,
            "listed": self.listed,
            "status": self.status,
        }


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _counts(source: SourceOverview) -> str:
    if source.listed == 0 and source.status in ("connecting", "unavailable", "closed"):
        return source.status
    if source.tools == source.listed:
        return f"{source.tools} tool{'' if source.tools == 1 else 's'}"
    return f"{source.tools} of {source.listed} tools available"


def overview_line(source: SourceOverview) -> str:
    """``- tools.github: GitHub REST API (1223 tools)``."""
    described = _cut(source.description, DESCRIPTION_CHARS)
    head = f"- tools{accessor(source.name)}"
    return (
        f"{head}: {described} ({_counts(source)})" if described else f"{head} ({_counts(source)})"
    )


def overview_text(sources: Iterable[SourceOverview]) -> str:
    """The sources as lines for the server's instructions (empty when there are none)."""
    listed = list(sources)
    if not listed:
        return ""
    lines = ["Tool sources (call as `await tools.<source>.<tool>({...})`):"]
    lines += [overview_line(s) for s in listed[:MAX_SOURCES_LISTED]]
    if len(listed) > MAX_SOURCES_LISTED:
        lines.append(
            f"- and {len(listed) - MAX_SOURCES_LISTED} more sources "
            "(search_tools finds their tools)"
        )
    return "\n".join(lines)


__all__ = ["SourceOverview", "overview_line", "overview_text"]
