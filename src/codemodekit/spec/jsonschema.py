"""The JSON Schema of ``codemode.toml``, generated from the raw spec models.

Committed as ``schema/codemode.schema.json`` (editors validate the TOML against it through a
``#:schema`` comment) and printed by ``codemode schema``. Regenerate with::

    python -m codemodekit.spec.jsonschema > schema/codemode.schema.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

from codemodekit.spec.raw import RawSpec

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:codemodekit:codemode.schema.json"
REGENERATE_COMMAND = "python -m codemodekit.spec.jsonschema > schema/codemode.schema.json"


def build_json_schema() -> dict[str, Any]:
    """The schema as a dict; same models → same dict."""
    schema = RawSpec.model_json_schema(mode="validation")
    definitions = schema.pop("$defs", {})
    renamed = {_public_name(name): body for name, body in definitions.items()}
    schema = _tidy(schema)
    out: dict[str, Any] = {
        "$schema": SCHEMA_DIALECT,
        "$id": SCHEMA_ID,
        "title": "codemode.toml",
        "description": (
            "Tool sources, limits and policy of a CodeModeKit code-mode server. "
            "Reference: docs/spec.md."
        ),
    }
    out.update({k: v for k, v in schema.items() if k not in ("title", "description")})
    out["$defs"] = {name: _tidy(renamed[name]) for name in sorted(renamed)}
    return out


def render_json_schema() -> str:
    """The committed file's exact text."""
    return json.dumps(build_json_schema(), indent=2, ensure_ascii=False) + "\n"


def _public_name(name: str) -> str:
    return name.removeprefix("Raw")


def _tidy(node: Any) -> Any:
    """Rename refs, drop generated titles, collapse ``X | None`` (TOML has no null)."""
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            prefix, _, name = value.rpartition("/")
            out[key] = f"{prefix}/{_public_name(name)}"
        elif key == "mapping" and isinstance(value, dict):
            out[key] = {tag: _tidy({"$ref": ref})["$ref"] for tag, ref in value.items()}
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _property(prop) for name, prop in value.items()}
        else:
            out[key] = _tidy(value)
    if "patternProperties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False  # a name that misses the pattern is an error
    return out


def _property(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return _tidy(prop)
    prop = {k: v for k, v in prop.items() if k != "title"}
    branches = prop.get("anyOf")
    if isinstance(branches, list):
        kept = [b for b in branches if b != {"type": "null"}]
        if len(kept) == 1 and len(kept) < len(branches):
            prop.pop("anyOf")
            if prop.get("default", 0) is None:
                prop.pop("default")
            prop = {**kept[0], **prop}
    return _tidy(prop)


def main() -> int:
    sys.stdout.write(render_json_schema())
    return 0


if __name__ == "__main__":
    sys.exit(main())
