"""The one place that removes credentials from text and values the model or a log may see.

A source's resolved secrets (``${VAR}`` values, headers, API keys) can come back in many
encodings: an upstream echoes a header inside JSON (``\\"`` and ``\\/`` escapes, ``\\uXXXX``),
a URL (percent-encoding, either hex case, ``+`` for space), an HTML page (entities), or a
base64 blob such as ``Basic base64(user:secret)``. ``Scrubber`` masks every one of those
forms with ``***``; base64 is matched at each of the three byte alignments, so a secret
is found inside any longer base64 text.

Order matters where text is cut: always scrub first, then cut. Where a cut happened
before scrubbing could (a stream read up to a bound, a ring buffer of a child's stderr),
``mask_edges`` masks what may be the cut-off start or end of a secret at that edge.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_SECRET_CHARS = 3
"""Shorter values are not masked: they would erase ordinary text."""
MIN_BASE64_CORE = 6
MIN_EDGE_CHARS = 2
"""A cut-off piece of a secret at least this long is masked at a cut edge."""
_PERCENT = re.compile(r"%[0-9A-F]{2}")


def _lower_hex(text: str) -> str:
    return _PERCENT.sub(lambda m: m.group(0).lower(), text)


def _base64_cores(data: bytes) -> set[str]:
    """The characters of base64 text that depend only on ``data``, at each alignment."""
    out: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        first = -(-8 * offset // 6)  # first 6-bit group that starts inside ``data``
        last = (8 * (offset + len(data))) // 6  # groups ending inside ``data``
        core = encoded[first:last]
        if len(core) >= MIN_BASE64_CORE:
            out.add(core)
            out.add(core.translate(str.maketrans("+/", "-_")))
    return out


def forms_of(secret: str) -> set[str]:
    """Every encoding of ``secret`` that ``Scrubber`` masks."""
    if len(secret) < MIN_SECRET_CHARS:
        return set()
    forms = {secret}
    once = json.dumps(secret)[1:-1]
    twice = json.dumps(once)[1:-1]  # JSON carried inside a JSON string
    raw = json.dumps(secret, ensure_ascii=False)[1:-1]
    for escaped in (once, raw, twice, json.dumps(raw, ensure_ascii=False)[1:-1]):
        forms.update({escaped, escaped.replace("/", "\\/")})
    for encoded in (quote(secret, safe=""), quote(secret), quote_plus(secret, safe="")):
        forms.update({encoded, _lower_hex(encoded)})
    forms.update({html.escape(secret), html.escape(secret, quote=False)})
    data = secret.encode()
    for whole in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
        text = whole.decode()
        forms.update({text, text.rstrip("=")})
    forms.update(_base64_cores(data))
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f"}
_SHORT_ESCAPES.update({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _json_spellings(char: str) -> set[str]:
    """Every way a JSON encoder may write ``char`` inside a string: as itself (where JSON
    allows), its short escape, or ``\\uXXXX`` in either hex case (a UTF-16 pair beyond
    the BMP). Encoders differ in what they escape: Go's escapes ``& < >``, others ``'``
    ``=`` ``+``, non-ASCII or nothing more."""
    spellings = set()
    if char not in '"\\' and ord(char) >= 0x20:
        spellings.add(char)
    if char in _SHORT_ESCAPES:
        spellings.add(_SHORT_ESCAPES[char])
    units = char.encode("utf-16-be")
    escape = "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
    spellings.update({escape, escape.upper().replace("\\U", "\\u")})
    return spellings


def json_patterns(secret: str) -> list[str]:
    """Regular expressions for ``secret`` inside a JSON string, and inside a JSON string
    carried in another, each character spelled any way an encoder may (``_json_spellings``)."""
    if len(secret) < MIN_SECRET_CHARS:
        return []
    once = [_json_spellings(char) for char in secret]
    twice = [{json.dumps(s)[1:-1] for s in spellings} for spellings in once]
    return [
        "".join(
            "(?:" + "|".join(map(re.escape, sorted(alts, key=lambda a: (-len(a), a)))) + ")"
            for alts in level
        )
        for level in (twice, once)
    ]


class Scrubber:
    """Masks every form of a set of secrets (see the module doc). Falsy when empty."""

    __slots__ = ("_forms", "_matchers")

    def __init__(
        self, secrets: Iterable[str] = (), *, basic: Iterable[tuple[str, str]] = ()
    ) -> None:
        forms: set[str] = set()
        patterns: list[str] = []
        for secret in (*secrets, *(f"{user}:{password}" for user, password in basic)):
            forms |= forms_of(secret)
            patterns += json_patterns(secret)
        # Longest first: the regex takes the first alternative that matches at a position
        # (a JSON spelling is never shorter than the secret it spells).
        self._forms = tuple(sorted(forms, key=lambda f: (-len(f), f)))
        fixed = "|".join(map(re.escape, self._forms))
        self._matchers = (
            (_matcher(fixed), _matcher("|".join([*dict.fromkeys(patterns), fixed])))
            if forms
            else None
        )
        """For text without ``\\u`` or ``\\/`` the fixed forms, which spell every JSON
        escape but those two the one way JSON must; else the JSON spellings too, which
        cost about five times as much to search for."""

    def __bool__(self) -> bool:
        return self._matchers is not None

    def __repr__(self) -> str:
        return f"Scrubber({len(self._forms)} forms)"

    def __call__(self, text: str) -> str:
        if self._matchers is None or not text:
            return text
        fixed, spelled = self._matchers
        pattern, overlapping = spelled if "\\u" in text or "\\/" in text else fixed
        if pattern.search(text) is None:
            return text
        spans: list[list[int]] = []
        for match in overlapping.finditer(text):
            start, end = match.span(1)
            if spans and start < spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        pieces: list[str] = []
        last = 0
        for start, end in spans:
            pieces += (text[last:start], MASK)
            last = end
        pieces.append(text[last:])
        return "".join(pieces)

    def mask_edges(self, text: str, *, start: bool = False, end: bool = False) -> str:
        """Mask a piece of a secret at an edge where ``text`` was cut before scrubbing."""
        if self._matchers is None:
            return text
        for form in self._forms:
            for size in range(len(form) - 1, MIN_EDGE_CHARS - 1, -1):
                if end and text.endswith(form[:size]):
                    text = text[:-size] + MASK
                    break
            for size in range(len(form) - 1, MIN_EDGE_CHARS - 1, -1):
                if start and text.startswith(form[-size:]):
                    text = MASK + text[size:]
                    break
        return text

    def value(self, value: Any) -> Any:
        """Scrub every string (keys too) of a JSON-like value; other values are kept."""
        if self._matchers is None:
            return value
        return _walk(value, self)


def _matcher(alternatives: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A search for any alternative, and one for every match at every position, overlaps
    included: forms of one secret can overlap in a text (the raw value running into its
    JSON-escaped form), and masking the leftmost match alone would leave the rest of the
    other form readable."""
    return re.compile(alternatives), re.compile(f"(?=({alternatives}))")


def _walk(value: Any, scrub: Scrubber) -> Any:
    # Explicit stack: a hostile value may be nested far deeper than Python's recursion limit.
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if isinstance(item, str):
            parent[key] = scrub(item)
        elif isinstance(item, list | tuple):
            copy = list(item)
            parent[key] = copy  # a tuple becomes a list, as in JSON
            stack.extend((copy, index, child) for index, child in enumerate(copy))
        elif isinstance(item, Mapping):
            out: dict[Any, Any] = {}
            for k, child in item.items():
                out[scrub(k) if isinstance(k, str) else k] = child
            parent[key] = out
            stack.extend((out, k, child) for k, child in out.items())
    return root[0]


NO_SECRETS = Scrubber()

__all__ = ["MASK", "NO_SECRETS", "Scrubber", "forms_of"]
