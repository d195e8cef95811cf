"""Mapping between MCP wire objects and the provider contract (``ToolSpec``, ``ToolOutput``).

Pure functions, plus the paginated ``tools/list`` walk that feeds them. ``providers/mcp.py``
calls them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp import Client
from pydantic import ValidationError

from codemodekit.errors import SourceUnavailable
from codemodekit.providers.base import (
    Discovery,
    JsonObject,
    ResultTooLarge,
    SkippedTool,
    ToolOutput,
    ToolSpec,
)
from codemodekit.providers.mcp.transport import ListingTap
from codemodekit.scrub import NO_SECRETS, Scrubber

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"

# MCP 2025-11-25 made JSON Schema 2020-12 the default dialect for tool schemas; earlier
# revisions never said, and their servers overwhelmingly emit draft-07.
_DIALECT_2020_12_SINCE = "2025-11-25"

MAX_LIST_PAGES = 100
"""A server whose ``tools/list`` pagination does not end within this many pages is broken."""
MAX_ERROR_CHARS = 2_000
_TASKS_REQUIRED = (
    'requires task-augmented execution (execution.taskSupport = "required"), '
    "which code mode does not use: every call is one request and one reply"
)
MAX_PROGRESS_CHARS = 200

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_TOOL_FIELDS = {"name", "description", "inputSchema", "outputSchema", "annotations", "_meta"}


def default_dialect(protocol_version: str) -> str:
    # Protocol versions are ISO dates, so string order is date order.
    return DRAFT_2020_12 if protocol_version >= _DIALECT_2020_12_SINCE else DRAFT_07


def tool_spec(
    tool: types.Tool, *, protocol_version: str, provenance: Mapping[str, Any]
) -> ToolSpec:
    """One listed tool, schemas passed through untouched (the catalog normalizes them)."""
    wire = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    annotations: dict[str, Any] = dict(wire.get("annotations") or {})
    if "title" not in annotations and isinstance(wire.get("title"), str):
        annotations["title"] = wire["title"]
    extra = {key: value for key, value in wire.items() if key not in _TOOL_FIELDS}
    tool_provenance = dict(provenance)
    if extra:
        # Lossless: icons, title, execution and unknown fields stay host-side.
        tool_provenance["tool"] = extra
    return ToolSpec(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        annotations=annotations,
        meta=dict(wire.get("_meta") or {}),
        provenance=tool_provenance,
        default_dialect=default_dialect(protocol_version),
    )


async def list_all_tools(
    client: Client,
    *,
    protocol_version: str,
    provenance: Mapping[str, Any],
    tap: ListingTap | None = None,
) -> Discovery:
    """Every page of ``tools/list``; a name listed twice keeps its first definition.

    When the SDK rejects a page because one tool is malformed for the negotiated protocol,
    the raw page from ``tap`` is read tool by tool instead: the others stay usable.
    """
    tools: list[ToolSpec] = []
    skipped: list[SkippedTool] = []
    seen: set[str] = set()
    cursors: set[str] = set()
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        try:
            page = await client.list_tools(cursor=cursor)
            page_tools, next_cursor = list(page.tools), page.next_cursor
        except ValidationError:
            raw = tap.last_result if tap is not None else None
            if raw is None:
                raise
            page_tools, next_cursor = _lenient_page(raw, skipped)
        for tool in page_tools:
            if tool.name in seen:
                reason = "listed twice by the server; the first definition is kept"
                skipped.append(SkippedTool(tool.name, reason))
                continue
            seen.add(tool.name)
            if tool.execution is not None and tool.execution.task_support == "required":
                skipped.append(SkippedTool(tool.name, _TASKS_REQUIRED))
                continue
            tools.append(tool_spec(tool, protocol_version=protocol_version, provenance=provenance))
        cursor = next_cursor
        if cursor is None:
            return Discovery(tools=tuple(tools), skipped=tuple(skipped))
        if cursor in cursors:
            raise SourceUnavailable("tools/list pagination repeated a cursor")
        cursors.add(cursor)
    raise SourceUnavailable(f"tools/list pagination did not end within {MAX_LIST_PAGES} pages")


def _lenient_page(
    raw: Mapping[str, Any], skipped: list[SkippedTool]
) -> tuple[list[types.Tool], str | None]:
    """Parse one raw ``tools/list`` page tool by tool; unusable entries go to ``skipped``."""
    tools: list[types.Tool] = []
    entries = raw.get("tools")
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        try:
            tools.append(types.Tool.model_validate(entry))
        except ValidationError as exc:
            name = entry.get("name") if isinstance(entry, dict) else None
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "tool"
            reason = sanitize(f"invalid tool definition at {where}: {first['msg']}", 300)
            skipped.append(SkippedTool(name if isinstance(name, str) else f"#{index}", reason))
    cursor = raw.get("nextCursor")
    return tools, cursor if isinstance(cursor, str) else None


def _block(block: Any) -> JsonObject:
    wire: dict[str, Any] = block.model_dump(by_alias=True, mode="json", exclude_none=True)
    kind = wire.get("type")
    if kind == "text":
        return {"type": "text", "text": wire.get("text", "")}
    if kind in ("image", "audio"):
        return {"type": kind, "mimeType": wire.get("mimeType", ""), "data": wire.get("data", "")}
    if kind == "resource_link":
        # Everything but sideband: uri, name, title, description, mimeType, size...
        return {
            key: value
            for key, value in wire.items()
            if key not in ("_meta", "annotations", "icons")
        }
    if kind == "resource":
        resource = wire.get("resource") or {}
        out: dict[str, Any] = {"uri": resource.get("uri", "")}
        if "mimeType" in resource:
            out["mimeType"] = resource["mimeType"]
        if "text" in resource:
            out["text"] = resource["text"]
        elif "blob" in resource:
            out["blob"] = resource["blob"]
        return {"type": "resource", "resource": out}
    # A block type from a later protocol revision: keep it, minus sideband.
    return {key: value for key, value in wire.items() if key not in ("_meta", "annotations")}


def tool_output(
    result: types.CallToolResult, *, max_bytes: int, scrub: Scrubber = NO_SECRETS
) -> ToolOutput:
    """The computation-facing result, secrets masked; ``ResultTooLarge`` past ``max_bytes``."""
    content = tuple(scrub.value(_block(block)) for block in result.content)
    structured = scrub.value(result.structured_content)
    size = len(
        json.dumps([content, structured], ensure_ascii=False, separators=(",", ":")).encode()
    )
    if size > max_bytes:
        raise ResultTooLarge(max_bytes)
    return ToolOutput(content=content, structured_content=structured)


def error_text(result: types.CallToolResult, *, redact: Scrubber = NO_SECRETS) -> str:
    """The upstream refusal as a bounded, single-line-safe message."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    message = "\n".join(text for text in texts if text.strip())
    if not message and result.structured_content is not None:
        # Scrubbed inside ``sanitize`` before it is cut, like every other text.
        message = json.dumps(result.structured_content, ensure_ascii=False)
    return sanitize(
        message or "the tool reported an error without a message", MAX_ERROR_CHARS, redact
    )


def sanitize(text: str, limit: int, redact: Scrubber = NO_SECRETS) -> str:
    """Control characters and escape sequences removed, then secrets masked (in that
    order: removing them could join the pieces of a secret split by them), then bounded
    with a marker."""
    text = _CONTROL.sub("", _ANSI.sub("", text))
    text = redact(text)
    if len(text) > limit:
        text = text[: limit - 14] + " …(truncated)"
    return text


def progress_text(
    progress: float, total: float | None, message: str | None, redact: Scrubber
) -> str:
    amount = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
    text = f"{amount} {message}" if message else amount
    return sanitize(text.replace("\n", " "), MAX_PROGRESS_CHARS, redact)
