"""What an agent meets through the MCP server (issue 20): the sources told at connect
time, names that point to the real ones, input errors that say what is expected, images as
images, and the small texts the trial hit. Driven by the real mcp client, in-process."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from codemodekit import (
    CodeMode,
    Limits,
    __version__,
    allow_all_tool_calls,
    define_tool,
    load_spec,
    local,
)
from codemodekit.binary import bytes_value
from codemodekit.server.hosting import create_server

SERVER = Path(__file__).parents[1] / "servers" / "mcp_test_server.py"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PET_SCHEMA = {
    "type": "object",
    "properties": {
        "petId": {"type": "integer"},
        "fields": {"type": "array", "items": {"type": "string"}},
        "status": {"enum": ["available", "pending", "sold"]},
    },
    "required": ["petId"],
    "additionalProperties": False,
}


def _tools() -> dict[str, Any]:
    return {
        "get_pet": define_tool(
            description="Find a pet by id.", input_schema=PET_SCHEMA, execute=lambda a: a
        ),
        "photo": define_tool(
            description="A photo of the pet.",
            input_schema={"type": "object"},
            execute=lambda a: bytes_value(PNG, "image/png"),
        ),
        "broken": define_tool(
            description="Its schema points nowhere.",
            input_schema={"type": "object", "properties": {"a": {"$ref": "#/nope"}}},
            execute=lambda a: {},
        ),
    }


@pytest.fixture
async def code_mode() -> AsyncIterator[CodeMode]:
    sources = [
        local("petstore", _tools(), description="Pets of the demo store"),
        local(
            "docs",
            {
                "read": define_tool(
                    description="Read.", input_schema={"type": "object"}, execute=lambda a: "x"
                )
            },
        ),
    ]
    async with CodeMode(sources=sources, policy=allow_all_tool_calls()) as cm:
        yield cm


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _run(cm: CodeMode, code: str) -> types.CallToolResult:
    async with Client(create_server(cm)) as client:
        return await client.call_tool("run_typescript", {"code": code})


# -- 1. the sources, told at connect time -------------------------------------------------------
async def test_instructions_name_each_source_its_description_and_tool_count(
    code_mode: CodeMode,
) -> None:
    async with Client(create_server(code_mode)) as client:
        instructions = client.instructions or ""
        listed = {t.name: t for t in (await client.list_tools()).tools}
        info = client.server_info
    assert "- tools.petstore: Pets of the demo store (2 of 3 tools available)" in instructions
    assert "- tools.docs (1 tool)" in instructions
    # The tool description names the sources (never their tools: the catalog may change).
    description = listed["run_typescript"].description or ""
    assert "Sources: `tools.petstore`, `tools.docs`." in description
    assert "get_pet" not in description
    assert info is not None and info.version == __version__


async def test_instructions_are_the_same_for_the_same_sources(code_mode: CodeMode) -> None:
    first = create_server(code_mode).instructions
    async with CodeMode(
        sources=[
            local("petstore", _tools(), description="Pets of the demo store"),
            local(
                "docs",
                {
                    "read": define_tool(
                        description="Read.", input_schema={"type": "object"}, execute=lambda a: "x"
                    )
                },
            ),
        ],
        policy=allow_all_tool_calls(),
    ) as again:
        assert create_server(again).instructions == first
    assert code_mode.catalog.revision not in (first or "")


async def test_many_sources_are_listed_up_to_a_bound() -> None:
    tool = define_tool(description="Noop.", input_schema={"type": "object"}, execute=lambda a: None)
    sources = [local(f"s{i:02}", {"noop": tool}, description="x" * 400) for i in range(45)]
    async with CodeMode(sources=sources, policy=allow_all_tool_calls()) as cm:
        instructions = create_server(cm).instructions or ""
        description = (await _list_run_description(cm)) or ""
    assert "- tools.s29:" in instructions and "- tools.s30" not in instructions
    assert "and 15 more sources" in instructions
    assert len(instructions) < 8000, len(instructions)
    assert "and 15 more." in description and len(description) < 2500


async def _list_run_description(cm: CodeMode) -> str | None:
    async with Client(create_server(cm)) as client:
        tools = (await client.list_tools()).tools
    return next(t.description for t in tools if t.name == "run_typescript")


async def test_descriptions_from_the_spec_and_from_the_upstreams(tmp_path: Path) -> None:
    (tmp_path / "api.yaml").write_text(
        "openapi: 3.1.0\ninfo: {title: Inventory API, version: '1'}\npaths:\n"
        "  /items:\n    get:\n      operationId: listItems\n      responses: {'200': {description: ok}}\n"
    )
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "told"\n[policy]\ndefault = "deny"\n'
        '[sources.inventory]\ntype = "openapi"\ndocument = "api.yaml"\n'
        'base_url = "http://127.0.0.1:9"\n'
        '[sources.shop]\ntype = "python"\nmodule = "codemodekit.examples.demo"\n'
        '[sources.told]\ntype = "python"\nmodule = "codemodekit.examples.demo"\n'
        'description = "The shop, described in codemode.toml"\n'
        f'[sources.upstream]\ntype = "mcp"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(SERVER))}]\n"
    )
    async with CodeMode.from_spec(load_spec(tmp_path / "codemode.toml")) as cm:
        overview = {s.name: s for s in cm.sources_overview()}
        instructions = create_server(cm).instructions or ""
    assert overview["inventory"].description == "Inventory API"
    assert overview["shop"].description.startswith("A tiny in-memory shop")
    assert overview["told"].description == "The shop, described in codemode.toml"
    assert overview["upstream"].description == "codemodekit-test-server"  # its serverInfo
    assert overview["inventory"].tools == overview["inventory"].listed == 1
    assert "- tools.told: The shop, described in codemode.toml (" in instructions


# -- 2. unknown names point to the real ones ----------------------------------------------------
async def test_an_unknown_source_far_from_any_lists_the_sources(code_mode: CodeMode) -> None:
    text = _text(await _run(code_mode, "return await tools.filesystem.read({})"))
    assert "SOURCE_NOT_FOUND" in text
    assert "Available sources: `tools.docs`, `tools.petstore`." in text


async def test_an_unknown_source_close_to_one_suggests_it(code_mode: CodeMode) -> None:
    text = _text(await _run(code_mode, "return await tools.petshop.get_pet({})"))
    assert "Did you mean `tools.petstore`?" in text


async def test_an_unknown_tool_lists_its_sources_tools(code_mode: CodeMode) -> None:
    text = _text(await _run(code_mode, "return await tools.petstore.list_all({})"))
    assert "TOOL_NOT_FOUND" in text
    assert (
        "Available tools of 'petstore': `tools.petstore.broken`, `tools.petstore.get_pet`, "
        "`tools.petstore.photo`." in text
    )
    close = _text(await _run(code_mode, "return await tools.petstore.getpet({})"))
    assert "Did you mean `tools.petstore.get_pet`?" in close


# -- 3. a wrong argument says what is expected --------------------------------------------------
async def test_input_errors_name_the_expected_properties(code_mode: CodeMode) -> None:
    text = _text(await _run(code_mode, "return await tools.petstore.get_pet({ id: 1 })"))
    assert "TOOL_INPUT_INVALID" in text and "'id' was unexpected" in text
    assert (
        "Expected properties: `petId` (required, integer), `fields` (string[]), "
        "`status` ('available' | 'pending' | 'sold'); no others." in text
    )


async def test_the_expected_properties_are_bounded() -> None:
    wide = {
        "type": "object",
        "properties": {f"property_number_{i}": {"type": "string"} for i in range(200)},
        "required": ["property_number_150"],
    }
    tool = define_tool(description="Wide.", input_schema=wide, execute=lambda a: a)
    async with CodeMode(sources=[local("w", {"wide": tool})], policy=allow_all_tool_calls()) as cm:
        result = await cm.run("return await tools.w.wide({ property_number_1: 2 })")
    assert result.diagnostic is not None
    message = result.diagnostic.message
    assert "`property_number_150` (required, string)" in message  # required ones first
    assert "more." in message and len(message) <= 1000


# -- 4. images reach the model as images --------------------------------------------------------
async def test_a_returned_image_is_an_image_content_block(code_mode: CodeMode) -> None:
    result = await _run(code_mode, "return (await tools.petstore.photo({})).structuredContent")
    assert not result.is_error
    kinds = [c.type for c in result.content]
    assert kinds == ["text", "image"], kinds
    image = result.content[1]
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data) == PNG
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == {"$media": 1, "mediaType": "image/png", "bytes": len(PNG)}
    # `return` stays the structured result.
    assert result.structured_content is not None
    assert result.structured_content["value"]["$bytes"] == base64.b64encode(PNG).decode()


async def test_arrays_of_images_audio_and_mcp_image_content(code_mode: CodeMode) -> None:
    data = base64.b64encode(PNG).decode()
    code = f"""
