"""Build-time proof that a normalized schema will compile, without compiling it.

A catalog decides at build which tools are quarantined (the decision is part of its
revision), but compiling every validator there cost half of a 10,000-tool build while most
tools are never called (docs/adr/0026). ``surely_compiles`` answers the one question the
build needs — *will* ``compile_validator`` accept this schema? — with the compiler's own
parts, so the two cannot disagree in the direction that matters:

- the meta-schema check ``jsonschema-rs`` runs before compiling, done by ``jsonschema-rs``
  itself against the bundled meta-schema of the dialect, formats included (``regex`` on
  ``pattern``/``patternProperties`` names, ``uri-reference`` on ``$ref``/``$id``);
- every regular expression (``pattern`` values, ``patternProperties`` names) compiled by
  ``jsonschema-rs`` in a one-keyword schema of the same dialect, on the same linear-time
  engine (``LINEAR_REGEX``), memoized per expression;
- every ``$ref`` a plain JSON pointer into the document, landing on a schema that passes
  the same meta-schema check (the compiler refuses pointers to data).

Anything it does not model — ``$id``, anchors, ``$dynamicRef``/``$recursiveRef``,
references to meta-schemas, percent-escapes — makes it answer ``False`` ("not sure"),
and the catalog then compiles that schema at build exactly as before. So ``True`` must
imply that compilation succeeds (tested over the JSON-Schema-Test-Suite, the corpora and
generated schemas); ``False`` costs only the eager compile.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import jsonschema_rs

from codemodekit.schema.normalize import DRAFT4, DRAFT201909, DRAFT202012, PreparedSchema

# Members of the compact JSON text of a normalized schema (json.dumps escapes `"` and
# `\`), found by their key. Finding them in data too (``enum``, ``default``) only adds
# work: an extra expression or reference that fails makes the answer "not sure", never
# "sure". A `$ref`/`pattern` key with a non-string value is a property so named, or
# refused by the meta-schema.
_REF = re.compile(r'"\$ref":("(?:[^"\\]|\\.)*")')
_PATTERN = re.compile(r'"pattern":("(?:[^"\\]|\\.)*")')
# Keywords whose resolution this check does not model.
_UNSURE = re.compile(r'"\$(?:id|anchor|dynamicAnchor|dynamicRef|recursiveRef|recursiveAnchor)":')
# Keywords the compiler requires to be strings in dialects whose meta-schema does not
# describe them (`$ref` in draft-04, the content keywords in draft-06; found by the
# enumeration in tests/schema/test_enforce.py). Any other value, or a property so named
# (rare), is "not proven".
_STRINGS_ONLY = ('"$ref"', '"contentEncoding"', '"contentMediaType"')
_MAX_PATTERNS = 4096
# Dialects whose meta-schema checks every member of `$defs` as a schema (all of them do
# for `definitions`).
_HAS_DEFS = frozenset({DRAFT202012, DRAFT201909})

LINEAR_REGEX = jsonschema_rs.RegexOptions()
"""Regular expressions (``pattern``, ``patternProperties``) run on the linear-time
``regex`` engine. The default ``fancy-regex`` engine backtracks for backreferences and
lookaround, up to a million steps per string and with no bound per call: one call of
84 KB (an array of short strings) held the event loop for 30 s. Time per call cannot be
bounded from outside the Rust validator, so such an expression is not run here: a
``pattern`` that needs backtracking is left to the upstream, which checks its own input
(it stays in the declarations and their docs; ``validate._without_backtracking_patterns``), and a
``patternProperties`` name that needs it makes the schema unsupported (dropping it would
hand its properties to ``additionalProperties``)."""

_lock = threading.Lock()
_meta_validators: dict[str, jsonschema_rs.Validator] = {}
_patterns: dict[tuple[str, str], bool] = {}


def _refuse(uri: str) -> Any:
    raise LookupError(f"remote $ref {uri} is not fetched")


def _meta(dialect: str) -> jsonschema_rs.Validator:
    """The dialect's meta-schema (bundled by ``jsonschema-rs``) with formats enforced."""
    validator = _meta_validators.get(dialect)
    if validator is None:
        schema = {"$schema": dialect, "$ref": dialect.rstrip("#")}
        validator = jsonschema_rs.validator_for(schema, validate_formats=True, retriever=_refuse)
        with _lock:
            _meta_validators[dialect] = validator
    return validator


