"""What the sandbox offers instead of a host global the code reached for.

``fetch(...)`` in the sandbox fails with QuickJS's bare ``ReferenceError: fetch is not
defined``; the model recovers at once when the message says what to use instead (as the
compiler's messages for ``import`` and ``enum`` do). Applied to uncaught errors only.
"""

from __future__ import annotations

import re

_NETWORK = (
    "the sandbox has no network access: call an API through its tool, "
    "`await tools.<source>.<tool>({...})` (search_tools finds them)"
)
_TIMERS = (
    "the sandbox has no timers: await tool calls directly "
    "(`await Promise.all([...])` runs several at once)"
)
_MODULES = (
    "the sandbox has no modules or host APIs: tools are reached through "
    "`tools.<source>.<tool>({...})`"
)
_HINTS = {
    **dict.fromkeys(("fetch", "XMLHttpRequest", "WebSocket", "EventSource"), _NETWORK),
    **dict.fromkeys(
        ("setTimeout", "setInterval", "setImmediate", "clearTimeout", "clearInterval"), _TIMERS
    ),
    **dict.fromkeys(("require", "module", "exports", "process", "__dirname", "Deno"), _MODULES),
    "Buffer": "the sandbox has no Buffer: bytes are `{ $bytes: <base64>, mediaType }` "
    "values, built and read with btoa/atob",
}
_NOT_DEFINED = re.compile(r"^ReferenceError: ([\w$]+) is not defined$")


def missing_global_hint(message: str) -> str:
    """``message`` with what to use instead, when it is a ReferenceError for a host global."""
    match = _NOT_DEFINED.match(message)
    hint = _HINTS.get(match.group(1)) if match else None
    return message if hint is None else f"{message}: {hint}"
