"""JSON Schema handling: normalization, compiled validators and hashing.

Contract used by the catalog (keep these signatures):

- ``normalize_schema(schema, *, default_dialect=None) -> dict`` returns a self-contained
  schema (explicit ``$schema``; local ``$ref`` kept resolvable inside the document) or
  raises ``SchemaUnsupported(reason)``.
- ``compile_validator(schema) -> Validator`` compiles once; raises ``SchemaUnsupported``.
- ``Validator.first_error(instance) -> ValidationIssue | None``.
- ``canonical_json(value) -> str`` and ``schema_hash(schema) -> str`` are deterministic.
"""

from codemodekit.schema.normalize import (
    DRAFT7,
    DRAFT202012,
    SchemaUnsupported,
    canonical_json,
    normalize_schema,
    schema_hash,
)
from codemodekit.schema.validate import ValidationIssue, Validator, compile_validator

__all__ = [
    "DRAFT7",
    "DRAFT202012",
    "SchemaUnsupported",
    "ValidationIssue",
    "Validator",
    "canonical_json",
    "compile_validator",
    "normalize_schema",
    "schema_hash",
]
