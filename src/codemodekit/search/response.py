"""What ``search_tools`` answers: hits, the response and its renderings, and the bounded
TypeScript of a hit (split from ``search.py``, which ranks). See docs/adr/0012."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from codemodekit.catalog.catalog import ToolDefinition

Detail = Literal["summary", "typescript"]


@dataclass(frozen=True, slots=True)
class SearchHit:
    address: str
    """The exact callable expression, e.g. ``tools.github.pulls_list``."""
    source: str
    name: str
    description: str
    """Bounded (``DESCRIPTION_CHARS``), with ``…`` where cut."""
    deprecated: bool = False
    read_only: bool = False
    typescript: str | None = None
    """``detail="typescript"``: the tool's input declarations and signature, then its output
    declarations (``output_cut`` when those were cut to bound the response)."""
    output_cut: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "address": self.address,
            "source": self.source,
            "name": self.name,
            "description": self.description,
        }
        if self.deprecated:
            out["deprecated"] = True
        if self.read_only:
            out["readOnly"] = True
        if self.typescript is not None:
            out["typescript"] = self.typescript
        if self.output_cut:
            out["outputTypeCut"] = True
        return out


@dataclass(frozen=True, slots=True)
class SearchResponse:
    query: str
    detail: Detail
    source: str | None
    revision: str
    """The catalog revision searched: a later ``TOOL_NOT_FOUND`` can be traced to stale discovery."""
    hits: tuple[SearchHit, ...]
    matched: int
    """Tools that matched the query (after the source filter); ``len(hits)`` of them returned."""
    total: int
    """Model-visible tools in the catalog."""
    omitted: int = 0
    """Hits within ``limit`` dropped to keep the response under its byte cap."""
    note: str | None = None
    result_contract: str | None = None
    """``detail="typescript"``: the shared ``ToolResult`` contract, once per response."""
    weak: bool = False
    """No tool matches the query well: the best hit matches fewer than half of its words
    (the note says so and names the closest tools)."""

    @property
    def counts(self) -> str:
        return f"{len(self.hits)} of {self.matched} matching tools (catalog: {self.total} tools)"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query,
            "detail": self.detail,
            "revision": self.revision,
            "counts": {"returned": len(self.hits), "matched": self.matched, "catalog": self.total},
            "summary": self.counts,
            "tools": [hit.to_json() for hit in self.hits],
        }
        if self.source is not None:
            out["source"] = self.source
        if self.omitted:
            out["omitted"] = self.omitted
        if self.weak:
            out["weak"] = True
        if self.note is not None:
            out["note"] = self.note
        if self.result_contract is not None:
            out["resultContract"] = self.result_contract
        return out

    def to_text(self) -> str:
        """Compact rendering for a model: counts, one line (or declaration) per tool, notes."""
        lines = [f"{self.counts}; revision {self.revision}"]
        if self.note:
            lines.append(f"note: {self.note}")
        for hit in self.hits:
            flags = "".join(
                (" [deprecated]" if hit.deprecated else "", " [read-only]" if hit.read_only else "")
            )
            lines.append(f"- {hit.address}{flags}: {hit.description}")
            if hit.typescript is not None:
                lines.append(hit.typescript.rstrip())
        if self.omitted:
            lines.append(f"({self.omitted} more hits omitted to bound the response size)")
        if self.result_contract is not None:
            lines.append("")
            lines.append(self.result_contract.rstrip())
        return "\n".join(lines)


def json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def output_marker(tool: ToolDefinition, shown: int, total: int) -> str:
    ask = json.dumps({"query": tool.key, "detail": "typescript", "limit": 1})
    what = (
        f"output type cut here: {shown} of {total} characters shown"
        if shown
        else f"output type ({total} characters) left out"
    )
    return (
        f"// … {what} to bound this response; search_tools {ask} shows the most one response "
        f"holds, the generated tools.{tool.source}.d.ts has it whole\n"
    )


def cut_output(tool: ToolDefinition, output: str, budget: int) -> str:
    """``output`` cut at a line boundary to at most ``budget`` JSON bytes, marker included."""
    budget -= json_size(output_marker(tool, len(output), len(output))) - 2
    kept: list[str] = []
    used = 0
    for line in output.splitlines(keepends=True):
        cost = json_size(line) - 2
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    return "".join(kept) + output_marker(tool, sum(map(len, kept)), len(output))
