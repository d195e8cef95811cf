"""Responses: decoding by content type, errors, the streaming bound, redirects."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

from codemodekit.errors import SourceUnavailable, ToolError
from codemodekit.providers.base import HealthStatus, ResultTooLarge
from codemodekit.providers.openapi import OpenApiToolProvider
from tests.providers.openapi.conftest import context, make_provider, started
from tests.providers.openapi.server import ServerThread


async def test_json_text_binary_and_empty(wire: OpenApiToolProvider, server: ServerThread) -> None:
    text = await wire.call_tool("text", {}, context())
    assert text.content == ({"type": "text", "text": "héllo\nworld"},)
    assert text.structured_content is None
    image = await wire.call_tool("binary", {}, context())
    assert image.content == (
        {
            "type": "image",
            "mimeType": "image/png",
            "data": base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x01").decode(),
        },
    )
    blob = await wire.call_tool("blob", {}, context())
    resource = blob.content[0]["resource"]
    assert resource["mimeType"] == "application/zip"
    assert base64.b64decode(resource["blob"]) == b"PK\x03\x04\x00\xff"
    empty = await wire.call_tool("empty", {}, context())
    assert empty.content == () and empty.structured_content is None
    assert server.app.last.method == "DELETE"


async def test_non_2xx_is_a_tool_error_with_status_and_excerpt(wire: OpenApiToolProvider) -> None:
    with pytest.raises(ToolError) as caught:
        await wire.call_tool("status", {"code": 503}, context())
    assert caught.value.code == "503"
    assert caught.value.message.startswith(
        "GET /status/{code} failed: HTTP 503 Service Unavailable: {"
    )
    assert len(caught.value.message) < 600


async def test_streaming_bound_stops_reading(
    wire: OpenApiToolProvider, server: ServerThread
) -> None:
    with pytest.raises(ResultTooLarge) as caught:
        await wire.call_tool("huge", {}, context(max_result_bytes=100_000))
    assert caught.value.limit == 100_000
    # The client hung up: the server saw the disconnect long before its 256 MiB were out.
    async with asyncio.timeout(60):  # a hang guard: the server notices the hang-up
        while not server.app.huge_disconnected:
            await asyncio.sleep(0.01)
    assert not server.app.huge_finished
    assert server.app.huge_sent < 64 * 1024 * 1024


async def test_redirects(wire: OpenApiToolProvider, server: ServerThread) -> None:
    same = await wire.call_tool("redirectSame", {}, context())
    assert same.structured_content["path"] == "/landed"
    assert same.structured_content["query"] == "from=redirect"
    count = len(server.app.requests)
    with pytest.raises(ToolError, match="refused a redirect to another host"):
        await wire.call_tool("redirectOther", {}, context())
    assert len(server.app.requests) == count + 1  # nothing else was contacted
    with pytest.raises(ToolError, match="more than 3 redirects"):
        await wire.call_tool("redirectLoop", {}, context())


async def test_connection_failure_is_a_tool_error() -> None:
    provider = make_provider("wire.yaml", base_url="http://127.0.0.1:9/api")
    await started(provider)
    try:
        with pytest.raises(ToolError, match=r"GET /text: the request failed \(ConnectError\)"):
            await provider.call_tool("text", {}, context())
    finally:
        await provider.aclose()
    assert provider.health().status == HealthStatus.CLOSED


async def test_document_server_with_variables_is_the_default_base(server: ServerThread) -> None:
    provider = make_provider("wire.yaml")
    await started(provider)
    try:
        # The document's server is http://127.0.0.1:9/api (variable defaults): nothing listens.
        with pytest.raises(ToolError, match="ConnectError"):
            await provider.call_tool("text", {}, context())
    finally:
        await provider.aclose()


async def test_relative_server_requires_base_url() -> None:
    provider = make_provider("schemas30.yaml")
    with pytest.raises(
        SourceUnavailable,
        match=r"'/relative' is not an absolute http\(s\) URL; set base_url in \[sources.api\]",
    ):
        await started(provider)


async def test_bad_base_url_is_refused() -> None:
    provider = make_provider("wire.yaml", base_url="ftp://127.0.0.1/x")
    with pytest.raises(SourceUnavailable, match=r"sources\.api\.base_url"):
        await started(provider)


async def test_timeout_is_a_tool_error(wire: OpenApiToolProvider) -> None:
    with pytest.raises(ToolError, match=r"GET /sleep: the API did not answer within 0\.2s"):
        await wire.call_tool("sleep", {}, context(timeout_s=0.2))


async def test_html_error_page_excerpt_is_text_from_a_bounded_prefix(
    wire: OpenApiToolProvider,
) -> None:
    with pytest.raises(ToolError) as caught:
        await wire.call_tool("htmlError", {}, context())
    assert caught.value.message == (
        "GET /html-error failed: HTTP 502 Bad Gateway: Bad gateway upstream down"
    )


async def test_transport_replaces_the_network() -> None:
    import httpx

    from codemodekit.limits import Limits
    from codemodekit.spec.model import OpenApiSource
    from tests.providers.openapi.conftest import FIXTURES

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={"ok": True})

    config = OpenApiSource(name="m", document=FIXTURES / "wire.yaml", base_url="https://api.test")
    provider = OpenApiToolProvider(
        config, limits=Limits(), environ={}, transport=httpx.MockTransport(handler)
    )
    await started(provider)
    try:
        out = await provider.call_tool("queryForm", {"prim": "x"}, context())
    finally:
        await provider.aclose()
    assert out.structured_content == {"ok": True}
    assert seen == ["https://api.test/q/form?prim=x"]


async def test_path_and_operation_servers(tmp_path: Path) -> None:
    import json

    import httpx

    from codemodekit.limits import Limits
    from codemodekit.spec.model import OpenApiSource

    ok = {"200": {"description": "ok"}}
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.test/v1"}],
        "paths": {
            "/a": {
                "servers": [{"url": "/v2"}],
                "get": {"operationId": "pathLevel", "responses": ok},
            },
            "/b": {
                "get": {
                    "operationId": "otherHost",
                    "servers": [{"url": "https://elsewhere.test"}],
                    "responses": ok,
                }
            },
            "/c": {"get": {"operationId": "plain", "responses": ok}},
        },
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(document))
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(204)

    async def urls(base_url: str | None) -> tuple[list[str], dict[str, str]]:
        seen.clear()
        config = OpenApiSource(name="s", document=path, base_url=base_url)
        provider = OpenApiToolProvider(
            config, limits=Limits(), environ={}, transport=httpx.MockTransport(handler)
        )
        discovery = await started(provider)
        try:
            for tool in discovery.tools:
                await provider.call_tool(tool.name, {}, context())
        finally:
            await provider.aclose()
        return list(seen), {s.name: s.reason for s in discovery.skipped}

    called, skipped = await urls(None)
    assert called == ["https://api.test/v2/a", "https://api.test/v1/c"]
    assert skipped == {
        "otherHost": "GET /b: operation server 'https://elsewhere.test' is on another host "
        "than the source's base URL"
    }
    # base_url overrides every server of the document.
    called, skipped = await urls("https://override.test/x")
    assert called == [
        "https://override.test/x/a",
        "https://override.test/x/b",
        "https://override.test/x/c",
    ]
    assert skipped == {}
