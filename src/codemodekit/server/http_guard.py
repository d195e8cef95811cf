"""DNS-rebinding guard for ``codemode serve --transport http`` on a loopback address.

A page on ``evil.example`` can make a browser resolve its own name to a loopback address
and then talk to a server that listens there; the only tell is the ``Host`` (and
``Origin``) header, which still names ``evil.example``. The ``mcp`` SDK guards only the
three spellings ``127.0.0.1``, ``localhost`` and ``::1``; this guard covers every loopback
bind (all of ``127.0.0.0/8`` and ``::1`` however it is spelt) the same way:

- ``Host`` must name a loopback IP literal or ``localhost`` (421 otherwise, or if absent);
- ``Origin``, when present, must be ``http(s)://`` with such a host (403 otherwise,
  including the opaque ``null`` origin).

A name an attacker controls can never pass, whatever it resolves to. Non-loopback binds
require a bearer token instead (see ``server.hosting.serve_http``).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


def is_loopback(host: str) -> bool:
    """True when ``host`` is ``localhost`` or a loopback IP literal (any spelling)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(literal).is_loopback
    except ValueError:
        return False


def _host_of(authority: str) -> str | None:
    """The host part of a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``)."""
    authority = authority.strip()
    if not authority:
        return None
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return None
        rest = authority[end + 1 :]
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return authority[1:end]
    name, sep, port = authority.rpartition(":")
    if not sep:
        return authority
    if ":" in name or not port.isdigit():
        return None  # a bare IPv6 literal is not a valid Host header
    return name


def host_allowed(value: str | None) -> bool:
    if value is None:
        return False
    host = _host_of(value)
    return host is not None and is_loopback(host)


def origin_allowed(value: str | None) -> bool:
    if value is None:
        return True  # non-browser clients and same-origin navigations send none
    try:
        parts = urlsplit(value.strip())
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not host:
        return False
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return False
    return is_loopback(host)


def _header(scope: Scope, name: bytes) -> str | None:
    found: str | None = None
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            if found is not None:
                return "\x00"  # repeated header: ambiguous, never allowed
            found = value.decode("latin-1")
    return found


class LoopbackGuard:
    """ASGI middleware enforcing loopback ``Host``/``Origin`` headers (see module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self._app(scope, receive, send)
            return
        if not host_allowed(_header(scope, b"host")):
            status, text = 421, "Invalid Host header: this server only answers to a loopback host"
        elif not origin_allowed(_header(scope, b"origin")):
            status, text = 403, "Invalid Origin header: cross-site requests are refused"
        else:
            await self._app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await PlainTextResponse(text, status_code=status)(scope, receive, send)


__all__ = ["LoopbackGuard", "host_allowed", "is_loopback", "origin_allowed"]
