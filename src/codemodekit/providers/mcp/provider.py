"""``McpToolProvider``: tools of an upstream MCP server (stdio, Streamable HTTP, legacy SSE).

Lifecycle of one provider::

    connecting ──start()──▶ ok ──connection lost──▶ unavailable ──reconnect──▶ ok ...
        │                                             ▲    (backoff + jitter, forever)
        └──cannot start/connect (SourceUnavailable)───┘
    any state ──aclose()──▶ closed   (reconnects cancelled, child processes terminated)

Each live connection is owned by one task that enters the SDK ``Client`` and leaves it
when the provider stops or the server's stream ends; calls are made from the callers'
tasks over that connection. A failed call is never replayed: a call in flight when the
connection drops fails with ``SourceUnavailable``. Every MCP detail stays in this module
and its ``mcp_*`` siblings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from codemodekit import __version__
from codemodekit.errors import (
    SecretUnavailable,
    SourceUnavailable,
    ToolError,
    new_correlation_id,
)
from codemodekit.limits import Limits
from codemodekit.providers.base import (
    CallContext,
    Discovery,
    DiscoveryListener,
    HealthStatus,
    JsonObject,
    ResultInvalid,
    ResultTooLarge,
    SkippedTool,
    SourceHealth,
    ToolOutput,
    closed_message,
    scrub_discovery,
)
from codemodekit.providers.describe import server_description
from codemodekit.providers.mcp.content import (
    error_text,
    list_all_tools,
    progress_text,
    sanitize,
    tool_output,
)
from codemodekit.providers.mcp.failures import (
    ReconnectPolicy,
    describe_connect_failure,
    first_leaf,
    is_http_refusal,
    sdk_error,
)
from codemodekit.providers.mcp.stdio import REPLY_TOO_DEEP, REPLY_TOO_LARGE, is_own_error
from codemodekit.providers.mcp.transport import (
    ListingTap,
    StderrTail,
    describe_target,
    open_transport,
    resolve_secrets,
)
from codemodekit.scrub import NO_SECRETS, Scrubber
from codemodekit.spec.model import McpHttpSource, McpStdioSource

__all__ = ["McpToolProvider", "ReconnectPolicy"]

logger = logging.getLogger("codemodekit.providers.mcp")

DEFAULT_CONNECT_TIMEOUT_S = 30.0
_STDERR_SETTLE_S = 0.5
"""How long to wait for a dead child's last stderr before describing its death."""


class _Unfixable(SourceUnavailable):
    """A start failure that no retry can cure (a missing variable, a command not found)."""


@dataclass(eq=False)
class _Connection:
    """One live session. ``ended`` fires when the server's stream ends or we stop."""

    number: int
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False
    client: Client | None = None
    protocol_version: str = ""
    discovery: Discovery = field(default_factory=Discovery)
    tail: StderrTail | None = None
    task: asyncio.Task[None] | None = None
    serving: bool = False
    """Discovery is done; the owner task now only waits for ``ended``."""
    refreshing: bool = False
    refresh_again: bool = False
    lost_handled: bool = False
    http_status: int | None = None
    """The last HTTP error status the server answered with, if any."""
    unreadable: int = 0
    """Messages that were not JSON-RPC (a server logging to stdout)."""
    tap: ListingTap = field(default_factory=ListingTap)
    stderr_id: str = ""
    """Correlation id under which this connection's stderr tail went to the host log."""
    stderr_logged: str = ""


