"""Pydantic validation errors rewritten as messages about ``codemode.toml``.

Pydantic speaks Python (``Input should be a valid integer``); a spec author needs TOML
words, the key, the allowed values and the closest valid name. Values of secret-bearing
keys (``env``, ``headers``, ``auth``) are never quoted back.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import types
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from codemodekit.spec.errors import SourceText, SpecIssue, format_key, is_secret_path
from codemodekit.spec.positions import KeyPath
from codemodekit.spec.raw import SOURCE_MODELS, TOML_EXAMPLE, RawSpec


def describe_error(error: ErrorDetails, source: SourceText) -> SpecIssue:
    kind = error["type"]
    loc, tag = _normalize(tuple(error["loc"]), kind)
    value = error.get("input")
    secret = is_secret_path(loc)

    if kind == "extra_forbidden":
        return source.issue(loc, _unknown_key(loc, tag), anchor="key")
    if kind == "missing":
        return source.issue(loc, _missing(loc, tag), anchor="table")
    if kind == "union_tag_invalid":
        return source.issue((*loc, "type"), _unknown_type(value))
    if kind == "union_tag_not_found":
        if isinstance(value, dict):
            return source.issue(
                loc,
                'missing `type`: set `type = "mcp"`, `"openapi"` or `"python"`',
                anchor="key",
            )
        return source.issue(loc, f"expected a table, got {toml_type(value)}")
    if loc and loc[-1] == "[key]":
        return source.issue(loc[:-1], _bad_key_name(loc[:-1]), anchor="key")
    if kind in ("int_type", "int_from_float"):
        hint = ""
        if isinstance(value, str) and value.strip().isdigit() and not secret:
            hint = "; remove the quotes"
        return source.issue(loc, f"expected an integer, got {toml_type(value)}{hint}")
    if kind == "greater_than":
        shown = "" if secret else f", got {value}"
        return source.issue(loc, f"must be a positive integer (greater than 0){shown}")
    if kind == "string_type":
        return source.issue(loc, f"expected a string, got {toml_type(value)}")
    if kind == "bool_type":
        return source.issue(loc, f"expected true or false, got {toml_type(value)}")
    if kind == "list_type":
        expected = _array_of(loc, tag)
        hint = ""
        if isinstance(value, dict) and expected == "an array of inline tables":
            header = format_key(loc)
            hint = f"; write one `[[{header}]]` table per item, or `{loc[-1]} = [{{ ... }}]`"
        return source.issue(loc, f"expected {expected}, got {toml_type(value)}{hint}")
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return source.issue(loc, f"expected a table, got {toml_type(value)}")
    if kind == "literal_error":
        return source.issue(loc, _not_one_of(loc, tag, value, secret))
    if kind == "string_too_short" or (kind == "too_short" and value in ("", [], {})):
        return source.issue(loc, "must not be empty")
    if kind == "string_pattern_mismatch" and loc[-1:] == ("module",):
        return source.issue(loc, "expected a dotted Python module name, such as `myapp.tools`")
    return source.issue(loc, error["msg"])


def drop_shadowed_missing(errors: Sequence[ErrorDetails]) -> list[ErrorDetails]:
    """Drop "missing X" when an unknown key beside it is a misspelling of X: one mistake,
    one message (the did-you-mean)."""
    suggested: set[tuple[Any, ...]] = set()
    for error in errors:
        if error["type"] == "extra_forbidden":
            loc, tag = _normalize(tuple(error["loc"]), error["type"])
            match = _closest(str(loc[-1]), _keys_at(loc[:-1], tag))
            if match is not None:
                suggested.add((*loc[:-1], match))
    kept = []
    for error in errors:
        if error["type"] == "missing":
            loc, _ = _normalize(tuple(error["loc"]), error["type"])
            if loc in suggested:
                continue
        kept.append(error)
    return kept


def toml_type(value: Any) -> str:
    """The TOML name of a parsed value, with an article."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return "a date/time"
    return "a value of another type"


# --- helpers ----------------------------------------------------------------------------


