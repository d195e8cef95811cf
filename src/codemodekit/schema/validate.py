"""Compiled validators: ``jsonschema-rs`` at run time, ``jsonschema`` as the reference.

A validator is compiled from a normalized schema on its tool's first call (the catalog
proves at build that it will compile: ``schema.enforce``, docs/adr/0026). Compilation
never touches the network: the retriever refuses every URI, so a reference that
normalization did not catch still fails closed (``remote $ref <uri> is not fetched``).

``jsonschema-rs`` checks the schema against its meta-schema while compiling (≈4 µs);
the pure-Python ``jsonschema`` does the same in ≈1.8 ms, too slow for a 10,000-tool
catalog, so it runs only when ``jsonschema-rs`` rejects a schema, to word the reason
the way the reference implementation sees it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from codemodekit.schema.enforce import LINEAR_REGEX, pattern_compiles
from codemodekit.schema.locate import NOT_MATCHING, Locator
from codemodekit.schema.normalize import (
    DRAFT202012,
    PreparedSchema,
    SchemaUnsupported,
    bound_text,
    compact_json,
    dialect_of,
    json_path,
    prepare_schema,
    shown_uri,
)

MAX_MESSAGE = 300
"""Upper bound of one issue's message, in characters."""
MAX_ISSUES = 5
"""Upper bound of issues reported for one instance."""


@dataclass(frozen=True, slots=True)
class ValidationIssue:
    path: str
    """JSON path of the failing value, ``$`` for the root (``$.items[2].id``)."""
    message: str
    """Bounded (``MAX_MESSAGE``), model-safe."""
    keyword: str = ""
    """The JSON Schema keyword that failed (``type``, ``required``...)."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


_REFUSED = re.compile(r"remote \$ref (\S+) is not fetched")


def _refuse(uri: str) -> Any:
    """The ``jsonschema-rs`` retriever: never fetches (its default one uses the network)."""
    raise LookupError(f"remote $ref {uri} is not fetched")


MAX_DEPTH = 1000
"""Deepest instance nesting accepted. ``jsonschema-rs`` recurses natively and would
overflow the C stack (killing the process) on instances nested some 10,000 levels deep;
JSON decoders stop near 1,000 anyway."""


_CONTAINERS = (dict, list, tuple)
_SCALARS = frozenset({str, int, bool, type(None)})


def _not_json(value: Any) -> str | None:
    """Why ``value`` is not JSON data, if it is not: checked before the Rust validator sees
    it, since that converts lazily (a set under an unconstrained key passes) and recurses
    natively (deep nesting overflows the C stack). Iterative, early exit."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        kind = type(node)
        if kind is dict:
            if depth > MAX_DEPTH:
                return f"value nests deeper than {MAX_DEPTH} levels"
            for key in node:
                if not isinstance(key, str):
                    return f"object key {bound_text(repr(key), 40)} is not a string"
            children: Any = node.values()
        elif kind is list or kind is tuple:
            if depth > MAX_DEPTH:
                return f"value nests deeper than {MAX_DEPTH} levels"
            children = node
        else:
            children = (node,)
            depth -= 1
        for child in children:
            child_kind = type(child)
            if child_kind in _SCALARS:
                continue
            if child_kind is float:
                if child != child or child in (math.inf, -math.inf):
                    return f"{child} is not a JSON number"
            elif child_kind in _CONTAINERS:
                stack.append((child, depth + 1))
            elif isinstance(child, str | int | float) and not isinstance(child, bool | float):
                continue  # str and int subclasses (enums) encode as JSON
            elif isinstance(child, dict | list | tuple):
                stack.append((child, depth + 1))
            else:
                return f"{child_kind.__name__} is not JSON data"
    return None


class Validator:
    """A compiled validator for one normalized schema. Build with ``compile_validator``.

    Instances are JSON data (what ``json.loads`` returns; tuples count as arrays). A value
    that is not JSON data (a set, bytes, NaN, a non-string key) or nests deeper than
    ``MAX_DEPTH`` is invalid, never an exception.
    """

    __slots__ = ("_document", "_impl", "_locator", "_text", "dialect")

    def __init__(
        self,
        impl: jsonschema_rs.Validator,
        dialect: str,
        document: Mapping[str, Any] | None = None,
        text: str = "",
    ) -> None:
        self._impl = impl
        self.dialect = dialect
        self._document = document
        self._text = text
        self._locator: Locator | None = None

    def is_valid(self, instance: Any) -> bool:
        if _not_json(instance) is not None:
            return False
        try:
            return bool(self._impl.is_valid(instance))
        except (ValueError, TypeError, OverflowError):
            return False

    def issues(self, instance: Any, *, limit: int = MAX_ISSUES) -> tuple[ValidationIssue, ...]:
        """At most ``limit`` issues, each with a JSON path and a bounded message."""
        return self._issues(instance, max(1, limit))

    def first_error(self, instance: Any) -> ValidationIssue | None:
        """The first issue, or ``None`` when valid (valid input builds no error objects)."""
        issues = self._issues(instance, 1)
        return issues[0] if issues else None

    def _issues(self, instance: Any, limit: int) -> tuple[ValidationIssue, ...]:
        """No issue when valid; else found by a bounded walk (``schema.locate``), never by
        ``iter_errors``, which builds whole error trees (exponential in nested ``anyOf`` /
        ``allOf``, or the instance's size times its depth in copies)."""
        problem = _not_json(instance)
        if problem is not None:
            return (ValidationIssue("$", problem, "type"),)
        try:
            if self._impl.is_valid(instance):
                return ()
        except (ValueError, TypeError, OverflowError) as exc:
            # Raised while converting the instance: it is not JSON data.
            return (ValidationIssue("$", bound_text(f"not JSON data: {exc}"), "type"),)
        if self._locator is None:
            document = self._document
            if document is None:  # pragma: no cover - compile_validator always passes it
                return (ValidationIssue("$", NOT_MATCHING, ""),)
            text = self._text or compact_json(document)
            self._locator = Locator(document, text, self.dialect, LINEAR_REGEX)
        try:
            found = self._locator.locate(instance, limit)
        except (ValueError, TypeError, OverflowError) as exc:
            # Raised while converting the instance: it is not JSON data.
            return (ValidationIssue("$", bound_text(f"not JSON data: {exc}"), "type"),)
        return tuple(
            ValidationIssue(
                path=json_path(parts),
                message=bound_text(" ".join(message.split()), MAX_MESSAGE),
                keyword=keyword,
            )
            for parts, message, keyword in found
        ) or (ValidationIssue("$", NOT_MATCHING, ""),)

    def __repr__(self) -> str:
        return f"<Validator {self.dialect}>"


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
"""Where a schema holds data, not schemas: a ``pattern`` key there is a value."""


