"""What the CLI prints is inert in a terminal.

Text from the model (console lines, errors, results), an upstream (descriptions, errors,
stderr) or a file can hold control characters and escape sequences that retitle the
window, clear the screen, move the cursor, overwrite a line (``\\r``) or, in some
terminals, answer back. Every control character but tab and newline (C0, DEL and C1) is
written as a visible ``\\xNN`` escape. ``serve`` keeps its standard output as it is: over
stdio that is the protocol (JSON, whose strings escape C0 anyway).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


_JSON_UNESCAPED = re.compile(r"[\x7f-\x9f]")


def json_text(value: Any, **options: Any) -> str:
    """``value`` as JSON for the CLI's ``--json`` output: non-ASCII as itself, and DEL and
    C1, which ``json.dumps`` leaves raw, as ``\\u00XX`` escapes. Raw they would reach the
    terminal, or become ``inert``'s ``\\xNN``, which is no JSON escape."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return _JSON_UNESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def inert(text: str) -> str:
    """``text`` with every control character but tab and newline as ``\\xNN``."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class InertStream:
    """A text stream that writes ``inert`` text to the stream it wraps."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(inert(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def inert_output(*, stdout: bool = True) -> Iterator[None]:
    """``sys.stderr`` (and ``sys.stdout`` unless told not to) inert while inside."""
    saved = sys.stdout, sys.stderr
    if stdout and not isinstance(sys.stdout, InertStream):
        sys.stdout = InertStream(sys.stdout)
    if not isinstance(sys.stderr, InertStream):
        sys.stderr = InertStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
