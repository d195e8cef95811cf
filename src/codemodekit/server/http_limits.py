"""Bounds on what HTTP clients of ``codemode serve --transport http`` can hold open.

uvicorn reads request headers and bodies without a deadline and accepts every connection,
so 300 unauthenticated clients trickling header bytes stay open forever (authentication
runs only once a request is complete). Here:

- ``header_timeout_s``: a request's headers must arrive within this long of its first byte
  (of the connection, for the first request); ``body_timeout_s``: its body within this long
  of its headers. Past either, the connection is closed. Responses (an SSE stream that runs
  for minutes) are never cut.
- ``max_connections``: connections over this many are closed as soon as they are accepted.
- ``max_sessions_per_client``: stateful MCP sessions one client may hold (the SDK's only
  bound is 10,000 in all, for 30 idle minutes each): a new session over it is refused with
  429. The client is the authenticated principal when there is one, else the peer address.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import h11
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 30.0
DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_MAX_SESSIONS_PER_CLIENT = 100


@dataclass(frozen=True, slots=True)
class HttpLimits:
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_sessions_per_client: int = DEFAULT_MAX_SESSIONS_PER_CLIENT


def guarded_protocol(limits: HttpLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with read deadlines and a connection cap (one server)."""
    open_connections = [0]

    class Guarded(H11Protocol):
        _refused = False
        _deadline: asyncio.TimerHandle | None = None
        _reading: object = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if open_connections[0] >= limits.max_connections:
                self._refused = True
                transport.abort()
                return
            open_connections[0] += 1
            super().connection_made(transport)
            self._arm("headers", limits.header_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            open_connections[0] -= 1
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            state = self.conn.their_state
            if state is h11.IDLE:
                self._arm("headers", limits.header_timeout_s)  # a request has begun
            elif state is h11.SEND_BODY:
                self._arm("body", limits.body_timeout_s)
            else:
                self._disarm()

        def _arm(self, what: str, seconds: float) -> None:
            if self._reading == what:
                return  # already counting from this phase's start
            self._disarm()
            self._reading = what
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = None
            self._reading = None

        def _expired(self) -> None:
            self._deadline = None
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not (
                self.cycle is not None and self.cycle.response_started
            ):
                self.transport.close()

    return Guarded


class SessionCap:
    """ASGI middleware: at most ``limit`` live stateful MCP sessions per client."""

    def __init__(self, app: ASGIApp, server: Any, limit: int) -> None:
        self._app = app
        self._server = server
        self._limit = limit
        self._sessions: dict[str, set[str]] = {}
        self._opening: dict[str, int] = {}
        """Requests that may open a session and have not answered yet, per client: they
        count against the limit, or a burst sent at once would all pass it."""

    def _live(self) -> Any:
        manager = getattr(self._server, "_session_manager", None)
        # The SDK's own table of open sessions (private): idle expiry is visible only there.
        return getattr(manager, "_server_instances", None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or _header(scope, b"mcp-session-id")
        ):
            await self._app(scope, receive, send)
            return
        client = _client_of(scope)
        live = self._live()
        held = self._sessions.setdefault(client, set())
        if live is not None:
            held.intersection_update(live)
        opening = self._opening.get(client, 0)
        if len(held) + opening >= self._limit:
            response = JSONResponse(
                {
                    "error": "too_many_sessions",
                    "message": f"this client holds {len(held)} open sessions (the limit); "
                    "end one (DELETE) or reuse it",
                },
                status_code=429,
                headers={"Retry-After": "60"},
            )
            await response(scope, receive, send)
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", ()):
                    if key.lower() == b"mcp-session-id":
                        held.add(value.decode("latin-1"))
            await send(message)

        self._opening[client] = opening + 1
        try:
            await self._app(scope, receive, watch)
        finally:
            left = self._opening[client] - 1
            if left:
                self._opening[client] = left
            else:
                del self._opening[client]
                if not held:  # nothing of this client's is open or opening
                    self._sessions.pop(client, None)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


def _client_of(scope: Scope) -> str:
    user = scope.get("user")
    identity = getattr(user, "identity", None) or getattr(user, "display_name", None)
    if getattr(user, "is_authenticated", False) and identity:
        return f"user:{identity}"
    peer = scope.get("client")
    return f"peer:{peer[0]}" if peer else "peer:unknown"


__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_SESSIONS_PER_CLIENT",
    "HttpLimits",
    "SessionCap",
    "guarded_protocol",
]
