"""What a hostile upstream sends back reaches the model scrubbed, and as what it is.

An OpenAPI server echoes the credential it received in the places an error page is not:
a binary body of any media type, its reason phrase, its ``Retry-After`` header, the path
of a same-origin redirect. A raw MCP server answers with JSON-RPC error codes that are
ours or the SDK's (the -32000..-32099 range is the server's to use too), with a secret
split by control characters, or with JSON nested past the decoder. Each case is one call
through ``CodeMode.run``; the model-visible result must hold no form of the secret, and
an upstream's error must stay the upstream's (no reconnect, no timeout, no bound of ours).
"""

from __future__ import annotations

import base64
import binascii
import http.server
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import pytest

from codemodekit import CodeMode, ErrorCode, load_spec
from codemodekit.providers.base import HealthStatus
from tests.conftest import http_handler_server
from tests.security.test_secret_leaks import SECRET, api_key_document, assert_clean, encodings

FORMS = ("raw", "json", "url", "base64", "basic")
BINARY_MEDIA = (
    "application/octet-stream",
    "application/x-ndjson",
    "application/pdf",
    "image/png",
    "audio/wav",
    "",  # no type, and not UTF-8
)


class _Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(
        self, status: int, body: bytes, media: str, reason: str | None = None, **extra: str
    ) -> None:
        self.send_response(status, reason)
        if media:
            self.send_header("Content-Type", media)
        for name, value in extra.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        token = encodings(self.headers["X-Api-Key"])[query.get("form", "raw")]
        if url.path == "/bin":
            body = b"\xff\xfe head " + token.encode() + b" tail \x00\x89"
            self._send(200, body, query["media"])
        elif url.path == "/reason":
            self._send(401, b"", "text/plain", reason=f"Bad token {token}")
        elif url.path == "/retry":
            self._send(429, b"slow down", "text/plain", Retry_After=token)
        elif url.path == "/redir":
            self._send(302, b"", "", Location="/t/" + quote(token, safe=""))
        elif url.path.startswith("/t/"):
            self._send(200, b"%PDF-1.4 \x00\xff", "application/pdf")
        elif url.path == "/deep":
            self._send(int(query["status"]), b"[" * 5000 + b"]" * 5000, "application/json")
        else:
            self._send(404, b"nope", "text/plain")


def _operation(path: str, *names: str) -> dict[str, Any]:
    parameters = [
        {"name": n, "in": "query", "required": True, "schema": {"type": "string"}} for n in names
    ]
    return {
        path: {
            "get": {
                "operationId": path.strip("/"),
                "parameters": parameters,
                "responses": {"200": {"description": "ok"}},
            }
        }
    }


DOCUMENT = api_key_document(
    {
        **_operation("/bin", "form", "media"),
        **_operation("/reason", "form"),
        **_operation("/retry", "form"),
        **_operation("/redir", "form"),
        **_operation("/deep", "status"),
    }
)


@pytest.fixture
def echo_api() -> Iterator[str]:
    with http_handler_server(_Echo) as url:
        yield url


def _openapi_spec(tmp_path: Path, url: str) -> Any:
    (tmp_path / "api.json").write_text(json.dumps(DOCUMENT))
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "x"\n[policy]\ndefault = "allow"\n'
        f'[sources.api]\ntype = "openapi"\ndocument = "api.json"\nbase_url = "{url}"\n'
        'auth = { api_key = "${API_KEY}" }\n'
    )
    return load_spec(tmp_path / "codemode.toml")


def _assert_clean_everywhere(value: Any) -> None:
    """The result as JSON, and every string in it that is base64, decoded."""
    text = json.dumps(value, ensure_ascii=False)
    assert_clean(text)
    for item in _strings(value):
        try:
            decoded = base64.b64decode(item, validate=True)
        except (binascii.Error, ValueError):
            continue
        assert_clean(decoded.decode("latin-1"))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


async def test_openapi_echoes_outside_the_error_page_are_scrubbed(
    tmp_path: Path, echo_api: str
) -> None:
    calls = [f"bin({{form: '{f}', media: '{m}'}})" for f in FORMS for m in BINARY_MEDIA]
    calls += [f"{op}({{form: '{f}'}})" for op in ("reason", "retry", "redir") for f in FORMS]
    async with CodeMode.from_spec(
        _openapi_spec(tmp_path, echo_api), environ={"API_KEY": SECRET}
    ) as cm:
        for call in calls:
            result = await cm.run(f"return await tools.api.{call};")
            _assert_clean_everywhere(result.to_json())
            if call.startswith("retry"):
                assert result.diagnostic is not None and "HTTP 429" in result.diagnostic.message
            if call.startswith("bin"):
                assert result.ok, (call, result.diagnostic)


async def test_openapi_json_nested_past_the_decoder_is_a_result_error(
    tmp_path: Path, echo_api: str
) -> None:
    async with CodeMode.from_spec(
        _openapi_spec(tmp_path, echo_api), environ={"API_KEY": SECRET}
    ) as cm:
        ok = await cm.run("return await tools.api.deep({status: '200'});")
        refused = await cm.run("return await tools.api.deep({status: '400'});")
    assert ok.diagnostic is not None and ok.diagnostic.code is ErrorCode.TOOL_RESULT_INVALID
    assert refused.diagnostic is not None and refused.diagnostic.code is ErrorCode.TOOL_ERROR
    assert "HTTP 400" in refused.diagnostic.message


RAW_MCP = r"""
import json, os, sys
TOKEN = os.environ["TOKEN"]
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": n, "description": "d", "inputSchema": {"type": "object"}}
                            for n in ("closed", "timeout", "deep", "large", "split", "ansi")]}
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name in ("closed", "timeout", "deep", "large"):
            code = {"closed": -32000, "timeout": -32001, "deep": -32099, "large": -32098}[name]
            error = {"code": code, "message": f"rate limited: token {TOKEN}"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": error}) + "\n")
            sys.stdout.flush()
            continue
        split = "\x01".join(TOKEN) if name == "split" else TOKEN[:5] + "\x1b[0m" + TOKEN[5:]
        result = {"isError": True, "content": [{"type": "text", "text": f"token is {split}"}]}
    elif mid is None:
        continue
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()
"""


async def test_an_mcp_servers_own_errors_stay_its_own_and_are_scrubbed(tmp_path: Path) -> None:
    (tmp_path / "raw_mcp.py").write_text(RAW_MCP)
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "x"\n[policy]\ndefault = "allow"\n'
        f'[sources.m]\ntype = "mcp"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(tmp_path / 'raw_mcp.py'))}]\n"
        'env = { TOKEN = "${TOK}" }\n'
    )
    spec = load_spec(tmp_path / "codemode.toml")
    async with CodeMode.from_spec(spec, environ={"TOK": SECRET}) as cm:
        results = {
            name: await cm.run(f"return await tools.m.{name}({{}});")
            for name in ("closed", "timeout", "deep", "large", "split", "ansi")
        }
        health = [h.status for h in cm.health]
    for name, result in results.items():
        _assert_clean_everywhere(result.to_json())
        assert result.diagnostic is not None, name
        # The server's own refusals: not a lost connection, a timeout, or a bound of ours.
        assert result.diagnostic.code is ErrorCode.TOOL_ERROR, (name, result.diagnostic)
    assert "rate limited" in results["closed"].diagnostic.message  # type: ignore[union-attr]
    assert health == [HealthStatus.OK]
