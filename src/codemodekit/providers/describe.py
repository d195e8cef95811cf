"""A source's own one-line description, from what its upstream says about itself.

Told to the model with the source's name when it connects (``codemodekit.overview``), unless
``codemode.toml`` gives ``description``. Upstream text is data: it is cut to one line of at
most ``DESCRIPTION_CHARS`` characters and never trusted for anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DESCRIPTION_CHARS = 200


def one_line(text: Any, limit: int = DESCRIPTION_CHARS) -> str:
    """The first paragraph of ``text`` on one line, cut to ``limit`` characters."""
    if not isinstance(text, str):
        return ""
    paragraph = text.strip().split("\n\n", 1)[0]
    line = " ".join(paragraph.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def server_description(server: Any) -> str:
    """An MCP server's ``serverInfo``: its description, else its title, else its name."""
    if server is None:
        return ""
    for key in ("description", "title", "name"):
        text = one_line(getattr(server, key, None))
        if text:
            return text
    return ""


def document_title(root: Mapping[str, Any]) -> str:
    """An OpenAPI document's ``info.title`` (with ``info.summary`` when it has one)."""
    info = root.get("info")
    if not isinstance(info, Mapping):
        return ""
    title, summary = one_line(info.get("title")), one_line(info.get("summary"))
    return one_line(f"{title}: {summary}" if title and summary else title or summary)


def docstring_line(doc: str | None) -> str:
    """A Python module's docstring, first paragraph."""
    return one_line(doc)
