"""Binary values at the tool boundary: the tagged shape ``{ $bytes, mediaType }``.

Model-written code sees JSON only. Bytes cross the bridge, in either direction, as
``{"$bytes": "<base64>", "mediaType": "image/png"}`` (``mediaType`` optional), at most
``BYTES_LIMIT`` decoded bytes per value; typed arrays, ``ArrayBuffer``, ``Map``, ``Set`` and
``Date`` objects are refused inside the sandbox with their JSON path. See ADR 0023.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

BYTES_LIMIT = 4 * 1024 * 1024
"""Decoded bytes in one ``$bytes`` value (the sandbox prelude holds the same number)."""

_MEDIA = re.compile(r"[A-Za-z0-9!#$&^_.+-]{1,100}/[A-Za-z0-9!#$&^_.+-]{1,100}(?:;[ -~]{0,150})?")
"""A media type with optional parameters: printable ASCII only (it becomes a header)."""

BYTES_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "description": 'Binary data: { $bytes: "<base64>", mediaType?: "image/png" }',
    "properties": {
        "$bytes": {"type": "string", "contentEncoding": "base64"},
        "mediaType": {"type": "string", "maxLength": 255},
    },
    "required": ["$bytes"],
    "additionalProperties": False,
}
"""The JSON Schema of the tagged shape, for tool inputs and outputs that carry bytes."""


class BytesValueError(ValueError):
    """A ``$bytes`` value that is malformed or over ``BYTES_LIMIT``."""


def is_bytes_value(value: Any) -> bool:
    return isinstance(value, Mapping) and "$bytes" in value


def bytes_value(
    data: bytes | bytearray | memoryview, media_type: str | None = None
) -> dict[str, Any]:
    """The tagged shape for ``data``; raises ``BytesValueError`` over ``BYTES_LIMIT``."""
    raw = bytes(data)
    if len(raw) > BYTES_LIMIT:
        raise BytesValueError(
            f"{len(raw)} bytes exceed the {BYTES_LIMIT}-byte limit of a $bytes value"
        )
    value: dict[str, Any] = {"$bytes": base64.b64encode(raw).decode("ascii")}
    if media_type:
        value["mediaType"] = media_type
    return value


def decode_bytes_value(value: Any, *, limit: int = BYTES_LIMIT) -> tuple[bytes, str | None]:
    """``(data, media type)`` of a tagged value; ``BytesValueError`` says what is wrong."""
    if not is_bytes_value(value):
        raise BytesValueError('expected binary data as { $bytes: "<base64>", mediaType? }')
    extra = sorted(set(value) - {"$bytes", "mediaType"})
    if extra:
        raise BytesValueError(f"a $bytes value has only `$bytes` and `mediaType`, not {extra[0]!r}")
    text = value["$bytes"]
    media = value.get("mediaType")
    if not isinstance(text, str):
        raise BytesValueError("`$bytes` must be base64 text")
    if media is not None and not (isinstance(media, str) and _MEDIA.fullmatch(media)):
        raise BytesValueError("`mediaType` must be a media type such as 'image/png'")
    if len(text) // 4 * 3 > limit + 2:
        raise BytesValueError(f"a $bytes value holds at most {limit} bytes")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BytesValueError("`$bytes` must be base64 text") from None
    if len(data) > limit:
        raise BytesValueError(f"a $bytes value holds at most {limit} bytes")
    return data, media


def tag_bytes(value: Any, *, depth: int = 0) -> Any:
    """``value`` with every ``bytes``-like inside replaced by its tagged shape; other values
    unchanged. For tools that return nested binary data (a bare ``bytes`` result is refused
    as ``TOOL_RESULT_INVALID``: binary data is tagged explicitly)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes_value(value, "application/octet-stream")
    if depth > 64:
        return value
    if isinstance(value, dict):
        if any(isinstance(v, bytes | bytearray | memoryview | dict | list) for v in value.values()):
            return {k: tag_bytes(v, depth=depth + 1) for k, v in value.items()}
        return value
    if isinstance(value, list):
        return [tag_bytes(v, depth=depth + 1) for v in value]
    return value


__all__ = [
    "BYTES_LIMIT",
    "BYTES_SCHEMA",
    "BytesValueError",
    "bytes_value",
    "decode_bytes_value",
    "is_bytes_value",
    "tag_bytes",
]
