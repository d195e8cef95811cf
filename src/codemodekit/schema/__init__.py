"""JSON Schema handling: normalization, compiled validators and hashing.

Contract used by the catalog (keep these signatures):

- ``normalize_schema(schema, *, default_dialect=None, require_object=False) -> dict``
  returns a self-contained, plain-JSON schema (explicit ``$schema``; local ``$ref`` kept
  resolvable inside the document) or raises ``SchemaUnsupported(reason)``.
  ``normalize_input_schema(schema)`` also requires an object root (tool input schemas).
- ``compile_validator(schema) -> Validator`` compiles once; raises ``SchemaUnsupported``.
- ``Validator.is_valid(instance) -> bool``, ``Validator.first_error(instance) ->
  ValidationIssue | None``, ``Validator.issues(instance) -> tuple[ValidationIssue, ...]``.
- ``canonical_json(value) -> str`` and ``schema_hash(schema) -> str`` are deterministic.
"""

from codemodekit.schema.normalize import (
    DRAFT4,
    DRAFT6,
    DRAFT7,
    DRAFT201909,
    DRAFT202012,
    SUPPORTED_DIALECTS,
    SchemaUnsupported,
    canonical_json,
    dialect_of,
    json_path,
    normalize_input_schema,
    normalize_schema,
    schema_hash,
)
from codemodekit.schema.validate import (
    MAX_ISSUES,
    MAX_MESSAGE,
    ValidationIssue,
    Validator,
    compile_validator,
)

__all__ = [
    "DRAFT4",
    "DRAFT6",
    "DRAFT7",
    "DRAFT201909",
    "DRAFT202012",
    "MAX_ISSUES",
    "MAX_MESSAGE",
    "SUPPORTED_DIALECTS",
    "SchemaUnsupported",
    "ValidationIssue",
    "Validator",
    "canonical_json",
    "compile_validator",
    "dialect_of",
    "json_path",
    "normalize_input_schema",
    "normalize_schema",
    "schema_hash",
]
