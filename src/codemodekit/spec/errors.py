"""``SpecError``: a problem in ``codemode.toml``, shown as ``file:LINE:COL: key.path: message``.

Every issue carries the offending line as an excerpt with a caret under the key or value.
Secret-bearing strings (``env``, ``headers``, ``auth``, and any key the format does not
know) are masked in excerpts, and error messages never quote their values.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codemodekit.errors import CodeModeError
from codemodekit.spec.positions import KeyPath, Positions, Span

MAX_SHOWN = 8
"""Issues rendered by ``str(SpecError)``; the rest are counted, to keep one screen."""

SECRET_TABLES = frozenset({"env", "headers", "auth"})
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_VAR = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_AUTH_SCHEME = re.compile(r"^\s*(?:Bearer|Basic|Token)?\s*$")


def format_key(path: KeyPath) -> str:
    """``("sources", "deployment-api", "args", 0)`` → ``sources.deployment-api.args[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if _BARE_KEY.match(part) else json.dumps(part, ensure_ascii=False)
        out += f".{text}" if out else text
    return out


def is_secret_path(path: KeyPath) -> bool:
    """Values never shown: ``sources.NAME.env|headers|auth…``, and values under an unknown
    key that may be a misspelt secret table: one close to ``env``/``headers``/``auth``
    (``evn``, ``header``, ``auths``) at any level, or a key beside a source's secret tables
    that resembles no key of the format (``token``). A plain typo of a plain key
    (``nmae``, ``modul``) stays readable.
    """
    if not path or not isinstance(path[0], str):
        return False
    top, source_keys = _plain_keys()
    head = path[0]
    if head == "sources":
        if len(path) < 3 or not isinstance(path[2], str):
            return False
        key = path[2]
        if key in SECRET_TABLES:
            return True
        if key in source_keys:
            return False
        rest = path[2:]
    elif head in top:
        return False
    else:
        if not _close(head, top):
            return True  # an unknown table that resembles nothing: it may hold anything
        rest = path[1:]
    if any(isinstance(part, str) and _close(part, SECRET_TABLES) for part in rest):
        return True
    return head == "sources" and not _close(str(path[2]), source_keys)


def _close(word: str, choices: frozenset[str]) -> bool:
    return word in choices or bool(difflib.get_close_matches(word, choices, n=1, cutoff=0.6))


@functools.cache
def _plain_keys() -> tuple[frozenset[str], frozenset[str]]:
    """(top-level keys, source keys) of the format whose values are not secret."""
    from codemodekit.spec.raw import SOURCE_MODELS, RawSpec  # raw imports nothing from here

    top = {field.alias or name for name, field in RawSpec.model_fields.items()}
    source: set[str] = set()
    for model in SOURCE_MODELS.values():
        source |= {field.alias or name for name, field in model.model_fields.items()}
    return frozenset(top), frozenset(source - SECRET_TABLES)


@dataclass(frozen=True, slots=True)
class SpecIssue:
    """One problem: where it is, which key, what is wrong, and the line to show."""

    line: int
    column: int
    key: str
    """Dotted key path (``limits.compute_time_ms``); empty for a TOML syntax error."""
    message: str
    excerpt: str | None = None
    """The offending line, secrets masked."""
    caret_column: int = 1
    """1-based column of the caret in ``excerpt`` (differs from ``column`` when masked)."""
    caret_length: int = 1

    def render(self, file: str) -> str:
        if self.line <= 0:
            return f"{file}: {self.message}"
        label = self.key if self.key else "invalid TOML"
        head = f"{file}:{self.line}:{self.column}: {label}: {self.message}"
        if self.excerpt is None:
            return head
        gutter = " " * len(str(self.line))
        excerpt, caret_column, caret_length = _window(
            self.excerpt, self.caret_column, max(1, self.caret_length)
        )
        pad = "".join("\t" if c == "\t" else " " for c in excerpt[: caret_column - 1])
        return f"{head}\n {self.line} | {excerpt}\n {gutter} | {pad}{'^' * caret_length}"


EXCERPT_WIDTH = 100
"""Characters of the offending line shown; a longer line is cut around the caret."""


def _window(excerpt: str, caret_column: int, caret_length: int) -> tuple[str, int, int]:
    # One screen: a 5,000-character line would wrap over a whole terminal.
    if len(excerpt) <= EXCERPT_WIDTH:
        return excerpt, caret_column, caret_length
    start = max(0, min(caret_column - 1 - EXCERPT_WIDTH // 3, len(excerpt) - EXCERPT_WIDTH))
    end = start + EXCERPT_WIDTH
    shown = ("…" if start > 0 else "") + excerpt[start:end] + ("…" if end < len(excerpt) else "")
    column = caret_column - start + (1 if start > 0 else 0)
    length = max(1, min(caret_length, end - (caret_column - 1)))
    return shown, column, length


class SpecError(CodeModeError):
    """``codemode.toml`` is malformed. ``str()`` is the one-screen report.

    ``file``, ``line``, ``column``, ``key`` and ``message`` describe the first problem;
    ``issues`` holds every problem found, in file order.
    """

    def __init__(self, file: str | os.PathLike[str], issues: Sequence[SpecIssue]) -> None:
        if not issues:
            raise ValueError("SpecError needs at least one issue")
        self.file = Path(file)
        self.display_name = os.fspath(file)
        self.issues = tuple(issues)
        first = self.issues[0]
        self.line = first.line
        self.column = first.column
        self.key = first.key
        self.message = first.message
        super().__init__(self.render())

    def __reduce__(self) -> tuple[type[SpecError], tuple[str, tuple[SpecIssue, ...]]]:
        # The default would call SpecError(rendered_text) and lose the issues.
        return (SpecError, (self.display_name, self.issues))

    def render(self) -> str:
        shown = [issue.render(self.display_name) for issue in self.issues[:MAX_SHOWN]]
        hidden = len(self.issues) - len(shown)
        if hidden:
            shown.append(f"... and {hidden} more problem{'s' if hidden > 1 else ''}")
        return "\n\n".join(shown)

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        return (
            f"SpecError(file={self.display_name!r}, line={self.line}, column={self.column}, "
            f"key={self.key!r}, message={self.message!r}, issues={len(self.issues)})"
        )


class SourceText:
    """The spec's text and scanned positions: turns key paths into located issues."""

    def __init__(self, text: str, positions: Positions) -> None:
        self.lines = text.splitlines()
        self.positions = positions
        # Where to point for something missing at the top level: the first real line.
        self.first_content_line: int | None = next(
            (
                number
                for number, line in enumerate(self.lines, 1)
                if line.strip() and not line.lstrip().startswith("#")
            ),
            None,
        )

    def issue(
        self,
        path: KeyPath,
        message: str,
        *,
        anchor: Literal["key", "value", "table"] = "value",
        display: KeyPath | None = None,
    ) -> SpecIssue:
        """An issue for ``path``; the caret goes under the key, its value or the nearest
        written ancestor (for a missing key: its table's header)."""
        span: Span | None
        if anchor == "key":
            span = self.positions.key(path)
        elif anchor == "value":
            span = self.positions.value(path)
        else:
            span = None
        if span is None:
            span = self.positions.nearest(path[:-1] if anchor == "table" else path)
        key = format_key(path if display is None else display)
        if span is None:
            line = self.first_content_line
            if line is None:  # nothing but blanks and comments: no line worth showing
                return SpecIssue(1, 1, key, message)
            return self.at(line, 1, len(self.lines[line - 1].strip()), key, message)
        return self.at(span.line, span.column, span.length, key, message)

    def at(self, line: int, column: int, length: int, key: str, message: str) -> SpecIssue:
        if not 1 <= line <= len(self.lines):
            return SpecIssue(line, column, key, message)
        excerpt, caret, limit = self._masked(line, column)
        length = min(length, limit) if limit else length
        return SpecIssue(line, column, key, message, excerpt.rstrip(), caret, length)

    def _masked(self, line: int, column: int) -> tuple[str, int, int]:
        """The line with secret strings masked, where ``column`` moved to, and the masked
        length of the string that starts at ``column`` (0 if none was masked there)."""
        text = self.lines[line - 1]
        spans = sorted(
            (span for path, span in self.positions.strings if is_secret_path(path)),
            key=lambda s: (s.line, s.column),
        )
        if any(s.line < line < s.line + s.lines for s in spans):
            return MASK, 1, len(MASK)  # a line inside a multi-line secret string: all of it
        caret = column
        limit = 0
        for span in reversed([s for s in spans if s.line == line]):
            start, end = span.column - 1, span.column - 1 + span.length
            original = text[start:end]
            if len(original) < 2:
                continue
            # Its closing quote only if it closes on this line (an unterminated string, or
            # one that goes on to the next lines, ends in its own text).
            closed = span.lines == 1 and original[-1] == original[0]
            inner = original[1:-1] if closed else original[1:]
            masked = original[0] + mask_secret(inner) + (original[-1] if closed else "")
            text = text[:start] + masked + text[end:]
            if column - 1 >= end:
                caret += len(masked) - len(original)
            elif column - 1 >= start:
                limit = len(masked)
        return text, caret, limit


MASK = "***"
"""What a secret's literal text is shown as."""


def mask_secret(content: str) -> str:
    """Keep ``${VAR}`` references and an auth scheme word; hide any other literal text."""
    pieces: list[str] = []
    last = 0
    for match in _VAR.finditer(content):
        pieces.append(_mask_literal(content[last : match.start()]))
        pieces.append(match.group(0))
        last = match.end()
    pieces.append(_mask_literal(content[last:]))
    return "".join(pieces)


def _mask_literal(text: str) -> str:
    return text if _AUTH_SCHEME.match(text) else MASK
