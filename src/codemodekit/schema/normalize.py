"""Schema normalization (placeholder: the schema issue replaces the body, not the names)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

DRAFT202012 = "https://json-schema.org/draft/2020-12/schema"
DRAFT7 = "http://json-schema.org/draft-07/schema#"


class SchemaUnsupported(Exception):
    """The schema is invalid or cannot be enforced; ``reason`` is model-safe."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_hash(schema: Mapping[str, Any] | None) -> str:
    return hashlib.sha256(canonical_json(schema).encode()).hexdigest()[:16]


def normalize_schema(
    schema: Mapping[str, Any], *, default_dialect: str | None = None
) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        raise SchemaUnsupported("schema must be a JSON object")
    out = copy.deepcopy(dict(schema))
    out.setdefault("$schema", default_dialect or DRAFT202012)
    return out
