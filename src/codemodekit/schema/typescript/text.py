"""Text of the projection: type names, property names, string literals and JSDoc."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from codemodekit.schema.typescript.lib_globals import TS_LIB_GLOBALS

_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_WORDS = re.compile(r"[A-Za-z0-9]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


# Names the shared result contract declares, and every global of the TypeScript lib the
# generated tsconfig.json checks against: a projected name must never be one of them (an
# interface of a built-in's name merges into it, a type alias clashes with it).
RESERVED_TYPE_NAMES = (
    frozenset(
        {
            "ToolResult",
            "ToolCallError",
            "ContentBlock",
            "TextContent",
            "ImageContent",
            "AudioContent",
            "ResourceLinkContent",
            "EmbeddedResource",
        }
    )
    | TS_LIB_GLOBALS
)

# Keywords that describe rather than constrain; a ``$ref`` with only these beside it is
# still just the named type.

# JSDoc tags for constraints TypeScript cannot express, in output order.
_CONSTRAINT_TAGS = (
    "format",
    "pattern",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contentMediaType",
    "contentEncoding",
)

# Dialects in which keywords beside ``$ref`` are ignored.


def pascal_case(text: str) -> str:
    """``search_issues`` → ``SearchIssues``; ASCII only, never empty, never a digit first."""
    words = _WORDS.findall(text)
    name = "".join(w[0].upper() + w[1:] for w in words)
    if not name:
        return "T"
    return "T" + name if name[0].isdigit() else name


def _escape_surrogates(text: str) -> str:
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


_LINE_SEPARATORS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029"})
"""Legal inside a string literal since ES2019, but a line end to older tools and to any
reader that splits the text into lines: written as escapes."""


def ts_string(value: str) -> str:
    """A TypeScript string literal (JSON syntax is valid TypeScript), on one line."""
    return _escape_surrogates(json.dumps(value, ensure_ascii=False)).translate(_LINE_SEPARATORS)


def is_identifier(name: str) -> bool:
    """``name`` is a plain JavaScript identifier, as a whole (``re.match``'s ``$`` also
    matches before a final newline: ``"id\\n"`` passed as ``id``)."""
    return _IDENTIFIER.fullmatch(name) is not None


def one_line(text: str) -> str:
    """``text`` safe in a ``//`` comment: every run of whitespace, line terminators among
    them (LF, CR, U+2028, U+2029: each ends a TypeScript comment), becomes one space."""
    return " ".join(text.split())


def property_name(key: str) -> str:
    """An identifier as is; anything else quoted."""
    return key if is_identifier(key) else ts_string(key)


def _doc_text(text: str) -> str:
    # ``*/`` would close the comment early.
    return _escape_surrogates(text.replace("*/", "*\\/").replace("\r\n", "\n").replace("\r", "\n"))


def jsdoc(lines: Sequence[str], indent: str = "") -> str:
    """A JSDoc block (with trailing newline), or ``""`` when there is nothing to say."""
    flat: list[str] = []
    for line in lines:
        flat.extend(_doc_text(line).split("\n"))
    while flat and not flat[-1].strip():
        flat.pop()
    if not flat:
        return ""
    if len(flat) == 1:
        return f"{indent}/** {flat[0].strip()} */\n"
    body = "".join(f"{indent} *{' ' + line.rstrip() if line.strip() else ''}\n" for line in flat)
    return f"{indent}/**\n{body}{indent} */\n"


def _json_value(value: Any) -> str:
    try:
        return _escape_surrogates(json.dumps(value, ensure_ascii=False, sort_keys=True))
    except (TypeError, ValueError):
        return "?"


def schema_doc_lines(schema: Any) -> list[str]:
    """Description, default, constraints and deprecation of one schema, as JSDoc lines."""
    if not isinstance(schema, Mapping):
        return []
    lines: list[str] = []
    description = schema.get("description")
    title = schema.get("title")
    if isinstance(description, str) and description.strip():
        lines.append(description.strip())
    elif isinstance(title, str) and title.strip():
        lines.append(title.strip())
    if schema.get("type") == "integer" or (
        isinstance(schema.get("type"), list | tuple) and "integer" in schema["type"]
    ):
        lines.append("@integer")
    if "default" in schema:
        lines.append(f"@default {_json_value(schema['default'])}")
    for key in _CONSTRAINT_TAGS:
        if key in schema:
            value = schema[key]
            shown = value if isinstance(value, str) else _json_value(value)
            if isinstance(value, bool) and not value:
                continue
            lines.append(f"@{key} {shown}")
    examples = schema.get("examples")
    if isinstance(examples, list | tuple):
        lines.extend(f"@example {_json_value(e)}" for e in list(examples)[:3])
    if schema.get("deprecated") is True:
        lines.append("@deprecated")
    return lines


class TypeNames:
    """The type names taken in one ``.d.ts`` file; allocation is first come, first served."""

    def __init__(self, reserved: Iterable[str] = RESERVED_TYPE_NAMES) -> None:
        self._taken: set[str] = set(reserved)

    def taken(self, name: str) -> bool:
        return name in self._taken

    def allocate(self, *candidates: str) -> str:
        """The first free candidate, else the last one with the smallest free number suffix."""
        for candidate in candidates:
            if candidate not in self._taken:
                self._taken.add(candidate)
                return candidate
        base = candidates[-1]
        n = 2
        while f"{base}{n}" in self._taken:
            n += 1
        self._taken.add(f"{base}{n}")
        return f"{base}{n}"
