"""JSON Schemas of Python types for tools, without pydantic's automatic titles.

pydantic titles every model with its class name and every field with its name
(``"title": "Query"``, ``"title": "SearchIssuesInput"``); those repeat what the declaration
already says and leak into the generated ``.d.ts`` as ``/** Query */``. A title the author
wrote (``Field(title=...)``, ``model_config = ConfigDict(title=...)``) is kept.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode


class _NoAutomaticTitles(GenerateJsonSchema):
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False  # an explicit Field(title=...) still reaches the schema


def _drop_class_titles(schema: dict[str, Any], root_name: str | None) -> dict[str, Any]:
    """A model's title defaults to its class name: the root's and each ``$defs`` entry's
    (whose key is that name) go; any other title was written by the author."""
    if root_name is not None and schema.get("title") == root_name:
        schema.pop("title")
    for key, definition in (schema.get("$defs") or {}).items():
        if isinstance(definition, dict) and definition.get("title") == key:
            definition.pop("title")
    return schema


def model_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s input (validation) schema, automatic titles dropped."""
    schema = model.model_json_schema(schema_generator=_NoAutomaticTitles)
    explicit = model.model_config.get("title")
    return _drop_class_titles(schema, None if explicit else model.__name__)


def type_json_schema(
    adapter: TypeAdapter[Any], mode: JsonSchemaMode, *, name: str | None = None
) -> dict[str, Any]:
    """The schema of an adapted type (``name``: its class name, when it is a class)."""
    schema = adapter.json_schema(mode=mode, schema_generator=_NoAutomaticTitles)
    return _drop_class_titles(schema, name)