def _normalize(loc: tuple[Any, ...], kind: str) -> tuple[KeyPath, str | None]:
    """Remove the discriminator tag pydantic inserts after ``sources.NAME``."""
    tag = None
    if (
        len(loc) >= 3
        and loc[0] == "sources"
        and loc[2] in SOURCE_MODELS
        and not kind.startswith("union_tag")
    ):
        tag = loc[2]
        loc = loc[:2] + loc[3:]
    return loc, tag


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _type_at(path: KeyPath, tag: str | None) -> Any:
    """The declared type of the value at ``path`` (``None`` when the path leaves the model)."""
    current: Any = RawSpec
    for part in path:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) is list and isinstance(part, int):
            current = get_args(current)[0]
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return None
        current = _unwrap(current)
        if get_origin(current) in (Union, types.UnionType):
            current = SOURCE_MODELS.get(tag or "")
    return current


def _model_at(path: KeyPath, tag: str | None) -> type[BaseModel] | None:
    found = _unwrap(_type_at(path, tag))
    return found if isinstance(found, type) and issubclass(found, BaseModel) else None


def _keys_at(path: KeyPath, tag: str | None) -> list[str]:
    model = _model_at(path, tag)
    return [] if model is None else list(model.model_fields)


def _closest(word: str, choices: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _unknown_key(loc: KeyPath, tag: str | None) -> str:
    name = str(loc[-1])
    keys = _keys_at(loc[:-1], tag)
    close = _closest(name, keys)
    if close is not None:
        return f"unknown key; did you mean `{close}`?"
    if tag is not None and len(loc) == 3:
        for other, model in SOURCE_MODELS.items():
            if other != tag and name in model.model_fields:
                return f'unknown key: `{name}` belongs to `type = "{other}"` sources'
    if keys and len(keys) <= 12:
        return "unknown key; expected one of: " + ", ".join(f"`{k}`" for k in keys)
    return "unknown key"


def _missing(loc: KeyPath, tag: str | None) -> str:
    if loc == ("policy",):
        return (
            'required table is missing: add `[policy]` with `default = "deny"` or '
            '`default = "allow"` (there is no implicit allow-all)'
        )
    model = _model_at(loc[:-1], tag)
    field = None if model is None else model.model_fields.get(str(loc[-1]))
    extra = field.json_schema_extra if field is not None else None
    example = extra.get(TOML_EXAMPLE) if isinstance(extra, dict) else None
    if isinstance(example, str) and "\n" not in example:
        return f"required key is missing; add it, for example `{example}`"
    return "required key is missing"


def _unknown_type(value: Any) -> str:
    given = value.get("type") if isinstance(value, dict) else None
    choices = list(SOURCE_MODELS)
    expected = '`"mcp"`, `"openapi"` or `"python"`'
    if not isinstance(given, str):
        return f"`type` must be a string: {expected}, got {toml_type(given)}"
    close = _closest(given, choices)
    hint = f'; did you mean `"{close}"`?' if close else ""
    return f"unknown source type {json.dumps(given)}: expected {expected}{hint}"


def _not_one_of(loc: KeyPath, tag: str | None, value: Any, secret: bool) -> str:
    declared = _type_at(loc, tag)
    allowed = [str(a) for a in get_args(declared)] if get_origin(declared) is Literal else []
    expected = ", ".join(f'`"{a}"`' for a in allowed) or "an allowed value"
    if secret:
        return f"expected one of {expected}"
    if not isinstance(value, str):
        return f"expected one of {expected}, got {toml_type(value)}"
    close = _closest(value, allowed)
    hint = f'; did you mean `"{close}"`?' if close else ""
    return f"expected one of {expected}, got {json.dumps(value)}{hint}"


def _array_of(loc: KeyPath, tag: str | None) -> str:
    declared = _type_at(loc, tag)
    if get_origin(declared) is list:
        item = _unwrap(get_args(declared)[0])
        if item is str:
            return "an array of strings"
        if isinstance(item, type) and issubclass(item, BaseModel):
            return "an array of inline tables"
    return "an array"


def _bad_key_name(path: KeyPath) -> str:
    name = path[-1]
    if len(path) == 4 and path[2] == "env":
        return (
            f"invalid environment variable name {json.dumps(name)}: it must not be empty "
            "or contain `=`"
        )
    if len(path) == 4 and path[2] == "headers":
        return (
            f"invalid HTTP header name {json.dumps(name)}: use letters, digits and "
            "!#$%&'*+-.^_`|~ only"
        )
    if name == "":
        return "a source name must not be empty"
    return (
        f"invalid source name {json.dumps(name)}: names become `tools.NAME` and must not "
        "contain `.` or whitespace"
    )