def pattern_compiles(dialect: str, pattern: str) -> bool:
    """Whether ``pattern`` compiles on the linear-time engine (memoized)."""
    key = (dialect, pattern)
    known = _patterns.get(key)
    if known is None:
        try:
            jsonschema_rs.validator_for(
                {"$schema": dialect, "pattern": pattern},
                retriever=_refuse,
                pattern_options=LINEAR_REGEX,
            )
            known = True
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # also a Rust panic
            known = False
        with _lock:
            if len(_patterns) >= _MAX_PATTERNS:
                _patterns.clear()  # a bound, not an eviction policy: entries are cheap to redo
            _patterns[key] = known
    return known


def _string(quoted: str) -> str:
    """The value of a JSON string literal (quotes included)."""
    decoded: str = json.loads(quoted) if "\\" in quoted else quoted[1:-1]
    return decoded


def _pattern_property_names(node: Any, out: set[str]) -> None:
    # isinstance, not exact types: the document may hold dict subclasses and tuples.
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            names = item.get("patternProperties")
            if isinstance(names, dict):
                out.update(names)
            stack.extend(v for v in item.values() if isinstance(v, dict | list | tuple))
        elif isinstance(item, list | tuple):
            stack.extend(v for v in item if isinstance(v, dict | list | tuple))


_MISSING = object()


def _pointer(document: Any, pointer: str) -> Any:
    node = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list | tuple) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    return node


def _root_definition(ref: str, dialect: str) -> bool:
    parts = ref.split("/")
    if len(parts) != 3:
        return False
    return parts[1] == "definitions" or (parts[1] == "$defs" and dialect in _HAS_DEFS)


def surely_compiles(prepared: PreparedSchema) -> bool:
    """True only when ``compile_validator(prepared)`` is certain to succeed.

    ``False`` means "not proven" (the schema may still compile): compile it to know.
    """
    text, dialect, document = prepared.text, prepared.dialect, prepared.document
    if dialect == DRAFT4 and '"id":' in text:
        return False
    if _UNSURE.search(text) or text.count('"$schema":') != 1:
        # A nested `$schema` (an embedded resource, or data): the compiler may read it
        # where the meta-schema does not look.
        return False
    try:
        for keyword in _STRINGS_ONLY:
            if keyword in text and text.count(keyword + ":") != text.count(keyword + ':"'):
                return False
        refs = set(_REF.findall(text))
        patterns = {_string(quoted) for quoted in _PATTERN.findall(text)}
        meta = _meta(dialect)
        if not meta.is_valid(document):
            return False
        for quoted in refs:
            ref = _string(quoted)
            if ref == "#":
                continue
            # Percent-escapes and anything but a local pointer: not modelled here.
            if not ref.startswith("#/") or "%" in ref:
                return False
            target = _pointer(document, ref[1:])
            if type(target) is bool:
                continue
            if type(target) is not dict:
                return False
            # A root definition was meta-checked with the root; elsewhere (a pointer into
            # `properties`, into data) the target is checked like a root of its own.
            if not _root_definition(ref, dialect) and not meta.is_valid(target):
                return False
        if '"patternProperties":' in text:
            _pattern_property_names(document, patterns)
        return all(pattern_compiles(dialect, pattern) for pattern in patterns)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # a value the Rust side cannot convert, a panic: not proven
        return False


__all__ = ["surely_compiles"]
