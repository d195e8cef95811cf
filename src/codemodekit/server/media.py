"""Images and audio a run returns reach the model as MCP content blocks (issue 20).

A run that returns ``{ $bytes, mediaType: "image/…" }`` (ADR 0023), an MCP image or audio
content block as an upstream returned it (``{ type: "image", data, mimeType }``), or an
array holding such values is answered by ``run_typescript`` with one image (or audio)
content block per value beside the text result. In the text, each such value is replaced
by a short note (``{"$media": 1, "mediaType": "image/png", "bytes": 5120}``), so the model
reads the picture once instead of kilobytes of base64. ``structuredContent`` keeps the
returned value as it is: ``return`` stays the structured result.

Bounds: the returned value as a whole is already under ``final_result_bytes``;
at most ``MAX_MEDIA_BLOCKS`` values become blocks (the rest stay in the text as returned),
each must decode (valid base64, a media type ``image/*`` or ``audio/*``) and hold at most
``BYTES_LIMIT`` bytes.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from codemodekit.binary import BYTES_LIMIT, BytesValueError, decode_bytes_value, is_bytes_value

MAX_MEDIA_BLOCKS = 8
_KINDS = ("image", "audio")
_CONTENT_KEYS = frozenset({"type", "data", "mimeType", "annotations", "_meta"})

Block = types.ImageContent | types.AudioContent


def _as_media(value: Any) -> tuple[str, str, int] | None:
    """``(kind, mime type, decoded size)`` when ``value`` is an image or audio value whose
    base64 is valid; ``None`` otherwise."""
    if not isinstance(value, Mapping):
        return None
    if is_bytes_value(value):
        try:
            data, media = decode_bytes_value(value)
        except BytesValueError:
            return None
        mime = media or ""
        size = len(data)
    elif value.get("type") in _KINDS and set(value) <= _CONTENT_KEYS:
        declared, text = value.get("mimeType"), value.get("data")
        if not isinstance(declared, str) or not isinstance(text, str):
            return None
        mime = declared
        if len(text) // 4 * 3 > BYTES_LIMIT + 2:
            return None
        try:
            size = len(base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError):
            return None
    else:
        return None
    kind = mime.split("/", 1)[0].lower()
    return (kind, mime, size) if kind in _KINDS else None


def _block(value: Mapping[str, Any], kind: str, mime: str) -> Block:
    data = value["$bytes"] if "$bytes" in value else value["data"]
    if kind == "image":
        return types.ImageContent(type="image", data=data, mime_type=mime)
    return types.AudioContent(type="audio", data=data, mime_type=mime)


def split_media(value: Any) -> tuple[Any, list[Block]]:
    """``value`` with its images and audio replaced by notes, and their content blocks.

    Looks at the value itself and, when it is an array, at its elements (one level: a
    picture deep inside an object stays data)."""
    blocks: list[Block] = []

    def take(item: Any) -> Any:
        if len(blocks) >= MAX_MEDIA_BLOCKS:
            return item
        found = _as_media(item)
        if found is None:
            return item
        kind, mime, size = found
        blocks.append(_block(item, kind, mime))
        return {"$media": len(blocks), "mediaType": mime, "bytes": size}

    if isinstance(value, list):
        replaced = [take(item) for item in value]
        return (replaced if blocks else value), blocks
    return take(value), blocks


__all__ = ["MAX_MEDIA_BLOCKS", "split_media"]
