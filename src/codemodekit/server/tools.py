"""The Code Mode MCP adapter: ``run_typescript`` and ``search_tools`` on a consumer's server.

``register_code_mode_tools(server, code_mode)`` adds the two tools to an ``mcp`` server the
consumer owns (``mcp.server.mcpserver.MCPServer`` or the low-level ``mcp.server.Server``);
the consumer's own tools stay beside them and the server's lifecycle stays the consumer's.
``codemodekit.server.hosting`` hosts it over stdio or Streamable HTTP (``codemode serve``).

Results (see docs/adr/0013):

- success: one text block with the returned value as JSON (plus one with console output
  when there is any); ``structuredContent`` is ``RunResult.to_json()``
  (``{"ok": true, "value", "logs", "execution_id", "tool_calls", "catalog_revision"}``).
- failure: ``isError`` with a concise diagnostic text (code, message, ``line:column``, the
  offending source line and a caret) and the same JSON with a bounded ``diagnostic``.

Progress is sent only when the request carries a progress token: the value is a counter
that only grows, there is never a total, and events are bounded in count
(``Limits.progress_events``), rate (``PROGRESS_PER_SECOND``) and message size.
A client's ``notifications/cancelled`` makes the SDK cancel the handler task; the
cancellation reaches ``CodeMode.run``, which cancels the sandbox and every tool call.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from codemodekit.catalog.catalog import accessor
from codemodekit.errors import Diagnostic, ErrorCode, has_surrogates, well_formed
from codemodekit.limits import Limits
from codemodekit.nesting import NESTING_HINT, depth_exceeds
from codemodekit.observe.tracing import incoming_context
from codemodekit.overview import MAX_SOURCES_LISTED, overview_text
from codemodekit.search.search import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, SearchError
from codemodekit.server.media import split_media

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from codemodekit.run import CodeMode, ProgressEvent, RunResult

log = logging.getLogger("codemodekit.server")

RUN_TOOL = "run_typescript"
SEARCH_TOOL = "search_tools"
PROGRESS_PER_SECOND = 10
PROGRESS_MESSAGE_BYTES = 1024
DIAGNOSTIC_MESSAGE_CHARS = 2000
DIAGNOSTIC_DETAIL_CHARS = 500
SOURCE_LINE_CHARS = 160
LOG_LINES_IN_TEXT = 10
LOG_LINE_CHARS = 200

CODE_DESCRIPTION = (
    "TypeScript: the body of an async function. Use await and an explicit `return`; "
    "call tools as `await tools.<source>.<tool>({...})`."
)


def sources_line(names: Sequence[str]) -> str:
    """``Sources: `tools.github`, `tools["deploy-api"]`.`` (bounded; names only, so the
    description stays the same while the catalog changes)."""
    if not names:
        return ""
    shown = ", ".join(f"`tools{accessor(n)}`" for n in names[:MAX_SOURCES_LISTED])
    more = len(names) - MAX_SOURCES_LISTED
    return f"Sources: {shown}" + (f" and {more} more" if more > 0 else "") + ".\n"


def run_description(limits: Limits, *, search: bool = True, sources: Sequence[str] = ()) -> str:
    """The ``run_typescript`` description: the runtime rules, compactly, and the sources'
    names; never the catalog (its tools change while the server runs)."""
    where = (
        f'Find tools with `{SEARCH_TOOL}` (detail "typescript" gives exact declarations) '
        "or read the generated tools.d.ts declarations."
        if search
        else "The generated tools.d.ts declarations (and skills) list the tools."
    )
    return (
        "Run TypeScript in a sandbox to call tools and compute with their results.\n"
        "- `code` is the body of an async function: use `await` and an explicit `return` "
        "(the last expression is not returned). The returned value must be JSON.\n"
        "- The only way out is `await tools.<source>.<tool>(args)` (bracket names that are "
        'not identifiers: `tools["my-api"].deploy`); no fetch, require, import, timers or '
        "host APIs.\n"
        "- A tool returns a ToolResult `{ content: ContentBlock[], structuredContent?: T }`; "
        "prefer `structuredContent`. A failed call throws an Error with `code`, `tool` "
        "and `message` that you may catch.\n"
        "- `console.log` output is returned with the result.\n"
        f"- Limits per run: {limits.compute_time_ms} ms compute, {limits.wall_time_ms} ms wall, "
        f"{limits.max_tool_calls} tool calls ({limits.max_concurrent_tool_calls} at once), "
        f"result {limits.final_result_bytes} bytes, source {limits.source_bytes} bytes.\n"
        f"{sources_line(sources)}"
        f"{where}\n"
        "On failure you get a diagnostic (code, message, line:column): fix the code and retry."
    )


SEARCH_DESCRIPTION = (
    "Search the callable tools by what you need (words, a tool name or `source.tool`). "
    "Returns each tool's exact callable expression for run_typescript, its source and a short "
    'description; detail "typescript" adds input/output declarations and the shared '
    "ToolResult contract. Optional `source` restricts to one source. Results are ranked, "
    "deterministic, and report 'N of M' counts and the catalog revision."
)


# -- formatting --------------------------------------------------------------------------------
def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cut_utf8(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode(errors="ignore") + "…"


def _excerpt(code: str, line: int, column: int) -> list[str]:
    """The offending source line and a caret under ``column`` (both 1-based)."""
    # Rows are counted on "\n" as the compiler counts them (not str.splitlines' extras).
    lines = code.split("\n")
    if not 1 <= line <= len(lines):
        return []
    # Tabs shown as one space keep the caret under the right character.
    text = lines[line - 1].rstrip("\r").replace("\t", " ")
    col = max(1, min(column, len(text) + 1))
    start = 0
    if len(text) > SOURCE_LINE_CHARS:
        start = max(0, min(col - 1 - SOURCE_LINE_CHARS // 2, len(text) - SOURCE_LINE_CHARS))
        text = text[start : start + SOURCE_LINE_CHARS]
    gutter = f"{line} | "
    return [gutter + text, " " * (len(gutter) - 2) + "| " + " " * (col - 1 - start) + "^"]


def diagnostic_json(diagnostic: Diagnostic) -> dict[str, Any]:
    """``Diagnostic.to_json()`` with every free-text field bounded."""
    data = diagnostic.to_json()
    data["message"] = _cut(data["message"], DIAGNOSTIC_MESSAGE_CHARS)
    details = data.get("details")
    if isinstance(details, dict):
        data["details"] = {
            k: _cut(v, DIAGNOSTIC_DETAIL_CHARS) if isinstance(v, str) else v
            for k, v in details.items()
        }
        if len(json.dumps(data["details"], default=str)) > 4 * DIAGNOSTIC_DETAIL_CHARS:
            data["details"] = {k: _cut(str(v), 80) for k, v in list(details.items())[:8]}
    return data


def diagnostic_text(diagnostic: Diagnostic, code: str) -> str:
    """``CODE at line:col: message``, the source line with a caret, and tool context."""
    where = ""
    if diagnostic.location is not None:
        where = f" at {diagnostic.location.line}:{diagnostic.location.column}"
    lines = [
        f"{diagnostic.code}{where}: {_cut(diagnostic.message, DIAGNOSTIC_MESSAGE_CHARS)}",
    ]
    if diagnostic.location is not None:
        lines += _excerpt(code, diagnostic.location.line, diagnostic.location.column)
    if diagnostic.tool is not None:
        lines.append(f"tool: {diagnostic.tool}")
    if diagnostic.correlation_id is not None:
        lines.append(f"correlation id: {diagnostic.correlation_id}")
    return "\n".join(lines)


def _logs_text(result: RunResult) -> str | None:
    if not result.logs:
        return None
    shown = result.logs[-LOG_LINES_IN_TEXT:]
    head = (
        "console:"
        if len(shown) == len(result.logs)
        else (f"console (last {len(shown)} of {len(result.logs)} entries):")
    )
    body = [f"[{e.level}] {_cut(e.message, LOG_LINE_CHARS)}" for e in shown]
    return "\n".join([head, *body])


def run_result_to_mcp(result: RunResult, code: str) -> types.CallToolResult:
    """A ``RunResult`` as an MCP tool result (see the module docstring), every text in it
    well-formed (``code`` may be quoted in it)."""
    return _well_formed_reply(_run_result_reply(result, code))


def _run_result_reply(result: RunResult, code: str) -> types.CallToolResult:
    if result.ok and depth_exceeds(result.value):
        # `CodeMode.run` never returns one; a host-made RunResult must not crash the reply.
        result = dataclasses.replace(
            result,
            ok=False,
            value=None,
            diagnostic=Diagnostic(
                ErrorCode.RESULT_NOT_SERIALIZABLE, f"the returned value {NESTING_HINT}"
            ),
        )
    structured = result.to_json()
    logs = _logs_text(result)
    if result.warnings:
        hints = "\n".join(f"warning: {w}" for w in result.warnings)
        logs = hints if logs is None else f"{hints}\n{logs}"
    if result.ok:
        shown, media = split_media(result.value)
        text = json.dumps(shown, ensure_ascii=False, default=str)
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
        content += media  # images and audio as themselves (server/media.py)
        if logs:
            content.append(types.TextContent(type="text", text=logs))
        return types.CallToolResult(content=content, structured_content=structured)
    diagnostic = result.diagnostic
    if diagnostic is None:  # a failed result always carries one; stay safe anyway
        text = "the run failed without a diagnostic"
    else:
        structured["diagnostic"] = diagnostic_json(diagnostic)
        text = diagnostic_text(diagnostic, code)
    if logs:
        text += "\n" + logs
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=True,
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=well_formed(message))], is_error=True
    )


# -- progress ----------------------------------------------------------------------------------
class ProgressRelay:
    """Forwards ``ProgressEvent``s as MCP progress: increasing counter, no total, bounded.

    ``send(progress, message)`` performs the notification. At most ``max_events`` are sent,
    at most ``per_second``: an event arriving sooner is held and sent when the interval has
    passed, unless a newer one replaces it first (so a long tool call is announced even when
    it starts right after another event). ``finished`` goes out at once. ``close()`` drops
    anything still held; call it before the request's response is sent.
    """

    def __init__(
        self,
        send: Callable[[float, str], Awaitable[None]],
        *,
        max_events: int,
        per_second: float = PROGRESS_PER_SECOND,
        message_bytes: int = PROGRESS_MESSAGE_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._max_events = max_events
        self._interval = 1.0 / per_second
        self._message_bytes = message_bytes
        self._clock = clock
        self._sent = 0
        self._last = float("-inf")
        self._held: str | None = None
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def sent(self) -> int:
        return self._sent

    async def __call__(self, event: ProgressEvent) -> None:
        if self._closed or self._sent >= self._max_events:
            return
        message = event.message
        if event.tool is not None and event.tool not in message:
            message = f"{message} ({event.tool})"  # name the tool once, never twice
        message = _cut_utf8(message, self._message_bytes)
        wait = self._last + self._interval - self._clock()
        if event.kind != "finished" and wait > 0:
            self._held = message
            if self._timer is None:
                self._timer = asyncio.ensure_future(self._flush_after(wait))
            return
        self._held = None
        await self._emit(message)

    async def _flush_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._timer = None
        held, self._held = self._held, None
        if held is not None:
            await self._emit(held)

    async def _emit(self, message: str) -> None:
        # One at a time, so notifications leave in the order of their progress values.
        async with self._lock:
            if self._closed or self._sent >= self._max_events:
                return
            self._sent += 1
            self._last = self._clock()
            try:
                await self._send(float(self._sent), message)
            except Exception as exc:  # a closed stream must not fail the run
                log.debug("progress notification not delivered: %r", exc)

    async def close(self) -> None:
        self._closed = True
        self._held = None
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None


# -- handlers (shared by both server kinds) ------------------------------------------------------
def _caller(ctx: Any = None) -> str | None:
    """Who asks, for the audit trail and fair admission (ADR 0030): the authenticated
    principal when the transport has one (the SDK's OAuth support); else the MCP session
    (stateful HTTP: its id, hashed; stdio: the one session); else, in stateless HTTP, the
    peer's address (one share per client host: several clients behind one proxy share it);
    ``None`` in-process."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    if token is not None:
        return token.subject or token.client_id
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        session_id = headers.get("mcp-session-id")
        if session_id:
            digest = hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()
            return f"session:{digest[:16]}"
        client = getattr(request, "client", None)
        host = getattr(client, "host", None)
        return f"peer:{host}" if host else "peer:unknown"
    session = getattr(ctx, "session", None)
    return f"session:{id(session):x}" if session is not None else None


async def handle_run(
    code_mode: CodeMode, ctx: ServerRequestContext[Any, Any] | None, code: Any
) -> types.CallToolResult:
    if not isinstance(code, str):
        return _error("run_typescript: `code` must be a string of TypeScript")
    relay: ProgressRelay | None = None
    if ctx is not None:
        # The SDK sends nothing unless the request carried a progress token (over JSON-RPC
        # the token is in params._meta; in-process the caller's callback is called directly).
        session = ctx.session

        async def send(progress: float, message: str) -> None:
            await session.report_progress(progress, None, well_formed(message))

        relay = ProgressRelay(send, max_events=code_mode.limits.progress_events)
    try:
        with incoming_context(
            getattr(ctx, "meta", None), getattr(getattr(ctx, "request", None), "headers", None)
        ):
            result = await code_mode.run(code, on_progress=relay, caller=_caller(ctx))
    except RuntimeError as exc:  # the CodeMode was not entered, or is already closed
        log.error("run_typescript cannot run: %s", exc)
        return _error(f"run_typescript is not available: {exc}")
    finally:
        if relay is not None:
            await relay.close()  # no progress may follow the response
    return run_result_to_mcp(result, code)


async def handle_search(
    code_mode: CodeMode,
    query: Any,
    source: Any = None,
    detail: Any = "summary",
    limit: Any = DEFAULT_LIMIT,
) -> types.CallToolResult:
    if source is not None and not isinstance(source, str):
        return _error("search_tools: `source` must be a string")
    try:
        # In a worker thread: the first search of a new catalog revision builds its index
        # (seconds for tens of thousands of tools) and must not stall concurrent runs.
        # CodeMode.search also names the sources that are down in the response's note.
        response = await asyncio.to_thread(
            code_mode.search, query, source=source or None, detail=detail, limit=limit
        )
    except SearchError as exc:
        return _error(f"search_tools: {exc}")
    return _well_formed_reply(
        types.CallToolResult(
            content=[types.TextContent(type="text", text=response.to_text())],
            structured_content=response.to_json(),
        )
    )


def _well_formed_reply(result: types.CallToolResult) -> types.CallToolResult:
    """``result`` with no lone surrogate in any text it carries: the client's own code
    echoed in a diagnostic, an upstream's text in a search. The SDK serializes the reply
    after the handler returns, where a string UTF-8 cannot encode is no longer an error
    the client sees: over stdio it ended the server's writer, and the server with it."""
    content = [
        block.model_copy(update={"text": well_formed(block.text)})
        if isinstance(block, types.TextContent) and has_surrogates(block.text)
        else block
        for block in result.content
    ]
    structured = result.structured_content
    if structured is not None and has_surrogates(structured):
        structured = well_formed(structured)
    return result.model_copy(update={"content": content, "structured_content": structured})


# -- registration ------------------------------------------------------------------------------
_RUN_ANNOTATIONS = types.ToolAnnotations(
    title="Run TypeScript with tools",
    read_only_hint=False,
    destructive_hint=True,
    idempotent_hint=False,
    open_world_hint=True,
)
_SEARCH_ANNOTATIONS = types.ToolAnnotations(
    title="Search tools",
    read_only_hint=True,
    destructive_hint=False,
    idempotent_hint=True,
    open_world_hint=False,
)

RUN_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": CODE_DESCRIPTION}},
    "required": ["code"],
    "additionalProperties": False,
}
SEARCH_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUERY_CHARS,
            "description": "What you need, in words, or a tool name / source.tool.",
        },
        "source": {"type": "string", "description": "Only tools of this source (exact name)."},
        "detail": {
            "type": "string",
            "enum": ["summary", "typescript"],
            "default": "summary",
            "description": '"typescript" adds declarations and the ToolResult contract.',
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "default": DEFAULT_LIMIT,
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def register_code_mode_tools(
    server: MCPServer[Any] | Server[Any], code_mode: CodeMode, *, search: bool = True
) -> None:
    """Add ``run_typescript`` (and ``search_tools`` unless ``search=False``) to ``server``.

    The server stays the caller's: this neither starts nor stops it, nor enters
    ``code_mode`` (enter it around serving). Tools the server already has keep working; a
    name clash with an existing tool raises ``ValueError``.
    """
    if isinstance(server, MCPServer):
        _register_mcpserver(server, code_mode, search=search)
    elif isinstance(server, Server):
        _register_lowlevel(server, code_mode, search=search)
    else:
        raise TypeError(
            "register_code_mode_tools needs an mcp.server.mcpserver.MCPServer or an "
            f"mcp.server.lowlevel.Server, got {type(server).__name__}"
        )


def _register_mcpserver(server: MCPServer[Any], code_mode: CodeMode, *, search: bool) -> None:
    existing = set(getattr(getattr(server, "_tool_manager", None), "_tools", {}) or {})
    clash = {RUN_TOOL, *([SEARCH_TOOL] if search else [])} & existing
    if clash:
        raise ValueError(f"the server already has a tool named {', '.join(sorted(clash))}")

    async def run_typescript(
        code: Annotated[str, Field(description=CODE_DESCRIPTION)], ctx: Context
    ) -> types.CallToolResult:
        return await handle_run(code_mode, ctx.request_context, code)

    server.add_tool(
        run_typescript,
        name=RUN_TOOL,
        description=run_description(
            code_mode.limits, search=search, sources=tuple(code_mode.providers)
        ),
        annotations=_RUN_ANNOTATIONS,
    )
    if not search:
        return

    async def search_tools(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="What you need, in words, or a tool name / source.tool.",
            ),
        ],
        source: Annotated[
            str | None, Field(description="Only tools of this source (exact name).")
        ] = None,
        detail: Annotated[
            Literal["summary", "typescript"],
            Field(description='"typescript" adds declarations and the ToolResult contract.'),
        ] = "summary",
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    ) -> types.CallToolResult:
        return await handle_search(code_mode, query, source, detail, limit)

    server.add_tool(
        search_tools,
        name=SEARCH_TOOL,
        description=SEARCH_DESCRIPTION,
        annotations=_SEARCH_ANNOTATIONS,
    )


