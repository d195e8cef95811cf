"""Map a QuickJS position in compiled JavaScript back to the user's own line and column.

Kept apart from ``compiler`` so that the sandbox (and its worker processes) can map error
positions without importing tree-sitter.
"""

from __future__ import annotations

import re
from functools import lru_cache

from codemodekit.errors import Location
from codemodekit.sandbox.base import CompiledProgram

LINE_BREAK = re.compile(r"\r\n|[\n\r\u2028\u2029]")


@lru_cache(maxsize=8)
def _lines(javascript: str) -> list[str]:
    # One split per program, not per stack frame: an error's stack may list many frames.
    return LINE_BREAK.split(javascript)


def user_location(program: CompiledProgram, line: int, column: int) -> Location | None:
    """Map a QuickJS position in ``program.javascript`` to the user's own code.

    ``line`` is 1-based in the JavaScript, ``column`` the 1-based UTF-8 byte column QuickJS
    reports. Returns ``None`` for positions in the wrapper. Erasure keeps every character at
    its index, so the code-point column in the JavaScript line is the user's column.
    """
    user_line = line - program.line_offset
    if user_line < 1:
        return None
    lines = _lines(program.javascript)
    if line > len(lines) - 1:  # the last line is the wrapper tail
        return None
    text = lines[line - 1].encode("utf-8", "surrogatepass")
    prefix = text[: max(column - 1, 0)].decode("utf-8", "ignore")
    return Location(user_line, len(prefix) + 1)
