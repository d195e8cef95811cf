"""Compiled validators (placeholder: the schema issue replaces the body, not the names)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from codemodekit.schema.normalize import SchemaUnsupported


@dataclass(frozen=True, slots=True)
class ValidationIssue:
    path: str
    """JSON path of the failing value, ``$`` for the root (``$.items[2].id``)."""
    message: str
    """Bounded, model-safe."""


class Validator:
    def __init__(self, schema: Mapping[str, Any]) -> None:
        try:
            self._impl = jsonschema_rs.validator_for(dict(schema))
        except Exception as exc:  # jsonschema_rs raises ValidationError/ValueError
            raise SchemaUnsupported(f"invalid schema: {exc}"[:300]) from None

    def first_error(self, instance: Any) -> ValidationIssue | None:
        for err in self._impl.iter_errors(instance):
            path = "$" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.instance_path
            )
            return ValidationIssue(path=path, message=str(err.message)[:300])
        return None


def compile_validator(schema: Mapping[str, Any]) -> Validator:
    return Validator(schema)
