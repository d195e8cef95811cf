"""JSON Schema → TypeScript: a conservative, readable projection for ``.d.ts`` files.

The projection never invents a type: whatever cannot be expressed faithfully (remote
``$ref``, ``not``, conditional schemas, unknown keywords) becomes ``unknown`` and the
constraints TypeScript cannot carry (``pattern``, ``minimum``, ``format``…) go into JSDoc.
Output depends only on the schema and the names already taken in the file, so the same
catalog always yields the same bytes.

Every ``$ref`` target becomes a named declaration (recursion needs names). Type-alias
cycles that TypeScript rejects (``type A = B | string; type B = A``) are cut by rendering
the offending references as ``unknown``; cycles through object properties, array items
and tuple elements are legal TypeScript and kept.
"""

from codemodekit.schema.typescript.project import SchemaDeclarations
from codemodekit.schema.typescript.refs import AnalyzedSchema
from codemodekit.schema.typescript.text import (
    RESERVED_TYPE_NAMES,
    TypeNames,
    is_identifier,
    jsdoc,
    one_line,
    pascal_case,
    property_name,
    schema_doc_lines,
    ts_string,
)

__all__ = [
    "RESERVED_TYPE_NAMES",
    "AnalyzedSchema",
    "SchemaDeclarations",
    "TypeNames",
    "is_identifier",
    "jsdoc",
    "one_line",
    "pascal_case",
    "property_name",
    "schema_doc_lines",
    "ts_string",
]
