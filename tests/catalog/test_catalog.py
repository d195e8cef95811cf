"""Catalog: sorting, addresses, revisions, duplicates, quarantine and healing, immutability."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from codemodekit.catalog.catalog import Catalog, thaw, tool_address
from codemodekit.providers.base import Discovery, SkippedTool, ToolSpec
from codemodekit.schema import DRAFT7, DRAFT202012, compile_validator


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def spec(name: str, description: str = "", schema: Any = None, **kwargs: Any) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description or f"{name} tool",
        input_schema=obj(id={"type": "string"}) if schema is None else schema,
        **kwargs,
    )


def build(**sources: list[ToolSpec]) -> Catalog:
    return Catalog.build({name: Discovery(tools=tuple(tools)) for name, tools in sources.items()})


# --- order, names and addresses -----------------------------------------------------------


def test_tools_are_sorted_by_source_then_name() -> None:
    catalog = build(zeta=[spec("b"), spec("a")], alpha=[spec("z"), spec("m")])
    assert [(t.source, t.name) for t in catalog.tools] == [
        ("alpha", "m"),
        ("alpha", "z"),
        ("zeta", "a"),
        ("zeta", "b"),
    ]
    assert catalog.sources == ("alpha", "zeta")
    assert len(catalog) == 4 and list(catalog) == list(catalog.tools)


def test_names_are_preserved_exactly() -> None:
    names = ["get-item", "with space", "ünïcode", "constructor", "a.b", 'quote"d', ""]
    catalog = build(**{"deployment-api": [spec(n) for n in names]})
    assert sorted(t.name for t in catalog.tools) == sorted(names)
    for name in names:
        tool = catalog.get("deployment-api", name)
        assert tool is not None and tool.name == name and tool.source == "deployment-api"


@pytest.mark.parametrize(
    ("source", "name", "address"),
    [
        ("github", "search_issues", "tools.github.search_issues"),
        ("deployment-api", "deploy", 'tools["deployment-api"].deploy'),
        ("crm", "contacts.find", 'tools.crm["contacts.find"]'),
        ("s", "get-item", 'tools.s["get-item"]'),
        ("s", "$ok_1", "tools.s.$ok_1"),
        ("s", "1st", 'tools.s["1st"]'),
        ("s", 'say "hi"', 'tools.s["say \\"hi\\""]'),
        ("s", "delete", "tools.s.delete"),
    ],
)
def test_addresses_use_dots_for_identifiers_and_brackets_otherwise(
    source: str, name: str, address: str
) -> None:
    assert tool_address(source, name) == address
    tool = build(**{source: [spec(name)]}).get(source, name)
    assert tool is not None and tool.address == address


def test_get_and_validators_for_unknown_tools_return_none() -> None:
    catalog = build(s=[spec("a")])
    assert catalog.get("s", "missing") is None
    assert catalog.get("missing", "a") is None
    assert catalog.validators("s", "missing") is None


def test_configured_sources_without_tools_are_listed() -> None:
    catalog = Catalog.build({"s": Discovery(tools=(spec("a"),))}, sources=["s", "down"])
    assert catalog.sources == ("down", "s")
    assert catalog.source_tools("down") == ()


# --- revision --------------------------------------------------------------------------------


def test_revision_does_not_depend_on_input_order() -> None:
    one = Catalog.build(
        {
            "a": Discovery(tools=(spec("x"), spec("y"))),
            "b": Discovery(tools=(spec("z"),)),
        }
    )
    two = Catalog.build(
        {
            "b": Discovery(tools=(spec("z"),)),
            "a": Discovery(tools=(spec("y"), spec("x"))),
        }
    )
    assert one.revision == two.revision
    assert build(s=[spec("x")]).revision == build(s=[spec("x")]).revision


@pytest.mark.parametrize(
    "changed",
    [
        spec("x", description="another description"),
        spec("x", schema=obj(id={"type": "string", "maxLength": 3})),
        spec("x", schema={**obj(id={"type": "string"}), "$schema": DRAFT7}),
        spec("x", output_schema=obj(ok={"type": "boolean"})),
        spec("x", annotations={"readOnlyHint": True}),
        spec("x", deprecated=True),
        spec("renamed"),
    ],
)
def test_any_contract_change_gives_a_new_revision(changed: ToolSpec) -> None:
    assert build(s=[spec("x")]).revision != build(s=[changed]).revision


def test_host_only_sideband_does_not_change_the_revision() -> None:
    plain = build(s=[spec("x")])
    with_meta = build(s=[spec("x", meta={"trace": "1"}, provenance={"operation": "GET /x"})])
    assert plain.revision == with_meta.revision


def test_skipped_operations_are_listed_and_part_of_the_revision() -> None:
    discovery = Discovery(
        tools=(spec("a"),),
        skipped=(SkippedTool("z_op", "multipart bodies are not supported"), SkippedTool("b", "r")),
    )
    catalog = Catalog.build({"api": discovery})
    assert [(s.source, s.name, s.reason) for s in catalog.skipped] == [
        ("api", "b", "r"),
        ("api", "z_op", "multipart bodies are not supported"),
    ]
    assert catalog.revision != build(api=[spec("a")]).revision


# --- duplicates ------------------------------------------------------------------------------


def test_duplicate_names_last_wins_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="codemodekit.catalog"):
        catalog = build(s=[spec("a", description="first"), spec("a", description="second")])
    tool = catalog.get("s", "a")
    assert tool is not None and tool.description == "second"
    assert len(catalog.tools) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["source 's' lists tool 'a' more than once; the last one wins"]


def test_duplicate_warnings_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    tools = [spec(f"t{i % 3}", description=f"v{i}") for i in range(300)]
    with caplog.at_level(logging.WARNING, logger="codemodekit.catalog"):
        catalog = build(s=tools)
    assert len(catalog.tools) == 3
    assert len(caplog.records) <= 6
    assert "292 more duplicate tool names" in caplog.records[-1].getMessage()


# --- quarantine and healing -------------------------------------------------------------------


BROKEN: dict[str, Any] = {
    "type": "object",
    "properties": {"user": {"$ref": "https://schemas.example.com/user.json"}},
}


def test_a_bad_schema_quarantines_only_that_tool() -> None:
    catalog = build(s=[spec("good"), spec("remote", schema=BROKEN), spec("also_good")])
    assert [t.name for t in catalog.available_tools] == ["also_good", "good"]
    assert [t.name for t in catalog.quarantined] == ["remote"]
    bad = catalog.get("s", "remote")
    assert bad is not None and not bad.available
    assert bad.quarantine == "remote $ref https://schemas.example.com/user.json is not fetched"
    assert catalog.validators("s", "remote") is None
    assert catalog.validators("s", "good") is not None
    # still listed as declared, so a user can see what is wrong
    assert thaw(bad.input_schema)["properties"]["user"] == BROKEN["properties"]["user"]


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "string"}, '"type": "object"'),
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "$.properties.a.type"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}, "does not resolve"),
        ({"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"}, "dialect"),
        ({"type": "object", "default": {1, 2}}, "not JSON data"),
        (["not", "a", "mapping"], "JSON object"),
    ],
)
def test_quarantine_reasons_say_what_is_wrong(schema: Any, fragment: str) -> None:
    catalog = build(s=[spec("t", schema=schema), spec("ok")])
    tool = catalog.get("s", "t")
    assert tool is not None and tool.quarantine is not None
    assert fragment in tool.quarantine and len(tool.quarantine) <= 300
    assert catalog.get("s", "ok") is not None and catalog.validators("s", "ok") is not None
    json.dumps(thaw(tool.input_schema))  # the catalog stays JSON-ready


def test_a_bad_output_schema_quarantines_the_tool() -> None:
    catalog = build(s=[spec("t", output_schema={"type": "array", "items": {"type": 3}})])
    tool = catalog.get("s", "t")
    assert tool is not None and tool.quarantine is not None
    assert tool.quarantine.startswith("output schema: invalid schema at $.items.type")


def test_output_schemas_may_describe_any_json_value() -> None:
    catalog = build(s=[spec("t", output_schema={"type": "array", "items": {"type": "integer"}})])
    pair = catalog.validators("s", "t")
    assert pair is not None and pair[1] is not None
    assert pair[1].first_error([1, 2]) is None
    issue = pair[1].first_error([1, "2"])
    assert issue is not None and issue.path == "$[1]"


def test_refresh_with_a_fixed_schema_heals_the_tool() -> None:
    catalog = build(s=[spec("good"), spec("t", schema=BROKEN)], other=[spec("x")])
    healed = catalog.with_source("s", Discovery(tools=(spec("good"), spec("t"))))
    tool = healed.get("s", "t")
    assert tool is not None and tool.available and tool.quarantine is None
    assert healed.validators("s", "t") is not None
    assert healed.quarantined == ()
    assert healed.revision != catalog.revision
    # the original catalog is untouched
    assert [t.name for t in catalog.quarantined] == ["t"]


def test_with_source_replaces_only_that_source() -> None:
    catalog = build(a=[spec("x"), spec("y")], b=[spec("z")])
    refreshed = catalog.with_source("a", Discovery(tools=(spec("w"),)))
    assert [(t.source, t.name) for t in refreshed.tools] == [("a", "w"), ("b", "z")]
    assert refreshed.get("b", "z") is catalog.get("b", "z")
    added = catalog.with_source("c", Discovery(tools=(spec("q"),)))
    assert added.sources == ("a", "b", "c")
    same = catalog.with_source("a", Discovery(tools=(spec("y"), spec("x"))))
    assert same.revision == catalog.revision


def test_refresh_reuses_validators_of_unchanged_schemas() -> None:
    catalog = build(s=[spec("a"), spec("b", schema=obj(n={"type": "integer"}))])
    refreshed = catalog.with_source(
        "s", Discovery(tools=(spec("a"), spec("b", schema=obj(n={"type": "number"}))))
    )
    old_a, new_a = catalog.validators("s", "a"), refreshed.validators("s", "a")
    assert old_a is not None and new_a is not None and new_a[0] is old_a[0]
    new_b = refreshed.validators("s", "b")
    assert new_b is not None and new_b[0].is_valid({"n": 1.5})


# --- validators and dialects --------------------------------------------------------------------


def test_validators_enforce_the_normalized_input_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "required": ["items"],
        "$defs": {"Item": {"type": "object", "properties": {"id": {"type": "integer"}}}},
    }
    catalog = build(s=[spec("t", schema=schema)])
    pair = catalog.validators("s", "t")
    assert pair is not None
    validator, output = pair
    assert output is None
    assert validator.first_error({"items": [{"id": 1}]}) is None
    issue = validator.first_error({"items": [{"id": 1}, {"id": "2"}]})
    assert issue is not None and issue.path == "$.items[1].id"
    tool = catalog.get("s", "t")
    assert tool is not None and tool.input_schema["$schema"] == DRAFT202012


def test_the_provider_default_dialect_applies_when_the_schema_has_none() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}},
        "definitions": {"s": {"type": "string"}},
    }
    catalog = build(s=[spec("old", schema=schema, default_dialect=DRAFT7)])
    tool = catalog.get("s", "old")
    pair = catalog.validators("s", "old")
    assert tool is not None and pair is not None
    assert tool.input_schema["$schema"] == DRAFT7
    assert pair[0].is_valid({"a": "longer than one"})  # draft-07 ignores $ref siblings


# --- immutability -----------------------------------------------------------------------------


def test_catalog_and_schemas_are_read_only() -> None:
    catalog = build(s=[spec("t", schema={**obj(a={"enum": ["x", "y"]}), "required": ["a"]})])
    tool = catalog.get("s", "t")
    assert tool is not None
    with pytest.raises(TypeError):
        tool.input_schema["type"] = "array"  # type: ignore[index]
    with pytest.raises(TypeError):
        tool.input_schema["properties"]["a"]["enum"] = []
    assert tool.input_schema["required"] == ("a",)
    with pytest.raises(AttributeError):
        catalog.revision = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        tool.name = "other"  # type: ignore[misc]


def test_schemas_are_not_shared_with_the_provider() -> None:
    schema = obj(a={"type": "string"})
    catalog = build(s=[spec("t", schema=schema)])
    schema["properties"]["a"]["type"] = "integer"
    tool = catalog.get("s", "t")
    pair = catalog.validators("s", "t")
    assert tool is not None and pair is not None
    assert tool.input_schema["properties"]["a"]["type"] == "string"
    assert pair[0].is_valid({"a": "text"})


def test_thaw_gives_plain_json_in_declared_order() -> None:
    catalog = build(s=[spec("t", schema=obj(zeta={"type": "string"}, alpha={"type": "string"}))])
    tool = catalog.get("s", "t")
    assert tool is not None
    plain = thaw(tool.input_schema)
    assert list(plain["properties"]) == ["zeta", "alpha"]
    plain["properties"]["zeta"]["type"] = "number"  # a private copy
    assert tool.input_schema["properties"]["zeta"]["type"] == "string"
    assert json.loads(json.dumps(plain))["$schema"] == DRAFT202012


def test_a_frozen_schema_compiles_to_an_equivalent_validator() -> None:
    schema = {**obj(a={"enum": [1, 2]}), "required": ["a"]}
    tool = build(s=[spec("t", schema=schema)]).get("s", "t")
    assert tool is not None
    validator = compile_validator(tool.input_schema)
    assert validator.is_valid({"a": 1})
    issue = validator.first_error({"a": 3})
    assert issue is not None and issue.path == "$.a"


class ExplodingMapping(dict[str, Any]):
    """A provider bug: reading the mapping raises."""

    def items(self) -> Any:
        raise RuntimeError("secret-token-123 leaked by a broken provider")

    def __iter__(self) -> Any:
        raise RuntimeError("secret-token-123 leaked by a broken provider")


def test_an_unexpected_failure_quarantines_only_that_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="codemodekit.catalog"):
        catalog = build(s=[spec("ok"), spec("broken", annotations=ExplodingMapping(x=1))])
    broken = catalog.get("s", "broken")
    assert broken is not None and broken.quarantine is not None
    assert "internal error" in broken.quarantine
    assert "secret-token" not in broken.quarantine
    assert catalog.validators("s", "ok") is not None
    assert any("could not be normalized" in r.getMessage() for r in caplog.records)
