"""Issue 13, item 5: binary data crosses the bridge only as the tagged shape
``{ $bytes: "<base64>", mediaType }`` (bounded); typed arrays, ArrayBuffer, Map, Set, Date…
are refused with the JSON path, as arguments (TOOL_INPUT_INVALID) and as the run's result
(RESULT_NOT_SERIALIZABLE)."""

from __future__ import annotations

from typing import Any

import pytest

from codemodekit import CodeMode, ErrorCode, allow_all_tool_calls, define_tool, local

OBJ: dict[str, Any] = {"type": "object"}

NOT_JSON = [
    ("new Uint8Array([1, 2, 3])", "Uint8Array"),
    ("new Int16Array(2)", "Int16Array"),
    ("new Float64Array(1)", "Float64Array"),
    ("new BigInt64Array(1)", "BigInt64Array"),
    ("new ArrayBuffer(4)", "ArrayBuffer"),
    ("new DataView(new ArrayBuffer(4))", "DataView"),
    ("new Map([[1, 2]])", "Map"),
    ("new Set([1])", "Set"),
    ("new WeakMap()", "WeakMap"),
    ("new WeakSet()", "WeakSet"),
    ("new Date(0)", "Date"),
    # A spoofed tag does not hide what it is.
    ("Object.defineProperty(new Set(), Symbol.toStringTag, { value: 'Object' })", "Set"),
]


@pytest.fixture
async def cm() -> Any:
    echo = define_tool(description="echo", input_schema=OBJ, execute=lambda a: a)
    async with CodeMode(
        sources=[local("app", {"echo": echo})], policy=allow_all_tool_calls()
    ) as cm:
        yield cm


@pytest.mark.parametrize(("expression", "kind"), NOT_JSON)
async def test_a_non_json_result_is_refused_naming_the_path(
    cm: CodeMode, expression: str, kind: str
) -> None:
    top = await cm.run(f"return {expression};")
    assert top.diagnostic is not None
    assert top.diagnostic.code is ErrorCode.RESULT_NOT_SERIALIZABLE
    assert (
        f"at $: a {kind}" in top.diagnostic.message or f"at $: an {kind}" in top.diagnostic.message
    )
    nested = await cm.run(f"return {{ items: [1, {{ 'odd key': {expression} }}] }};")
    assert nested.diagnostic is not None
    assert nested.diagnostic.code is ErrorCode.RESULT_NOT_SERIALIZABLE
    assert '$.items[1]["odd key"]' in nested.diagnostic.message


@pytest.mark.parametrize(("expression", "kind"), NOT_JSON)
async def test_a_non_json_argument_is_refused_before_the_host(
    cm: CodeMode, expression: str, kind: str
) -> None:
    r = await cm.run(
        f"try {{ await tools.app.echo({{ data: {{ part: {expression} }} }}); }}\n"
        "catch (e) { return [e.code, e.message, e.details.path]; }"
    )
    assert r.ok, r.diagnostic
    code, message, path = r.value
    assert code == "TOOL_INPUT_INVALID"
    assert path == "$.data.part"
    assert kind in message
    assert r.tool_calls == 0  # refused in the sandbox: the host never saw it


async def test_the_tagged_shape_crosses_in_both_directions(cm: CodeMode) -> None:
    r = await cm.run(
        "const sent = { $bytes: btoa('\\x00\\x01hi'), mediaType: 'application/octet-stream' };\n"
        "const back = (await tools.app.echo({ file: sent })).structuredContent.file;\n"
        "return { back, text: atob(back.$bytes).slice(2), same: back.$bytes === sent.$bytes };"
    )
    assert r.ok, r.diagnostic
    assert r.value == {
        "back": {"$bytes": "AAFoaQ==", "mediaType": "application/octet-stream"},
        "text": "hi",
        "same": True,
    }


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("{ $bytes: 'not base64!' }", "base64"),
        ("{ $bytes: 'AQI' }", "base64"),  # not a multiple of 4
        ("{ $bytes: 42 }", "base64"),
        ("{ $bytes: 'AQID', name: 'x.bin' }", "only `$bytes` and `mediaType`"),
        ("{ $bytes: 'AQID', mediaType: 7 }", "mediaType"),
        ("{ $bytes: 'A'.repeat(4 * 1024 * 1024 * 4 / 3 + 8) }", "at most"),
    ],
)
async def test_a_malformed_or_oversized_tagged_value_is_refused(
    cm: CodeMode, value: str, why: str
) -> None:
    r = await cm.run(f"return {{ file: {value} }};")
    assert r.diagnostic is not None
    assert r.diagnostic.code is ErrorCode.RESULT_NOT_SERIALIZABLE
    assert "$.file" in r.diagnostic.message and why in r.diagnostic.message


async def test_ordinary_json_and_class_instances_still_serialize(cm: CodeMode) -> None:
    r = await cm.run(
        "class Point { constructor() { this.x = 1; this.y = 2; } }\n"
        "return [new Point(), Object.create(null), { a: [1.5, 'x', null, true] }, "
        "new Date(0).toISOString()];"
    )
    assert r.ok, r.diagnostic
    assert r.value == [
        {"x": 1, "y": 2},
        {},
        {"a": [1.5, "x", None, True]},
        "1970-01-01T00:00:00.000Z",
    ]


async def test_a_local_tool_tags_its_bytes_explicitly() -> None:
    from codemodekit.binary import BYTES_LIMIT, BytesValueError, bytes_value, tag_bytes

    tools = {
        "png": define_tool(
            description="p",
            input_schema=OBJ,
            execute=lambda a: bytes_value(b"\x89PNG", "image/png"),
        ),
        "nested": define_tool(
            description="n", input_schema=OBJ, execute=lambda a: tag_bytes({"parts": [b"ab"]})
        ),
        "raw": define_tool(description="r", input_schema=OBJ, execute=lambda a: b"raw"),
    }
    async with CodeMode(sources=[local("img", tools)], policy=allow_all_tool_calls()) as cm:
        r = await cm.run(
            "const a = (await tools.img.png({})).structuredContent;\n"
            "const b = (await tools.img.nested({})).structuredContent;\n"
            "return [a, b, atob(a.$bytes).length];"
        )
        assert r.ok, r.diagnostic
        assert r.value == [
            {"$bytes": "iVBORw==", "mediaType": "image/png"},
            {"parts": [{"$bytes": "YWI=", "mediaType": "application/octet-stream"}]},
            4,
        ]
        raw = await cm.run("return await tools.img.raw({});")
        assert raw.diagnostic is not None
        assert raw.diagnostic.code is ErrorCode.TOOL_RESULT_INVALID
        assert "bytes_value" in raw.diagnostic.message
    with pytest.raises(BytesValueError, match="limit"):
        bytes_value(b"x" * (BYTES_LIMIT + 1))
