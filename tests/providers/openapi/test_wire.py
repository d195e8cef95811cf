"""Exact wire format of every supported parameter style, against a real server."""

from __future__ import annotations

from typing import Any

import pytest

from codemodekit.errors import ToolError
from codemodekit.providers.openapi import OpenApiToolProvider
from tests.providers.openapi.conftest import context
from tests.providers.openapi.server import Recorded, ServerThread

COLOR = {"R": 100, "G": 200}


async def call(
    provider: OpenApiToolProvider, server: ServerThread, name: str, args: dict[str, Any]
) -> Recorded:
    await provider.call_tool(name, args, context())
    return server.app.last


async def test_path_simple(wire: OpenApiToolProvider, server: ServerThread) -> None:
    got = await call(
        wire, server, "pathSimple", {"prim": "a b/c", "arr": [3, 4], "obj": COLOR, "objx": COLOR}
    )
    assert got.raw_path == "/api/p/simple/a%20b%2Fc/3,4/R,100,G,200/R=100,G=200"


async def test_path_label(wire: OpenApiToolProvider, server: ServerThread) -> None:
    args = {"prim": "x", "arr": ["a", "b"], "arrx": ["a", "b"], "obj": COLOR, "objx": COLOR}
    got = await call(wire, server, "pathLabel", args)
    assert got.raw_path == "/api/p/label/.x/.a,b/.a.b/.R,100,G,200/.R=100.G=200"


async def test_path_matrix(wire: OpenApiToolProvider, server: ServerThread) -> None:
    args = {"prim": "x", "arr": ["a", "b"], "arrx": ["a", "b"], "obj": COLOR, "objx": COLOR}
    got = await call(wire, server, "pathMatrix", args)
    assert got.raw_path == (
        "/api/p/matrix/;prim=x/;arr=a,b/;arrx=a;arrx=b/;obj=R,100,G,200/;R=100;G=200"
    )


async def test_query_form(wire: OpenApiToolProvider, server: ServerThread) -> None:
    args = {
        "prim": "a&b=c",
        "num": 1.5,
        "flag": True,
        "arrx": ["x", "y"],
        "arr": ["x", "y"],
        "objx": COLOR,
        "obj": COLOR,
        "reserved": "a/b?c%2F#[x] y",
        "json": {"k": [1]},
    }
    got = await call(wire, server, "queryForm", args)
    assert got.query == (
        "prim=a%26b%3Dc&num=1.5&flag=true&arrx=x&arrx=y&arr=x,y&R=100&G=200"
        "&obj=R,100,G,200&reserved=a/b?c%2F%23%5Bx%5D%20y&json=%7B%22k%22%3A%5B1%5D%7D"
    )


async def test_query_omits_absent_null_and_empty(
    wire: OpenApiToolProvider, server: ServerThread
) -> None:
    got = await call(wire, server, "queryForm", {"prim": None, "arrx": [], "num": 0})
    assert got.query == "num=0"


async def test_query_delimited_and_deep_object(
    wire: OpenApiToolProvider, server: ServerThread
) -> None:
    args = {"space": ["a", "b c"], "pipe": ["a", "b"], "deep": COLOR}
    got = await call(wire, server, "queryDelimited", args)
    assert got.query == "space=a%20b%20c&pipe=a%7Cb&deep%5BR%5D=100&deep%5BG%5D=200"


async def test_headers_simple(wire: OpenApiToolProvider, server: ServerThread) -> None:
    args = {"X-Prim": 5, "X-Arr": ["a", "b"], "X-Obj": COLOR, "X-Objx": COLOR}
    got = await call(wire, server, "headers", args)
    assert got.header("x-prim") == "5"
    assert got.header("x-arr") == "a,b"
    assert got.header("x-obj") == "R,100,G,200"
    assert got.header("x-objx") == "R=100,G=200"


async def test_accept_header_parameter_is_ignored_per_spec(wire: OpenApiToolProvider) -> None:
    # OpenAPI: header parameters named Accept, Content-Type or Authorization are ignored.
    assert "Accept" not in dict(wire_tool_properties(await _discovery_of(wire), "headers"))


async def test_header_control_characters_refused(wire: OpenApiToolProvider) -> None:
    with pytest.raises(ToolError, match="control characters"):
        await wire.call_tool("headers", {"X-Arr": ["a\r\nInjected: 1"]}, context())


async def test_cookies(wire: OpenApiToolProvider, server: ServerThread) -> None:
    got = await call(wire, server, "cookies", {"session": "s 1", "list": ["a", "b"]})
    assert got.header("cookie") == "session=s%201; list=a,b"


async def test_collisions_and_json_body(wire: OpenApiToolProvider, server: ServerThread) -> None:
    discovery = await _discovery_of(wire)
    props = dict(wire_tool_properties(discovery, "collide"))
    # path keeps the name; the query twin is renamed; "body" is taken so the body moves.
    assert list(props) == ["id", "id_query", "body", "requestBody"]
    args = {"id": "p", "id_query": "q", "body": "b", "requestBody": COLOR}
    result = await wire.call_tool("collide", args, context())
    got = server.app.last
    assert (got.method, got.raw_path, got.query) == ("POST", "/api/collide/p", "id=q&body=b")
    assert got.header("content-type") == "application/json"
    assert got.body == b'{"R":100,"G":200}'
    assert result.structured_content["method"] == "POST"


async def _discovery_of(provider: OpenApiToolProvider) -> Any:
    # start() already ran in the fixture; a second provider gives the same discovery.
    from tests.providers.openapi.conftest import make_provider, started

    fresh = make_provider("wire.yaml", base_url="http://127.0.0.1:9")
    discovery = await started(fresh)
    await fresh.aclose()
    return discovery


def wire_tool_properties(discovery: Any, name: str) -> list[tuple[str, Any]]:
    tool = next(t for t in discovery.tools if t.name == name)
    return list(tool.input_schema["properties"].items())


async def test_form_urlencoded_body(wire: OpenApiToolProvider, server: ServerThread) -> None:
    body = {
        "name": "a b+c",
        "tags": ["x", "y"],
        "ids": [1, 2],
        "pipes": ["p", "q"],
        "url": "http://h/?a",
    }
    got = await call(wire, server, "formBody", {"body": body})
    assert got.header("content-type") == "application/x-www-form-urlencoded"
    assert got.body == b"name=a%20b%2Bc&tags=x&tags=y&ids=1,2&pipes=p%7Cq&url=http://h/?a"


async def test_text_plain_body(wire: OpenApiToolProvider, server: ServerThread) -> None:
    got = await call(wire, server, "textBody", {"body": "héllo\nthere"})
    assert got.header("content-type") == "text/plain; charset=utf-8"
    assert got.body == "héllo\nthere".encode()
    # An optional body left out sends no body at all.
    got = await call(wire, server, "textBody", {})
    assert got.body == b"" and got.header("content-type") is None


async def test_non_ascii_header_value_is_a_tool_error(wire: OpenApiToolProvider) -> None:
    with pytest.raises(ToolError, match="header values must be ASCII"):
        await wire.call_tool("headers", {"X-Arr": ["é"]}, context())
