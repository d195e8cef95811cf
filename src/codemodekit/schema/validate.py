"""Compiled validators: ``jsonschema-rs`` at run time, ``jsonschema`` as the reference.

A validator is compiled once, at catalog build, from a normalized schema. Compilation
never touches the network: the retriever refuses every URI, so a reference that
normalization did not catch still fails closed (``remote $ref <uri> is not fetched``).

``jsonschema-rs`` checks the schema against its meta-schema while compiling (≈4 µs);
the pure-Python ``jsonschema`` does the same in ≈1.8 ms, too slow for a 10,000-tool
catalog, so it runs only when ``jsonschema-rs`` rejects a schema, to word the reason
the way the reference implementation sees it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import jsonschema_rs

from codemodekit.schema.normalize import (
    DRAFT202012,
    SchemaUnsupported,
    bound_text,
    dialect_of,
    json_path,
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


class _RefusingRetriever:
    """A ``jsonschema-rs`` retriever that never fetches, remembering what was asked."""

    __slots__ = ("asked",)

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, uri: str) -> Any:
        self.asked.append(uri)
        raise LookupError(f"remote $ref {uri} is not fetched")


class Validator:
    """A compiled validator for one normalized schema. Build with ``compile_validator``."""

    __slots__ = ("_impl", "dialect")

    def __init__(self, impl: jsonschema_rs.Validator, dialect: str) -> None:
        self._impl = impl
        self.dialect = dialect

    def is_valid(self, instance: Any) -> bool:
        try:
            return bool(self._impl.is_valid(instance))
        except (ValueError, TypeError, OverflowError):
            return False  # not JSON data (e.g. a set, NaN, a huge int)

    def issues(self, instance: Any, *, limit: int = MAX_ISSUES) -> tuple[ValidationIssue, ...]:
        """At most ``limit`` issues, each with a JSON path and a bounded message."""
        found: list[ValidationIssue] = []
        try:
            for error in self._impl.iter_errors(instance):
                found.append(
                    ValidationIssue(
                        path=json_path(error.instance_path),
                        message=bound_text(str(error.message).replace("\n", " "), MAX_MESSAGE),
                        keyword=_keyword(error),
                    )
                )
                if len(found) >= limit:
                    break
        except (ValueError, TypeError, OverflowError) as exc:
            if isinstance(exc, jsonschema_rs.ValidationError):
                raise
            found.append(ValidationIssue("$", bound_text(f"not JSON data: {exc}"), "type"))
        return tuple(found)

    def first_error(self, instance: Any) -> ValidationIssue | None:
        if self.is_valid(instance):
            return None  # the fast path: no error objects built for valid input
        issues = self.issues(instance, limit=1)
        return issues[0] if issues else ValidationIssue("$", "invalid", "")

    def __repr__(self) -> str:
        return f"<Validator {self.dialect}>"


def _keyword(error: jsonschema_rs.ValidationError) -> str:
    try:
        return str(error.kind.name)
    except Exception:  # pragma: no cover - depends on the jsonschema-rs version
        return ""


def _reference_reason(schema: Mapping[str, Any]) -> str | None:
    """The meta-schema violation the reference ``jsonschema`` reports, if any."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    meta = cls(cls.META_SCHEMA)
    error = jsonschema.exceptions.best_match(meta.iter_errors(schema))
    if error is None:
        return None
    return f"invalid schema at {json_path(error.absolute_path)}: {error.message}"


def compile_validator(schema: Mapping[str, Any]) -> Validator:
    """Compile a normalized schema once; ``SchemaUnsupported`` if it cannot be enforced."""
    document = schema if isinstance(schema, dict) else dict(schema)
    retriever = _RefusingRetriever()
    try:
        impl = jsonschema_rs.validator_for(document, retriever=retriever)
    except jsonschema_rs.ValidationError as exc:
        if retriever.asked:
            raise SchemaUnsupported(f"remote $ref {retriever.asked[0]} is not fetched") from None
        first_line = str(exc).split("\n", 1)[0]
        reason = None
        try:
            reason = _reference_reason(document)
        except Exception:  # the reference library may choke on what rs already refused
            reason = None
        raise SchemaUnsupported(reason or f"invalid schema: {first_line}") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise SchemaUnsupported(f"invalid schema: {exc}") from None
    return Validator(impl, dialect_of(document) if "$schema" in document else DRAFT202012)


__all__ = [
    "MAX_ISSUES",
    "MAX_MESSAGE",
    "ValidationIssue",
    "Validator",
    "compile_validator",
    "json_path",
]
