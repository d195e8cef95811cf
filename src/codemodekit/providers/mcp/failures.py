"""Failures of an MCP source: short sanitized reasons, and the reconnect backoff.

The SDK reports failures as ``MCPError``, ``httpx2`` errors, ``OSError`` and anyio exception
groups; a health message needs one clause a person can act on, and never a secret.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx2
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from codemodekit.errors import SourceUnavailable
from codemodekit.providers.mcp.content import sanitize
from codemodekit.scrub import Scrubber


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """Bounded exponential backoff with jitter between reconnect attempts."""

    initial_s: float = 0.5
    max_s: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2
    """Each delay is multiplied by a random factor in ``[1 - jitter, 1 + jitter]``."""

    def delay(self, attempt: int) -> float:
        base = min(self.max_s, self.initial_s * self.factor ** min(attempt, 64))
        return base * random.uniform(1.0 - self.jitter, 1.0 + self.jitter)


def describe_connect_failure(
    exc: BaseException, *, http_status: int | None, redact: Scrubber
) -> str:
    """Why a connection (handshake or first ``tools/list``) failed, in one clause."""
    leaf = first_leaf(exc)
    if http_status in (401, 403):
        return f"HTTP {http_status} from the server: check the credentials in `headers`"
    if http_status is not None and isinstance(leaf, MCPError | httpx2.HTTPError):
        return f"HTTP {http_status} from the server"
    if isinstance(leaf, SourceUnavailable):
        return str(leaf)
    if isinstance(leaf, FileNotFoundError):
        return "the command was not found (check `command` and PATH)"
    if isinstance(leaf, PermissionError):
        return "the command is not executable"
    if isinstance(leaf, MCPError):
        if leaf.error.code == types.CONNECTION_CLOSED:
            return "the server closed the connection during the handshake"
        message = sanitize(leaf.error.message, 300, redact)
        return f"the server refused the handshake: {message}"
    if isinstance(leaf, httpx2.HTTPStatusError):
        return f"HTTP {leaf.response.status_code} from the server"
    if isinstance(leaf, httpx2.ConnectError | httpx2.ConnectTimeout):
        return "cannot connect (is the server running?)"
    if isinstance(leaf, httpx2.HTTPError):
        return f"HTTP transport error ({type(leaf).__name__})"
    if isinstance(leaf, ValidationError):
        return "the server sent a malformed response"
    if isinstance(leaf, OSError):
        reason = sanitize(leaf.strerror or type(leaf).__name__, 200, redact)
        return f"cannot start the process ({reason})"
    if isinstance(leaf, RuntimeError) and "protocol version" in str(leaf):
        # e.g. the server answered `initialize` with a version this client does not speak.
        return sanitize(str(leaf), 200, redact)
    return f"{type(leaf).__name__}: {sanitize(str(leaf), 200, redact)}"


def is_http_refusal(exc: MCPError) -> bool:
    """The SDK's Streamable HTTP client folds transport-level refusals (a non-2xx answer
    without a JSON-RPC body, a 404 for a forgotten session) into these two errors."""
    message = exc.error.message
    return (
        exc.error.code == types.INTERNAL_ERROR and message == "Server returned an error response"
    ) or (exc.error.code == types.INVALID_REQUEST and message == "Session terminated")


def first_leaf(exc: BaseException) -> BaseException:
    """The first real failure inside anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


_SDK_WORDS = {
    types.CONNECTION_CLOSED: (
        "Connection closed",
        "SSE stream ",
        "server answered a request with 202 Accepted",
    ),
    types.REQUEST_TIMEOUT: ("Request ", "Timed out after "),
}
"""How the SDK words the errors it makes itself (``mcp.shared.jsonrpc_dispatcher``, its
Streamable HTTP client): the start of each message."""


def sdk_error(error: types.ErrorData, code: int) -> bool:
    """``error`` is the SDK's own ``code`` (a closed transport, a request past its timeout),
    as it makes them: no data, its own words. An upstream's ``-32000 rate limited`` is its
    own refusal; one that copies the SDK's words exactly harms only its own calls."""
    return (
        error.code == code
        and error.data is None
        and error.message.startswith(_SDK_WORDS.get(code, ()))
    )
