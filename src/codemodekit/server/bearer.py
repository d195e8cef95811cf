"""The bearer-token rule of ``codemode serve --transport http``, shared by the MCP endpoint
(``server.hosting``) and the operations endpoints (``server.operations``)."""

from __future__ import annotations

import hashlib
import hmac

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


class BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``.

    The scheme is case-insensitive (RFC 6750); the token is compared in constant time
    (``hmac.compare_digest`` over SHA-256 digests, so not even its length leaks). Anything
    else gets 401 with ``WWW-Authenticate: Bearer`` and no detail. The token is never logged.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the bearer token must not be empty")
        self._app = app
        self._expected = hashlib.sha256(token.encode()).digest()

    def __repr__(self) -> str:
        return "BearerAuth(token=***)"

    def _authorized(self, scope: Scope) -> bool:
        supplied = b""
        for key, value in scope.get("headers", ()):
            if key.lower() == b"authorization":
                supplied = value
                break
        scheme, _, token = supplied.strip().partition(b" ")
        digest = hashlib.sha256(token.strip()).digest()
        # Compare even when the scheme is wrong, so timing does not tell the two apart.
        matches = hmac.compare_digest(digest, self._expected)
        return matches and scheme.lower() == b"bearer"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self._app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        response = JSONResponse(
            {"error": "unauthorized", "message": "a valid bearer token is required"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)
