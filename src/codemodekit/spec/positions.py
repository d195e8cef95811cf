"""Where each key and value of a TOML document is, by key path.

``tomllib`` returns plain data with no positions, so errors found after parsing (by the
pydantic models or the loader) are mapped back to the file with this small scanner. It runs
only on text ``tomllib`` already accepted, so it can be lenient about malformed input; it
must never raise on valid TOML.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Span:
    """1-based line and column of a start position, and the length on that line."""

    line: int
    column: int
    length: int
    lines: int = 1
    """How many lines the value is written over (a multi-line string: more than one)."""


@dataclass(slots=True)
class Positions:
    keys: dict[KeyPath, Span] = field(default_factory=dict)
    """Where a key is written (for a table: its ``[header]``; for an array item: the item)."""
    values: dict[KeyPath, Span] = field(default_factory=dict)
    """Where a value is written (for a table: its ``[header]`` or ``{``)."""
    strings: list[tuple[KeyPath, Span]] = field(default_factory=list)
    """Every string value, for masking secrets in excerpts."""

    def key(self, path: KeyPath) -> Span | None:
        return self.keys.get(path)

    def value(self, path: KeyPath) -> Span | None:
        return self.values.get(path) or self.keys.get(path)

    def nearest(self, path: KeyPath) -> Span | None:
        """The position of ``path`` or of its closest written ancestor."""
        for end in range(len(path), 0, -1):
            span = self.keys.get(path[:end])
            if span is not None:
                return span
        return None


_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line_starts = [0]
        for index, char in enumerate(text):
            if char == "\n":
                self.line_starts.append(index + 1)
        self.out = Positions()
        self.array_tables: dict[KeyPath, int] = {}

    # -- positions --------------------------------------------------------------------
    def span(self, start: int, end: int) -> Span:
        line = _bisect(self.line_starts, start)
        line_start = self.line_starts[line]
        line_end = self.text.find("\n", start)
        if line_end == -1:
            line_end = len(self.text)
        length = max(1, min(end, line_end) - start)
        lines = self.text.count("\n", start, end) + 1
        return Span(line + 1, start - line_start + 1, length, lines)

    # -- low-level reading ------------------------------------------------------------
    def peek(self, offset: int = 0) -> str:
        index = self.i + offset
        return self.text[index] if index < len(self.text) else ""

    def skip_inline_space(self) -> None:
        while self.peek() in (" ", "\t"):
            self.i += 1

    def skip_space_comments_newlines(self) -> None:
        while True:
            char = self.peek()
            if char in (" ", "\t", "\r", "\n"):
                self.i += 1
            elif char == "#":
                self.skip_to_eol()
            else:
                return

    def skip_to_eol(self) -> None:
        end = self.text.find("\n", self.i)
        self.i = len(self.text) if end == -1 else end

    def read_key_part(self) -> str:
        char = self.peek()
        if char == '"':
            return self.read_basic_string()
        if char == "'":
            end = self.text.find("'", self.i + 1)
            end = len(self.text) if end == -1 else end
            value = self.text[self.i + 1 : end]
            self.i = end + 1
            return value
        start = self.i
        while self.peek() in _BARE and self.peek() != "":
            self.i += 1
        if self.i == start:  # not a key: step over one character so scanning always advances
            self.i += 1
        return self.text[start : self.i]

    def read_dotted_key(self) -> list[tuple[str, int, int]]:
        parts: list[tuple[str, int, int]] = []
        while True:
            self.skip_inline_space()
            start = self.i
            name = self.read_key_part()
            parts.append((name, start, self.i))
            self.skip_inline_space()
            if self.peek() == ".":
                self.i += 1
                continue
            return parts

    def read_basic_string(self) -> str:
        self.i += 1  # opening quote
        chars: list[str] = []
        while self.i < len(self.text):
            char = self.text[self.i]
            if char == '"':
                self.i += 1
                break
            if char == "\\":
                nxt = self.peek(1)
                chars.append(_ESCAPES.get(nxt, nxt))
                self.i += 2
                continue
            chars.append(char)
            self.i += 1
        return "".join(chars)

    def skip_string(self) -> None:
        quote = self.peek()
        if self.text.startswith(quote * 3, self.i):
            end = self.text.find(quote * 3, self.i + 3)
            if end == -1:
                self.i = len(self.text)
                return
            end += 3
            while self.text.startswith(quote, end):  # up to two quotes may close the content
                end += 1
            self.i = end
        elif quote == '"':
            self.read_basic_string()
        else:
            end = self.text.find("'", self.i + 1)
            self.i = len(self.text) if end == -1 else end + 1

    # -- structure --------------------------------------------------------------------
    def scan(self) -> Positions:
        table: KeyPath = ()
        while True:
            self.skip_space_comments_newlines()
            if self.i >= len(self.text):
                return self.out
            if self.peek() == "[":
                table = self.header()
            else:
                self.key_value(table)
            self.skip_inline_space()
            if self.peek() == "#":
                self.skip_to_eol()

    def header(self) -> KeyPath:
        start = self.i
        is_array = self.peek(1) == "["
        self.i += 2 if is_array else 1
        parts = [name for name, _, _ in self.read_dotted_key()]
        self.i += 2 if is_array else 1
        path: KeyPath = ()
        for index, name in enumerate(parts):
            path = (*path, name)
            self.out.keys.setdefault(path, self.span(start, self.i))
            last = index == len(parts) - 1
            if last and is_array:
                count = self.array_tables.get(path, 0)
                self.array_tables[path] = count + 1
                path = (*path, count)
            elif path in self.array_tables:
                path = (*path, self.array_tables[path] - 1)
            self.out.keys.setdefault(path, self.span(start, self.i))
        self.out.keys.setdefault(path, self.span(start, self.i))
        self.out.values.setdefault(path, self.span(start, self.i))
        return path

    def key_value(self, table: KeyPath) -> None:
        parts = self.read_dotted_key()
        path = table
        for name, start, end in parts:
            path = (*path, name)
            self.out.keys.setdefault(path, self.span(start, end))
        if self.peek() == "=":
            self.i += 1
        self.skip_inline_space()
        self.value(path)

    def value(self, path: KeyPath) -> None:
        start = self.i
        char = self.peek()
        # Containers span to their closing bracket (the caret is cut at the line's end).
        if char == "{":
            self.i += 1
            self.inline_table(path)
            self.out.values[path] = self.span(start, self.i)
        elif char == "[":
            self.i += 1
            self.array(path)
            self.out.values[path] = self.span(start, self.i)
        elif char in ('"', "'"):
            self.skip_string()
            span = self.span(start, self.i)
            self.out.values[path] = span
            self.out.strings.append((path, span))
        else:
            while self.peek() not in ("", ",", "]", "}", "#", "\n", "\r"):
                self.i += 1
            end = self.i
            while end > start and self.text[end - 1] in (" ", "\t"):
                end -= 1
            self.out.values[path] = self.span(start, end)

    def inline_table(self, path: KeyPath) -> None:
        while True:
            self.skip_inline_space()
            char = self.peek()
            if char in ("}", ""):
                self.i += 1
                return
            if char == ",":
                self.i += 1
                continue
            before = self.i
            self.key_value(path)
            if self.i == before:
                self.i += 1

    def array(self, path: KeyPath) -> None:
        index = 0
        while True:
            self.skip_space_comments_newlines()
            char = self.peek()
            if char in ("]", ""):
                self.i += 1
                return
            if char == ",":
                self.i += 1
                continue
            item = (*path, index)
            start = self.i
            self.value(item)
            self.out.keys[item] = self.span(start, self.i)
            if self.i == start:
                self.i += 1
            index += 1


def _bisect(starts: list[int], offset: int) -> int:
    low, high = 0, len(starts) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if starts[middle] <= offset:
            low = middle
        else:
            high = middle - 1
    return low


def parse_dotted_key(text: str) -> tuple[str, ...]:
    """``sources."deployment-api".env`` → ``("sources", "deployment-api", "env")``."""
    return tuple(name for name, _, _ in _Scanner(text).read_dotted_key())


def scan_positions(text: str) -> Positions:
    """Positions of every key and value in ``text`` (which ``tomllib`` has accepted)."""
    return _Scanner(text).scan()
