"""The build-time proof (``surely_compiles``) never promises what the compiler refuses.

A catalog quarantines at build and compiles a tool's validators on its first call
(docs/adr/0026). That is only sound if every schema the proof accepts compiles, so this is
checked over every schema of the JSON-Schema-Test-Suite (all dialects, optional tests
included), over real corpora (OpenAPI documents, the search fixture's tools, JSON Schemas
shipped in installed packages) and over generated schemas built from the constructs that
make compilation fail. Through the catalog, which tools are quarantined and why must be
exactly what compiling every schema at build decided.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.codegen.test_corpus import _discover, _schema_files
from tests.conftest import jsonschema_suite, node_package

from codemodekit.catalog.catalog import Catalog
from codemodekit.providers.base import Discovery, ToolSpec
from codemodekit.schema import (
    DRAFT4,
    DRAFT6,
    DRAFT7,
    DRAFT201909,
    DRAFT202012,
    SchemaUnsupported,
    compile_validator,
)
from codemodekit.schema.enforce import surely_compiles
from codemodekit.schema.normalize import PreparedSchema, prepare_schema

FOLDERS = {
    "draft2020-12": DRAFT202012,
    "draft2019-09": DRAFT201909,
    "draft7": DRAFT7,
    "draft6": DRAFT6,
    "draft4": DRAFT4,
}
FIXTURE_TOOLS = Path(__file__).resolve().parents[1] / "fixtures" / "search" / "tools.json"


def _suite_schemas() -> list[tuple[str, Any, str]]:
    """(case id, schema, dialect) of every case, optional folders included."""
    suite = jsonschema_suite()
    found = []
    for folder, dialect in FOLDERS.items():
        for path in sorted((suite / "tests" / folder).rglob("*.json")):
            for index, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
                found.append((f"{path.relative_to(suite)}#{index}", case["schema"], dialect))
    return found


def _compiles(prepared: PreparedSchema) -> str | None:
    """None when the compiler accepts the schema, else its reason."""
    try:
        compile_validator(prepared)
    except SchemaUnsupported as exc:
        return exc.reason
    return None


def _agreement(schemas: Iterator[tuple[str, Any, str]]) -> tuple[int, int]:
    """Asserts proof ⇒ compilation; returns (schemas that compile, of them proven)."""
    compiling = proven = 0
    for name, schema, dialect in schemas:
        try:
            prepared = prepare_schema(schema, default_dialect=dialect)
        except SchemaUnsupported:
            continue  # refused before the question arises
        sure = surely_compiles(prepared)
        reason = _compiles(prepared)
        assert not (sure and reason is not None), f"{name}: proven, yet {reason}"
        if reason is None:
            compiling += 1
            proven += sure
    return compiling, proven


def test_every_suite_schema_the_proof_accepts_compiles() -> None:
    compiling, proven = _agreement(iter(_suite_schemas()))
    # Not vacuous: the proof must carry most schemas (the rest is compiled at build).
    assert compiling > 1500 and proven / compiling > 0.8, (compiling, proven)


def _outputs_catalog(schemas: list[tuple[str, Any, str]]) -> Catalog:
    # Output schemas take any root, so every suite schema fits; one source per dialect.
    by_dialect: dict[str, list[ToolSpec]] = {}
    for index, (_name, schema, dialect) in enumerate(schemas):
        by_dialect.setdefault(dialect, []).append(
            ToolSpec(
                name=f"t{index}",
                input_schema={"type": "object"},
                output_schema=schema,
                default_dialect=dialect,
            )
        )
    return Catalog.build(
        {f"s{i}": Discovery(tools=tuple(tools)) for i, tools in enumerate(by_dialect.values())}
    )


def test_the_catalog_quarantines_exactly_what_compiling_at_build_would() -> None:
    schemas = _suite_schemas()
    catalog = _outputs_catalog(schemas)
    for tool in catalog.tools:
        name, schema, dialect = schemas[int(tool.name[1:])]
        try:
            expected = _compiles(prepare_schema(schema, default_dialect=dialect))
        except SchemaUnsupported as exc:
            expected = exc.reason
        assert tool.quarantine == (None if expected is None else "output schema: " + expected)
        if tool.available:
            pair = catalog.validators(tool.source, tool.name)  # compiles now
            assert pair is not None and pair[1] is not None, name


def _corpus_catalogs() -> Iterator[Catalog]:
    root = node_package("@readme/oas-examples")
    yield _discover(
        {
            f"v{version.replace('.', '')}-{path.stem}": path
            for version in ("3.0", "3.1")
            for path in sorted((root / version / "json").glob("*.json"))
        }
    )
    entries = json.loads(FIXTURE_TOOLS.read_text(encoding="utf-8"))
    tools = [
        ToolSpec(name=f"{e['source']}.{e['name']}", input_schema=e["input_schema"]) for e in entries
    ]
    yield Catalog.build({"fixture": Discovery(tools=tuple(tools))})
    packaged: list[ToolSpec] = []
    for path in _schema_files():
        document = json.loads(path.read_text("utf-8"))
        key = "definitions" if "definitions" in document else "$defs"
        context = {k: v for k, v in document.items() if k in ("$schema", "$id", "id", key)}
        packaged.append(
            ToolSpec(name=path.as_posix(), input_schema={"type": "object"}, output_schema=document)
        )
        for name in document.get(key, {}):
            schema = {**context, "$ref": f"#/{key}/{name}"}
            packaged.append(
                ToolSpec(
                    name=f"{path.as_posix()}#{name}",
                    input_schema={"type": "object"},
                    output_schema=schema,
                )
            )
    yield Catalog.build({"packaged": Discovery(tools=tuple(packaged))})


def test_corpus_tools_that_are_callable_compile_on_first_use() -> None:
    callable_tools = 0
    for catalog in _corpus_catalogs():
        for tool in catalog.available_tools:
            assert catalog.validators(tool.source, tool.name) is not None, tool.key
            callable_tools += 1
    assert callable_tools > 1000


def test_corpus_schemas_the_proof_accepts_compile() -> None:
    def schemas() -> Iterator[tuple[str, Any, str]]:
        for catalog in _corpus_catalogs():
            for tool in catalog.tools:
                for schema in (tool.input_schema, tool.output_schema):
                    if schema is not None:
                        yield tool.key, json.loads(schema.text), DRAFT202012  # type: ignore[attr-defined]

    compiling, proven = _agreement(schemas())
    assert compiling > 1000 and proven / compiling > 0.8, (compiling, proven)


# --- generated schemas -------------------------------------------------------------------------

# Expressions the compiler accepts and refuses: lookaround, named groups, Unicode classes
# and escapes ECMA 262 and Rust disagree on, huge repetitions, unbalanced brackets.
PATTERNS = [
    "^[a-z]+$",
    "(?<=a)b",
    "(?<!a)b",
    "(?=a)",
    "(?<name>x)\\k<name>",
    "\\p{L}",
    "\\p{Foo}",
    "\\p{Script=Greek}",
    "\\cA",
    "\\u00e9",
    "\\x41",
    "\\0",
    "[^]",
    "[]",
    "a{2,1}",
    "a{99999999}",
    "(",
    ")",
    "[",
    "a**",
    "\\",
    "(?i)a",
    "(?P<n>x)",
    "\\Z",
    "\\z",
    "\\A",
    "$^",
    "\\bword\\B",
    "[\\w-.]",
    "[a-\\d]",
    "\\d{,3}",
    "(a)\\1",
    "\\k<nope>",
    "\\/",
    "\\.",
    "[\\]]",
    "🎉+",
    "",
]
POINTERS = [
    "#",
    "#/$defs/a",
    "#/definitions/a",
    "#/properties/p",
    "#/properties",
    "#/$defs/a/enum",
    "#/properties/r/description",
    "#/$defs/missing",
    "#/properties/r/default/0",
    "#/properties/r/enum/0",
    "#/$defs/a~1b",
    "#/$defs/a%25b",
    "#/properties/q/items",
    "#/$defs/n",
    "other.json",
    "#anchor",
    "https://json-schema.org/draft/2020-12/schema",
]
DATA_TARGETS = [{}, {"type": "nope"}, {"pattern": "("}, {"minimum": "1"}, "x", 1, True]


def _enumerated() -> Iterator[tuple[str, Any, str]]:
    """Every expression in every regex position, every pointer against every data target."""
    for dialect in FOLDERS.values():
        for pattern in PATTERNS:
            yield f"pattern {pattern!r}", {"type": "object", "pattern": pattern}, dialect
            names = {"type": "object", "patternProperties": {pattern: {}}}
            yield f"patternProperties {pattern!r}", names, dialect
            nested = {"type": "object", "properties": {"p": {"items": {"pattern": pattern}}}}
            yield f"nested pattern {pattern!r}", nested, dialect
        for pointer in POINTERS:
            for target in DATA_TARGETS:
                schema = {
                    "type": "object",
                    "properties": {
                        "p": {"$ref": pointer},
                        "q": {"items": {"type": "string"}},
                        "r": {"description": "x", "default": [target], "enum": [target]},
                    },
                    "$defs": {"a": {"type": "string"}, "a/b": {}, "a%b": {}, "n": target},
                    "definitions": {"a": {}},
                }
                yield f"$ref {pointer} to {target!r}", schema, dialect


# Every keyword of every dialect (and some from OpenAPI), with values of every JSON type,
# at the root, nested, inside `items`/`$defs`/`definitions` and where the dialect's
# meta-schema does not look (`dependentSchemas` in draft-04, unknown keywords): where a dialect's
# meta-schema does not describe a keyword its compiler still checks (draft-04 `$ref`,
# draft-06 `contentEncoding`), only this finds it.
KEYWORDS_OF_EVERY_DIALECT = [
    "$ref",
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "definitions",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "dependencies",
    "items",
    "additionalItems",
    "prefixItems",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "unevaluatedItems",
    "unevaluatedProperties",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "nullable",
    "discriminator",
]
VALUES_OF_EVERY_TYPE: list[Any] = [
    *(None, 5, -1, 1.5, 0, 2**64, "x", "", "#", "(", "^x y", True, False),
    *([], [5], ["a", "a"], [{}], [{"type": 5}]),
    *({}, {"type": 5}, {"a": 5}, {"a": {}}, {"a": ["b"]}, {"a": {"type": 5}}),
]


def _keywords_with_any_value() -> Iterator[tuple[str, Any, str]]:
    for dialect in FOLDERS.values():
        for keyword in KEYWORDS_OF_EVERY_DIALECT:
            for value in VALUES_OF_EVERY_TYPE:
                name = f"{dialect} {keyword}={value!r}"
                yield name, {keyword: value}, dialect
                yield name, {"type": "object", "properties": {"p": {keyword: value}}}, dialect
                nested = {"items": [{keyword: value}], "$defs": {"x": {keyword: value}}}
                yield name, {**nested, "definitions": {"x": {keyword: value}}}, dialect
                # Where this dialect's meta-schema does not look (a newer keyword, unknown).
                beyond = {"dependentSchemas": {"a": {keyword: value}}, "x-not": {keyword: value}}
                yield name, {**beyond, "additionalProperties": {"not": {keyword: value}}}, dialect


def test_every_keyword_with_any_value_the_proof_accepts_compiles() -> None:
    compiling, proven = _agreement(_keywords_with_any_value())
    assert compiling > 5000 and proven > 3000, (compiling, proven)


def test_enumerated_regexes_and_pointers_the_proof_accepts_compile() -> None:
    compiling, proven = _agreement(_enumerated())
    assert compiling > 300 and proven > 200, (compiling, proven)


def test_the_catalog_quarantines_enumerated_schemas_as_compiling_would() -> None:
    schemas = list(_enumerated())
    catalog = _outputs_catalog(schemas)
    quarantined = 0
    for tool in catalog.tools:
        _name, schema, dialect = schemas[int(tool.name[1:])]
        try:
            expected = _compiles(prepare_schema(schema, default_dialect=dialect))
        except SchemaUnsupported as exc:
            expected = exc.reason
        assert tool.quarantine == (None if expected is None else "output schema: " + expected)
        quarantined += expected is not None
    assert quarantined > 100


KEYWORD_VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(string.printable, max_size=6),
    st.booleans(),
    st.none(),
    st.lists(st.text(string.ascii_lowercase, max_size=3), max_size=3),
)
KEYWORDS = [
    "type",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "multipleOf",
    "required",
    "format",
    "enum",
    "const",
    "uniqueItems",
    "minProperties",
    "exclusiveMinimum",
    "minContains",
    "dependentRequired",
    "contentEncoding",
    "$comment",
]


@st.composite
def generated_schema(draw: st.DrawFn) -> dict[str, Any]:
    leaf = st.fixed_dictionaries(
        {},
        optional={
            "pattern": st.sampled_from(PATTERNS),
            "$ref": st.sampled_from(POINTERS),
            "patternProperties": st.dictionaries(
                st.sampled_from(PATTERNS), st.just({}), max_size=2
            ),
            **{k: KEYWORD_VALUES for k in draw(st.lists(st.sampled_from(KEYWORDS), max_size=2))},
        },
    )
    # Mostly valid documents, so that the proof has something to prove; pointers reach
    # into data (``default``, ``enum``, ``description``) where the meta-schema never looks.
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "p": draw(leaf),
            "q": {"items": draw(leaf)},
            "r": {
                "description": "x",
                "default": [draw(st.sampled_from([{}, {"type": "nope"}, {"pattern": "("}]))],
                "enum": [draw(st.sampled_from([{}, {"type": "nope"}, {"minimum": "1"}]))],
            },
        },
        "$defs": {"a": draw(leaf), "a/b": draw(leaf), "a%b": {}},
    }
    if draw(st.booleans()):
        schema["$defs"]["n"] = draw(st.sampled_from([True, False, 1, "x", None, {"type": "x"}]))
    schema.update(draw(leaf))
    if draw(st.booleans()):
        schema["enum"] = [{"pattern": draw(st.sampled_from(PATTERNS)), "$ref": "#/x"}]
    return schema


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated_schema(), st.sampled_from(list(FOLDERS.values())))
def test_generated_schemas_the_proof_accepts_compile(schema: dict[str, Any], dialect: str) -> None:
    try:
        prepared = prepare_schema(schema, default_dialect=dialect)
    except SchemaUnsupported:
        return
    if surely_compiles(prepared):
        assert _compiles(prepared) is None


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(generated_schema(), min_size=1, max_size=6))
def test_generated_catalogs_quarantine_what_compiling_would(schemas: list[dict[str, Any]]) -> None:
    catalog = _outputs_catalog([(str(i), s, DRAFT202012) for i, s in enumerate(schemas)])
    for tool in catalog.tools:
        try:
            expected = _compiles(prepare_schema(schemas[int(tool.name[1:])]))
        except SchemaUnsupported as exc:
            expected = exc.reason
        assert tool.quarantine == (None if expected is None else "output schema: " + expected)


# Any JSON document, with the keys the proof reads placed anywhere (keys and data alike).
JSON_KEYS = st.sampled_from(
    [
        *("pattern", "$ref", "patternProperties", "properties", "items", "type", "$defs"),
        *('a"$ref', "\\", "definitions", "dependencies", "additionalProperties", "enum"),
        *("required", "format", "$comment", "$vocabulary", "const", "contains", "minLength"),
        *("propertyNames", "allOf", "not", "if", "dependentSchemas", "unevaluatedItems"),
        *("prefixItems", "$schema"),
    ]
)
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(PATTERNS + POINTERS + ["object"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(JSON_KEYS | st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(JSON_KEYS, ANY_JSON, max_size=5), st.sampled_from(list(FOLDERS.values())))
def test_the_proof_never_raises_and_never_overpromises_on_any_document(
    schema: dict[str, Any], dialect: str
) -> None:
    try:
        prepared = prepare_schema(schema, default_dialect=dialect)
    except SchemaUnsupported:
        return
    if surely_compiles(prepared):
        assert _compiles(prepared) is None