const png = (await tools.petstore.photo({{}})).structuredContent;
return [png, "a caption", {{ type: "image", data: "{data}", mimeType: "image/png" }},
        {{ $bytes: "{data}", mediaType: "audio/wav" }}, {{ $bytes: "{data}", mediaType: "text/plain" }}];
"""
    result = await _run(code_mode, code)
    assert [c.type for c in result.content] == ["text", "image", "image", "audio"]
    shown = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert shown[1] == "a caption" and shown[2]["$media"] == 2 and shown[3]["$media"] == 3
    assert shown[4] == {"$bytes": data, "mediaType": "text/plain"}  # not a picture: data


async def test_images_past_the_bound_stay_data(code_mode: CodeMode) -> None:
    code = "const p = (await tools.petstore.photo({})).structuredContent; return Array(12).fill(p);"
    result = await _run(code_mode, code)
    assert [c.type for c in result.content].count("image") == 8
    shown = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert "$bytes" in shown[8] and shown[7]["$media"] == 8


# -- 5. the tools proxy converts to a string ----------------------------------------------------
async def test_string_of_the_tools_proxy(code_mode: CodeMode) -> None:
    code = "return [String(tools), `${tools}`, String(tools.petstore), `${tools.petstore.get_pet}`]"
    result = await code_mode.run(code)
    assert result.ok, result.diagnostic
    assert result.value == ["[tools]", "[tools]", "[tools.petstore]", "[tools.petstore.get_pet]"]


# -- small things -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("return await fetch('https://example.com')", "no network access"),
        ("setTimeout(() => 1, 10)", "no timers"),
        ("setInterval(() => 1, 10)", "no timers"),
        ("const b = Buffer.from('x')", "btoa/atob"),
        ("return process.env", "no modules or host APIs"),
    ],
)
async def test_missing_host_globals_say_what_the_sandbox_offers(
    code_mode: CodeMode, code: str, says: str
) -> None:
    result = await code_mode.run(code)
    assert result.diagnostic is not None
    assert result.diagnostic.message.startswith("ReferenceError: ")
    assert says in result.diagnostic.message


async def test_an_unrelated_reference_error_is_left_alone(code_mode: CodeMode) -> None:
    result = await code_mode.run("return nope")
    assert result.diagnostic is not None
    assert result.diagnostic.message == "ReferenceError: nope is not defined"


@pytest.mark.parametrize(
    ("code", "warned"),
    [
        ("const x = 1;\nx", True),
        ("const x = 1;\nx + 1; // the answer", True),
        ("const x = 1;\nif (x) { x }", False),
        ("const x = 1;\nreturn x", False),
        ("let x = 1;", False),
    ],
)
async def test_a_last_expression_without_return_warns(
    code_mode: CodeMode, code: str, warned: bool
) -> None:
    result = await code_mode.run(code)
    assert result.ok
    assert any("ends in an expression" in w for w in result.warnings) is warned
    if warned:
        text = _text(await _run(code_mode, code))
        assert "warning: the code has no `return` statement and ends in an expression" in text


async def test_tool_timeout_names_its_limit() -> None:
    import asyncio

    async def never(_args: dict[str, Any]) -> None:
        await asyncio.Event().wait()

    tool = define_tool(description="Hangs.", input_schema={"type": "object"}, execute=never)
    limits = Limits(tool_call_time_ms=50)
    async with CodeMode(
        sources=[local("slow", {"hang": tool})], policy=allow_all_tool_calls(), limits=limits
    ) as cm:
        result = await cm.run("return await tools.slow.hang({})")
    assert result.diagnostic is not None and result.diagnostic.code == "TOOL_TIMEOUT"
    assert "(tool_call_time_ms)" in result.diagnostic.message


# -- 6. search that admits a miss ---------------------------------------------------------------
async def test_search_tools_says_when_no_tool_matches_well(code_mode: CodeMode) -> None:
    async with Client(create_server(code_mode)) as client:
        miss = await client.call_tool("search_tools", {"query": "show a picture of the weather"})
        hit = await client.call_tool("search_tools", {"query": "find a pet by id"})
    text = _text(miss)
    assert "note: no tool matches 'show a picture of the weather' well; closest: " in text
    assert miss.structured_content is not None and miss.structured_content["weak"] is True
    assert "no tool matches" not in _text(hit)
    assert hit.structured_content is not None and "weak" not in hit.structured_content