def _register_lowlevel(server: Server[Any], code_mode: CodeMode, *, search: bool) -> None:
    ours: dict[str, types.Tool] = {
        RUN_TOOL: types.Tool(
            name=RUN_TOOL,
            description=run_description(
                code_mode.limits, search=search, sources=tuple(code_mode.providers)
            ),
            input_schema=RUN_INPUT_SCHEMA,
            annotations=_RUN_ANNOTATIONS,
        )
    }
    if search:
        ours[SEARCH_TOOL] = types.Tool(
            name=SEARCH_TOOL,
            description=SEARCH_DESCRIPTION,
            input_schema=SEARCH_INPUT_SCHEMA,
            annotations=_SEARCH_ANNOTATIONS,
        )
    previous_list = server.get_request_handler("tools/list")
    previous_call = server.get_request_handler("tools/call")
    previous_schema = server.get_tool_input_schema

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if previous_list is None:
            return types.ListToolsResult(tools=list(ours.values()))
        result = await previous_list.handler(ctx, params)
        if not isinstance(result, types.ListToolsResult):
            result = types.ListToolsResult.model_validate(result)
        clash = {t.name for t in result.tools} & set(ours)
        if clash:
            log.error("tools %s are defined twice; the Code Mode ones win", sorted(clash))
        theirs = [t for t in result.tools if t.name not in ours]
        first_page = params is None or params.cursor is None
        tools = [*ours.values(), *theirs] if first_page else theirs
        return result.model_copy(update={"tools": tools})

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> Any:
        arguments = params.arguments or {}
        if params.name == RUN_TOOL:
            unknown = set(arguments) - {"code"}
            if unknown:
                return _error(f"run_typescript: unknown argument(s) {', '.join(sorted(unknown))}")
            return await handle_run(code_mode, ctx, arguments.get("code"))
        if params.name == SEARCH_TOOL and search:
            unknown = set(arguments) - {"query", "source", "detail", "limit"}
            if unknown:
                return _error(f"search_tools: unknown argument(s) {', '.join(sorted(unknown))}")
            return await handle_search(
                code_mode,
                arguments.get("query"),
                arguments.get("source"),
                arguments.get("detail", "summary"),
                arguments.get("limit", DEFAULT_LIMIT),
            )
        if previous_call is None:
            return _error(f"unknown tool {params.name!r}")
        return await previous_call.handler(ctx, params)

    def input_schema(name: str) -> Mapping[str, Any] | None:
        if name in ours:
            return ours[name].input_schema
        return None if previous_schema is None else previous_schema(name)

    server.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    server.get_tool_input_schema = input_schema


def server_instructions(code_mode: CodeMode, *, search: bool = True) -> str:
    """The server's ``instructions``: how to use the two tools and the sources, each with
    its description and tool count (``codemodekit.overview``). For a consumer's own server,
    pass this as its ``instructions``."""
    head = f"Use {RUN_TOOL} to call this server's tools from TypeScript" + (
        f"; use {SEARCH_TOOL} to find them (by words, or `source` for one source's tools)."
        if search
        else "."
    )
    sources = overview_text(code_mode.sources_overview())
    return f"{head}\n{sources}" if sources else head


__all__ = [
    "PROGRESS_PER_SECOND",
    "RUN_TOOL",
    "SEARCH_TOOL",
    "ProgressRelay",
    "diagnostic_text",
    "register_code_mode_tools",
    "run_description",
    "run_result_to_mcp",
    "server_instructions",
]