def _without_backtracking_patterns(
    document: Mapping[str, Any], dialect: str
) -> dict[str, Any] | None:
    """A copy of ``document`` without the ``pattern`` keywords that need backtracking (a
    schema that accepts more, never less), or ``None`` when a ``patternProperties`` name
    needs it, or nothing was left out (the failure was another)."""
    copy: dict[str, Any] = json.loads(json.dumps(document))
    dropped = False
    stack: list[Any] = [copy]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        pattern = node.get("pattern")
        if isinstance(pattern, str) and not pattern_compiles(dialect, pattern):
            del node["pattern"]
            dropped = True
        names = node.get("patternProperties")
        if isinstance(names, dict) and not all(pattern_compiles(dialect, name) for name in names):
            return None
        stack.extend(v for k, v in node.items() if k not in _DATA_KEYWORDS)
    return copy if dropped else None


def _backtracking_pattern(exc: jsonschema_rs.ValidationError, dialect: str) -> str | None:
    """The reason to give when compiling failed only because an expression needs the
    backtracking engine (it compiles there), else ``None``."""
    pattern = exc.instance
    if getattr(exc.kind, "format", None) != "regex" or not isinstance(pattern, str):
        return None
    try:
        jsonschema_rs.validator_for({"$schema": dialect, "pattern": pattern}, retriever=_refuse)
    except Exception:
        return None  # not an expression on either engine: the usual reason applies
    return (
        f"the regular expression {bound_text(json.dumps(pattern, ensure_ascii=False), 80)} at "
        f"{json_path(exc.instance_path)} needs backtracking (a backreference or lookaround), "
        "which can take exponential time on each string; it is not supported"
    )


def _reference_reason(schema: Mapping[str, Any]) -> str | None:
    """The meta-schema violation the reference ``jsonschema`` reports, if any."""
    # Imported here: it takes longer to import (≈50 ms) than most runs take, and only a
    # schema that ``jsonschema-rs`` rejected needs it.
    import jsonschema.exceptions
    import jsonschema.validators

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    meta = cls(cls.META_SCHEMA)
    error = jsonschema.exceptions.best_match(meta.iter_errors(schema))
    if error is None:
        return None
    return f"invalid schema at {json_path(error.absolute_path)}: {error.message}"


def compile_validator(schema: Mapping[str, Any] | PreparedSchema) -> Validator:
    """Compile a normalized schema once; ``SchemaUnsupported`` if it cannot be enforced.

    Pass the ``PreparedSchema`` when you have it: its JSON text is handed to the Rust
    side directly instead of converting the Python objects again.
    """
    if isinstance(schema, PreparedSchema):
        document: Mapping[str, Any] = schema.document
        source: dict[str, Any] | str = schema.text
        dialect = schema.dialect
    elif isinstance(schema, dict):
        document = source = schema
        dialect = dialect_of(schema) if "$schema" in schema else DRAFT202012
    else:  # a read-only view (FrozenJSON, mapping proxy): back to plain JSON first
        prepared = prepare_schema(schema)
        document, source, dialect = prepared.document, prepared.text, prepared.dialect
    try:
        impl = jsonschema_rs.validator_for(source, retriever=_refuse, pattern_options=LINEAR_REGEX)
    except jsonschema_rs.ValidationError as exc:
        refused = _REFUSED.search(str(exc))
        if refused is not None:
            uri = shown_uri(refused.group(1))
            raise SchemaUnsupported(f"remote $ref {uri} is not fetched") from None
        backtracking = _backtracking_pattern(exc, dialect)
        if backtracking is not None:
            relaxed = _without_backtracking_patterns(document, dialect)
            if relaxed is None:
                raise SchemaUnsupported(backtracking) from None
            return compile_validator(relaxed)
        if type(exc.kind).__name__ == "Referencing":
            raise SchemaUnsupported(f"$ref does not resolve: {exc.message}") from None
        first_line = f"at {json_path(exc.instance_path)}: {exc.message}"
        reason = None
        try:
            reason = _reference_reason(document)
        except Exception:  # the reference library may choke on what rs already refused
            reason = None
        raise SchemaUnsupported(reason or f"invalid schema {first_line}") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise SchemaUnsupported(f"invalid schema: {exc}") from None
    return Validator(impl, dialect, document, source if isinstance(source, str) else "")


__all__ = [
    "MAX_DEPTH",
    "MAX_ISSUES",
    "MAX_MESSAGE",
    "ValidationIssue",
    "Validator",
    "compile_validator",
    "json_path",
]