class McpToolProvider:
    """A ``ToolProvider`` over one upstream MCP server."""

    def __init__(
        self,
        config: McpStdioSource | McpHttpSource,
        *,
        limits: Limits,
        environ: Mapping[str, str] | None = None,
        reconnect: ReconnectPolicy | None = None,
    ) -> None:
        self._config = config
        self._limits = limits
        self._environ = environ
        self._reconnect_policy = reconnect or ReconnectPolicy()
        self._target = describe_target(config)
        self._transport_name = "stdio" if isinstance(config, McpStdioSource) else config.transport
        self._status = HealthStatus.CONNECTING
        self._message = "not started"
        self._conn: _Connection | None = None
        self._connections = 0
        self._on_change: DiscoveryListener | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._pending: _Connection | None = None
        """A connection still in its handshake or first ``tools/list``."""
        self._background: set[asyncio.Task[Any]] = set()
        self._redact: Scrubber = NO_SECRETS
        self._stderr = ""
        """The last scrubbed stderr tail of a failed child: host-only (log, ``check``)."""
        self._closed = False

    # -- ToolProvider ---------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._config.name

    @property
    def kind(self) -> str:
        return "mcp"

    @property
    def protocol_version(self) -> str | None:
        """The protocol version negotiated with the live connection, if any."""
        return self._conn.protocol_version if self._conn is not None else None

    async def start(self, on_change: DiscoveryListener) -> Discovery:
        if self._closed:
            raise SourceUnavailable(closed_message(self.name))
        if self._on_change is not None:
            raise RuntimeError(f"McpToolProvider {self.name!r} was already started")
        self._on_change = on_change
        self._set(HealthStatus.CONNECTING, f"connecting to {self._target}")
        try:
            conn = await self._connect()
        except _Unfixable as exc:
            # Retrying cannot fix a missing variable or a bad path: say what to do instead.
            self._set(HealthStatus.UNAVAILABLE, f"{exc}; fix it and restart codemode")
            raise SourceUnavailable(str(exc)) from None
        except SourceUnavailable as exc:
            self._set(HealthStatus.UNAVAILABLE, f"{exc}; reconnecting in the background")
            self._schedule_reconnect()
            raise
        except asyncio.CancelledError:
            # The host stopped waiting (its own start timeout): keep trying in the background;
            # aclose() cancels that too.
            self._set(
                HealthStatus.UNAVAILABLE,
                f"connecting to {self._target} was interrupted; reconnecting",
            )
            self._schedule_reconnect()
            raise
        return conn.discovery

    async def call_tool(self, name: str, arguments: JsonObject, context: CallContext) -> ToolOutput:
        conn = self._conn
        if conn is None or conn.client is None or conn.ended.is_set():
            raise SourceUnavailable(self._unavailable_text())
        client = conn.client
        report = context.report_progress
        redact = self._redact

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            try:
                report(progress_text(progress, total, message, redact))
            except Exception:  # a listener fault must not fail the call
                logger.warning("progress listener failed for %s.%s", self.name, name)

        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=name, arguments=dict(arguments))
        )
        try:
            # Cancelling this task (a timeout, or the caller's own cancellation) makes the
            # SDK send notifications/cancelled upstream before the cancellation propagates.
            async with asyncio.timeout(context.timeout_s):
                result = await client.session.send_request(
                    request, types.CallToolResult, progress_callback=on_progress
                )
        except TimeoutError:
            raise TimeoutError(
                f"{self.name}.{name} did not answer within {context.timeout_s:g}s; "
                "the upstream call was cancelled"
            ) from None
        except MCPError as exc:
            raise await self._call_failure(conn, name, exc) from None
        except ValidationError:
            raise ToolError(
                f"{self.name}.{name}: the server sent a malformed tools/call result",
                cause="pydantic validation of CallToolResult failed",
            ) from None
        except (
            httpx2.HTTPError,
            OSError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ) as exc:
            raise await self._lost_during_call(conn, name, type(exc).__name__) from None
        if result.is_error:
            raise ToolError(error_text(result, redact=redact))
        return tool_output(result, max_bytes=context.max_result_bytes, scrub=redact)

    def health(self) -> SourceHealth:
        tools = len(self._conn.discovery.tools) if self._conn is not None else 0
        return SourceHealth(
            source=self.name,
            kind=self.kind,
            status=self._status,
            message=self._message,
            tools=tools,
            detail=self._stderr if self._status is not HealthStatus.OK else "",
            plugin=self._config.plugin.label if self._config.plugin is not None else "",
        )

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        tasks: list[asyncio.Task[Any]] = list(self._background)
        if self._reconnect_task is not None:
            tasks.append(self._reconnect_task)
        for task in tasks:
            task.cancel()
        live = [conn for conn in (self._conn, self._pending) if conn is not None]
        self._conn = self._pending = None
        for conn in live:
            await self._stop(conn)
        if tasks:
            # Not `await task`: a task's own cancellation must not look like ours.
            await asyncio.wait(tasks)
        self._set(HealthStatus.CLOSED, "closed")

    def __repr__(self) -> str:
        return (
            f"McpToolProvider(name={self.name!r}, target={self._target!r}, status={self._status})"
        )

    # -- connecting -----------------------------------------------------------------

    async def _connect(self) -> _Connection:
        """Start one connection and discover its tools, or raise ``SourceUnavailable``."""
        try:
            secrets, masks = resolve_secrets(self._config, self._environ)
            self._redact = Scrubber(masks)
        except SecretUnavailable as exc:
            raise _Unfixable(f"MCP source {self.name!r} is unavailable: {exc}") from None
        self._connections += 1
        conn = _Connection(number=self._connections)
        if isinstance(self._config, McpStdioSource):
            conn.tail = StderrTail()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn.task = asyncio.create_task(
            self._own(conn, secrets, ready), name=f"codemodekit-mcp-{self.name}-{conn.number}"
        )
        self._pending = conn
        try:
            await self._await_ready(conn, ready)
        finally:
            if self._pending is conn:
                self._pending = None
        if self._closed or conn.ended.is_set():
            # Closed meanwhile, or died between discovery and now: never publish it.
            await self._stop(conn)
            why = "closed" if self._closed else "the connection was lost right after discovery"
            raise SourceUnavailable(self._failed(conn, why))
        self._conn = conn
        self._set(HealthStatus.OK, self._ok_text(conn))
        return conn

    async def _await_ready(self, conn: _Connection, ready: asyncio.Future[None]) -> None:
        timeout_ms = self._config.timeout_ms
        timeout_s = timeout_ms / 1000 if timeout_ms is not None else DEFAULT_CONNECT_TIMEOUT_S
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout_s)
        except TimeoutError:
            await self._stop(conn)
            reason = f"no answer to the handshake or tools/list within {timeout_s:g}s"
            if conn.unreadable:
                reason += (
                    f" (it wrote {conn.unreadable} message(s) that are not JSON-RPC: "
                    "is it logging to stdout instead of stderr?)"
                )
            raise SourceUnavailable(self._failed(conn, reason)) from None
        except asyncio.CancelledError:
            await self._stop(conn)
            self._close_tail(conn)
            current = asyncio.current_task()
            if self._closed and current is not None and not current.cancelling():
                # aclose() stopped this handshake; our caller itself was not cancelled.
                raise SourceUnavailable(
                    f"MCP source {self.name!r} was closed while connecting"
                ) from None
            raise
        except BaseException as exc:
            # The owner task has left the client: a child process is already stopped.
            await self._settle_stderr(conn)
            await self._stop(conn)
            reason = describe_connect_failure(
                exc, http_status=conn.http_status, redact=self._redact
            )
            unfixable = isinstance(first_leaf(exc), FileNotFoundError | PermissionError)
            raise (_Unfixable if unfixable else SourceUnavailable)(
                self._failed(conn, reason)
            ) from None

    async def _own(
        self, conn: _Connection, secrets: dict[str, str], ready: asyncio.Future[None]
    ) -> None:
        """Hold one SDK client open until the provider stops it or the server goes away."""

        def on_status(status: int) -> None:
            conn.http_status = status

        def on_end() -> None:
            conn.ended.set()
            if not conn.stopping:
                # Fail new calls fast from this moment, not only once the owner task has run.
                self._mark_lost(conn, "the connection was lost")

        transport = open_transport(
            self._config,
            secrets,
            on_end=on_end,
            tail=conn.tail,
            on_status=on_status,
            max_result_bytes=self._limits.tool_result_bytes,
            tap=conn.tap,
            on_large=lambda size: self._reading_large(conn, size),
        )

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                self._schedule_refresh(conn)
            elif isinstance(message, Exception):
                # Garbage on the wire (a stray print on stdout): skipped, the session goes on.
                conn.unreadable += 1
                logger.debug(
                    "MCP source %s sent an unreadable message (%s)",
                    self.name,
                    type(message).__name__,
                )

        client = Client(
            transport,
            mode="auto",
            cache=None,
            message_handler=on_message,
            client_info=types.Implementation(name="codemodekit", version=__version__),
        )
        try:
            async with client:
                conn.client = client
                conn.protocol_version = client.protocol_version
                conn.discovery = await self._list(client, conn.protocol_version, conn.tap)
                conn.serving = True
                ready.set_result(None)
                async with anyio.create_task_group() as tg:
                    capability = client.server_capabilities.tools
                    if (
                        capability is not None
                        and capability.list_changed
                        and _is_modern(conn.protocol_version)
                    ):
                        tg.start_soon(self._listen, conn, client)
                    await conn.ended.wait()
                    tg.cancel_scope.cancel()
        except BaseException as exc:
            if not ready.done():
                if isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError) and not conn.stopping:
                logger.warning(
                    "MCP source %s: connection ended with %s", self.name, type(exc).__name__
                )
            if isinstance(exc, asyncio.CancelledError) and not conn.stopping:
                raise
        finally:
            conn.ended.set()
            if ready.done() and not conn.stopping:
                await self._connection_lost(conn)
            if conn.stopping:
                self._close_tail(conn)

    async def _stop(self, conn: _Connection) -> None:
        conn.stopping = True
        conn.ended.set()
        task = conn.task
        if task is not None and not task.done():
            # The SDK's own shutdown closes stdin, then escalates to SIGTERM and SIGKILL
            # with bounded waits; cancelling only interrupts a handshake still pending.
            if not conn.serving:
                task.cancel()
            await asyncio.wait({task})

    def _failed(self, conn: _Connection, reason: str) -> str:
        text = self._unavailable(conn, reason)
        self._close_tail(conn)
        return text

    @staticmethod
    def _close_tail(conn: _Connection) -> None:
        if conn.tail is not None:
            conn.tail.close()

    async def _list(self, client: Client, protocol_version: str, tap: ListingTap) -> Discovery:
        provenance: dict[str, Any] = {
            "kind": "mcp",
            "source": self.name,
            "transport": self._transport_name,
            "target": self._target,
            "protocol_version": protocol_version,
        }
        server = client.server_info
        if server is not None:
            provenance["server"] = {"name": server.name, "version": server.version}
        if self._config.plugin is not None:
            provenance["plugin"] = self._config.plugin.to_json()
        tap.set_aside.clear()
        discovery = await list_all_tools(
            client, protocol_version=protocol_version, provenance=provenance, tap=tap
        )
        described = server_description(server)
        aside = tuple(SkippedTool(name, why) for name, why in tap.set_aside)
        discovery = Discovery(
            tools=discovery.tools, skipped=discovery.skipped + aside, description=described
        )
        # The one place tool metadata is scrubbed: every consumer gets the masked text.
        return scrub_discovery(discovery, self._redact)

    def _reading_large(self, conn: _Connection, size: int | None) -> None:
        """A large reply is being read: degraded while it lasts, so health tells why."""
        if conn is not self._conn or self._closed:
            return
        if size is not None and self._status is HealthStatus.OK:
            self._set(
                HealthStatus.DEGRADED,
                f"reading a large reply ({size // (1024 * 1024)} MiB so far)"
                # Over stdio every reply shares one pipe; over HTTP each has its own stream.
                + ("; other calls wait" if self._transport_name == "stdio" else ""),
            )
        elif size is None and self._status is HealthStatus.DEGRADED:
            self._set(HealthStatus.OK, self._ok_text(conn))

    async def _listen(self, conn: _Connection, client: Client) -> None:
        """2026-07-28 delivers list changes on a ``subscriptions/listen`` stream."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._schedule_refresh(conn)
        except Exception as exc:
            if not conn.ended.is_set():
                logger.info(
                    "MCP source %s: list-change subscription ended (%s)",
                    self.name,
                    type(exc).__name__,
                )

    # -- change and loss ------------------------------------------------------------

    def _schedule_refresh(self, conn: _Connection) -> None:
        if conn is not self._conn or self._closed:
            return
        if conn.refreshing:
            conn.refresh_again = True
            return
        conn.refreshing = True
        self._spawn(self._refresh(conn), "refresh")

    async def _refresh(self, conn: _Connection) -> None:
        try:
            while True:
                conn.refresh_again = False
                client = conn.client
                if client is None or conn is not self._conn or conn.ended.is_set():
                    return
                try:
                    discovery = await self._list(client, conn.protocol_version, conn.tap)
                except Exception as exc:
                    logger.warning(
                        "MCP source %s: re-listing tools failed (%s)", self.name, type(exc).__name__
                    )
                    return
                if conn is not self._conn:
                    return
                conn.discovery = discovery
                self._set(HealthStatus.OK, self._ok_text(conn))
                self._notify(discovery)
                if not conn.refresh_again:
                    return
        finally:
            conn.refreshing = False

    def _mark_lost(self, conn: _Connection, why: str) -> None:
        """Take a dead connection out of service at once, so new calls fail fast."""
        if self._closed or conn is not self._conn:
            return
        self._conn = None
        self._set(
            HealthStatus.UNAVAILABLE,
            self._unavailable(conn, why) + "; reconnecting in the background",
        )

    async def _connection_lost(self, conn: _Connection) -> None:
        if self._closed or conn.lost_handled:
            return
        conn.lost_handled = True
        if self._conn is not None and self._conn is not conn:
            return  # a stale connection; a newer one is already serving
        self._mark_lost(conn, "the connection was lost")
        await self._settle_stderr(conn)
        if self._conn is None and not self._closed:
            # Again, now with the child's last words on stderr.
            reason = self._unavailable(conn, "the connection was lost")
            self._set(HealthStatus.UNAVAILABLE, reason + "; reconnecting in the background")
        self._close_tail(conn)
        self._schedule_reconnect()

    def _schedule_reconnect(self) -> None:
        if self._closed or (self._reconnect_task is not None and not self._reconnect_task.done()):
            return
        self._reconnect_task = asyncio.create_task(
            self._reconnect_loop(), name=f"codemodekit-mcp-{self.name}-reconnect"
        )

    async def _reconnect_loop(self) -> None:
        attempt = 0
        while not self._closed:
            await asyncio.sleep(self._reconnect_policy.delay(attempt))
            attempt += 1
            try:
                conn = await self._connect()
            except _Unfixable as exc:
                self._set(HealthStatus.UNAVAILABLE, f"{exc}; fix it and restart codemode")
                return
            except SourceUnavailable as exc:
                self._set(
                    HealthStatus.UNAVAILABLE, f"{exc}; reconnect attempt {attempt} failed, retrying"
                )
                continue
            self._notify(conn.discovery)
            return

    def _notify(self, discovery: Discovery) -> None:
        listener = self._on_change
        if listener is None:
            return
        try:
            listener(discovery)
        except Exception:
            logger.exception("MCP source %s: on_change listener failed", self.name)

    def _spawn(self, coro: Any, what: str) -> None:
        task = asyncio.create_task(coro, name=f"codemodekit-mcp-{self.name}-{what}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- failures -------------------------------------------------------------------

    async def _call_failure(self, conn: _Connection, tool: str, exc: MCPError) -> Exception:
        # The codes below are ours or the SDK's, but JSON-RPC leaves -32000..-32099 to
        # servers too: an upstream's own error with one of them is an ordinary refusal
        # (its text redacted), never a lost connection, a timeout or a bound of ours.
        error = exc.error
        code = error.code
        if is_own_error(error, REPLY_TOO_LARGE):
            return ResultTooLarge(self._limits.tool_result_bytes)
        if is_own_error(error, REPLY_TOO_DEEP):
            return ResultInvalid(sanitize(error.message, 300, self._redact))
        if sdk_error(error, types.CONNECTION_CLOSED):
            return await self._lost_during_call(conn, tool, "connection closed")
        if is_http_refusal(exc):
            # A non-2xx answer without a JSON-RPC body (or the SDK's 404 "Session
            # terminated"): typically a restarted server that no longer knows our session.
            status = f"HTTP {conn.http_status}" if conn.http_status else "an HTTP error"
            return await self._lost_during_call(conn, tool, f"the server answered {status}")
        if sdk_error(error, types.REQUEST_TIMEOUT):
            return TimeoutError(f"{self.name}.{tool} timed out upstream")
        if code == types.HEADER_MISMATCH:
            self._schedule_refresh(conn)
            return ToolError(
                f"{self.name}.{tool}: the server's definition of this tool changed; "
                "the catalog is being refreshed, call it again",
                code=str(code),
            )
        message = sanitize(exc.error.message, 500, self._redact)
        return ToolError(
            f"{self.name}.{tool} was rejected by the server: {message}", code=str(code)
        )

    async def _lost_during_call(self, conn: _Connection, tool: str, why: str) -> SourceUnavailable:
        self._mark_lost(conn, f"the connection was lost ({why})")
        conn.ended.set()
        await self._settle_stderr(conn)
        detail = self._unavailable(conn, f"the connection was lost during the call ({why})")
        return SourceUnavailable(f"{self._short(detail)}; {self.name}.{tool} was not retried")

    async def _settle_stderr(self, conn: _Connection) -> None:
        if conn.tail is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(conn.tail.closed.wait(), _STDERR_SETTLE_S)

    def _unavailable(self, conn: _Connection, reason: str) -> str:
        """Why the source is down, safe for the model: never the child's own words.

        A child's stderr may echo anything (its environment, a token), so its scrubbed
        tail goes only to the host log, under a correlation id the message names, and to
        ``health().detail`` (shown by ``codemode check``).
        """
        text = f"MCP source {self.name!r} ({self._target}) is unavailable: {reason}"
        if conn.tail is not None:
            tail = sanitize(conn.tail.text(self._redact), 600)
            if tail:
                if not conn.stderr_id:
                    conn.stderr_id = new_correlation_id()
                if tail != conn.stderr_logged:
                    conn.stderr_logged = tail
                    logger.warning(
                        "MCP source %s stderr (correlation %s): %s", self.name, conn.stderr_id, tail
                    )
                self._stderr = tail
                text += (
                    f"; the server wrote to stderr (in the host log, correlation {conn.stderr_id})"
                )
        return text

    def _unavailable_text(self) -> str:
        """Why a call cannot be made now; the bridge prefixes "source 'x' is unavailable"."""
        if self._closed:
            return f"MCP source {self.name!r} is closed"
        if self._status is HealthStatus.CONNECTING:
            return f"MCP source {self.name!r} is still connecting to {self._target}"
        return self._short(self._message) or "not connected"

    def _short(self, text: str) -> str:
        """``text`` without "is unavailable" (the bridge's message already says it)."""
        lead = f"MCP source {self.name!r} ({self._target}) is unavailable: "
        if not text.startswith(lead):
            return text
        return f"MCP source {self.name!r} ({self._target}): {text[len(lead) :]}"

    def _ok_text(self, conn: _Connection) -> str:
        skipped = len(conn.discovery.skipped)
        text = f"connected over {self._transport_name}, protocol {conn.protocol_version}"
        return text + (f", {skipped} tool(s) skipped" if skipped else "")

    def _set(self, status: HealthStatus, message: str) -> None:
        if self._closed and status is not HealthStatus.CLOSED:
            return
        if status is not self._status or message != self._message:
            logger.info("MCP source %s: %s (%s)", self.name, status, message)
        self._status = status
        self._message = message


def _is_modern(protocol_version: str) -> bool:
    return protocol_version >= "2026-07-28"
