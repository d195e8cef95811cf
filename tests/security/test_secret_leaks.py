"""No secret reaches the model or `codemode check`, in any encoding, on any path.

A secret set through ``${VAR}`` is echoed back by real upstreams (an MCP server over stdio,
an HTTP API on 127.0.0.1) in every form it can take in transit; the model-visible results,
errors and health, and the CLI's output, must carry none of them, nor any long piece of it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus

import pytest

from codemodekit import CodeMode, load_spec

SECRET = 'Zq7"XkW9/pLm+2Vb N4r&<k8>Ty'
USER = "alice"


def _json_escaped(secret: str, escape: str, hex_case: str = "lower") -> str:
    """JSON string content as another encoder writes it: the characters in ``escape`` (or
    every one, for ``"all"``) as ``\\uXXXX`` in ``hex_case``, the rest as Python writes them."""
    out = []
    for char in secret:
        if escape == "all" or char in escape:
            code = f"{ord(char):04x}"
            out.append("\\u" + (code.upper() if hex_case == "upper" else code))
        else:
            out.append(json.dumps(char, ensure_ascii=False)[1:-1])
    return "".join(out)


def encodings(secret: str) -> dict[str, str]:
    """Each way an upstream may echo the secret back."""
    data = secret.encode()
    go = _json_escaped(secret, "&<>")  # Go's encoding/json: HTML-safe by default
    return {
        "raw": secret,
        "json": json.dumps(secret)[1:-1],
        "json_ascii_slash": json.dumps(secret).replace("/", "\\/")[1:-1],
        "json_go": go,
        "json_go_in_json": json.dumps(go)[1:-1],
        "json_upper_hex": _json_escaped(secret, "&<>'=+ /", hex_case="upper"),
        "json_every_char": _json_escaped(secret, "all"),
        "url": quote(secret, safe=""),
        "url_lower": re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), quote(secret, safe="")),
        "url_plus": quote_plus(secret),
        "url_path": quote(secret),
        "base64": base64.b64encode(data).decode(),
        "base64_url": base64.urlsafe_b64encode(data).decode().rstrip("="),
        "basic": base64.b64encode(f"{USER}:{secret}".encode()).decode(),
        "basic_long_user": base64.b64encode(f"{USER}xy:{secret}".encode()).decode(),
        "html": "&lt;k8&gt;".join(secret.split("<k8>")).replace("&", "&amp;", 1),
        "embedded": f"prefix-{secret}-suffix",
    }


def pieces(secret: str, size: int = 6) -> set[str]:
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def assert_clean(text: str, secret: str = SECRET) -> None:
    """Neither the secret, nor any 6-character piece of it, nor an encoding of one."""
    for piece in pieces(secret):
        assert piece not in text, (piece, text[:2000])
        for form in ("json", "url", "base64"):
            encoded = encodings(piece)[form]
            if form != "base64":
                assert encoded not in text, (piece, form, text[:2000])
    for name, form in encodings(secret).items():
        assert form not in text, (name, text[:2000])


ECHO_SERVER = """
import base64, json, os, re, sys
from urllib.parse import quote, quote_plus
import mcp_types as types
from mcp.server.mcpserver import MCPServer

sys.path.insert(0, {tests!r})
from test_secret_leaks import encodings

server = MCPServer("echo-secrets")
SECRET = os.environ["LEAKED"]


@server.tool()
def leak(form: str) -> types.CallToolResult:
    text = encodings(SECRET)[form]
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=f"the token is {{text}}"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="mem://x", text=text),
            ),
        ],
        structured_content={{"token": text, text: {{"deep": [text]}}}},
    )


@server.tool()
def refuse(form: str) -> types.CallToolResult:
    text = encodings(SECRET)[form]
    return types.CallToolResult(
        content=[], structured_content={{"error": "x" * 1990 + text}}, is_error=True
    )


server.run()
"""


@pytest.fixture
def mcp_spec(tmp_path: Path) -> Path:
    server = tmp_path / "echo_server.py"
    server.write_text(ECHO_SERVER.format(tests=str(Path(__file__).parent)))
    (tmp_path / "codemode.toml").write_text(
        f"""
version = 1
name = "leaks"
[policy]
default = "allow"
[sources.up]
type = "mcp"
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(server))}]
env = {{ LEAKED = "${{LEAK_TOKEN}}" }}
"""
    )
    return tmp_path / "codemode.toml"


async def test_mcp_results_are_scrubbed_in_every_encoding(mcp_spec: Path) -> None:
    async with CodeMode.from_spec(load_spec(mcp_spec), environ={"LEAK_TOKEN": SECRET}) as cm:
        for form in encodings(SECRET):
            result = await cm.run(f"return await tools.up.leak({{form: {json.dumps(form)}}});")
            assert result.ok, (form, result.diagnostic)
            shown = json.dumps(result.value, ensure_ascii=False)
            assert "***" in shown, form
            assert_clean(shown)
            assert_clean(json.dumps(result.value))
            # An error reply is scrubbed before it is cut (the token sits at the cut).
            refused = await cm.run(f"return await tools.up.refuse({{form: {json.dumps(form)}}});")
            assert refused.diagnostic is not None
            assert_clean(json.dumps(refused.diagnostic.to_json(), ensure_ascii=False))


# -- a dying child's stderr ------------------------------------------------------------------
DYING = """
import os, sys
secret = os.environ["LEAKED"]
sys.stderr.write("x" * int(sys.argv[1]) + secret + "y" * int(sys.argv[2]) + "\\n")
sys.stderr.flush()
sys.exit(3)
"""

# Filler before and after the token: the old code cut the tail at 600 characters and the
# ring buffer at 8 KiB, so these put a cut through every part of the token.
CUTS = [(0, 0), (10, 590), (0, 580), (0, 590), (0, 599), (5, 600), (8 * 1024 - 10, 0)]
CUTS += [(8 * 1024 - 5, 30), (9000, 595), (20, 20)]


def _dying_spec(tmp_path: Path) -> Path:
    (tmp_path / "dying.py").write_text(DYING)
    lines = ['version = 1\nname = "dying"\n[policy]\ndefault = "allow"\n']
    for index, (before, after) in enumerate(CUTS):
        lines.append(
            f'[sources.d{index}]\ntype = "mcp"\ncommand = {json.dumps(sys.executable)}\n'
            f'args = [{json.dumps(str(tmp_path / "dying.py"))}, "{before}", "{after}"]\n'
            'env = { LEAKED = "${LEAK_TOKEN}" }\ntimeout_ms = 20000\n'
        )
    (tmp_path / "codemode.toml").write_text("\n".join(lines))
    return tmp_path / "codemode.toml"


async def test_stderr_never_reaches_the_model_and_is_scrubbed_before_cutting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = load_spec(_dying_spec(tmp_path))
    caplog.set_level("WARNING")
    async with CodeMode.from_spec(spec, environ={"LEAK_TOKEN": SECRET}) as cm:
        for index in range(len(CUTS)):
            result = await cm.run(f"return await tools.d{index}.anything({{}});")
            assert result.diagnostic is not None
            assert result.diagnostic.code == "SOURCE_UNAVAILABLE"
            message = result.diagnostic.message
            assert "xxx" not in message and "yyy" not in message, message  # no stderr at all
            assert_clean(json.dumps(result.diagnostic.to_json()))
        for health in cm.health:
            assert "xxx" not in health.message and "yyy" not in health.message
            assert_clean(json.dumps(health.to_json()))
            assert_clean(health.detail)
        details = [h.detail for h in cm.health]
        assert any("xxx" in d or "yyy" in d for d in details)  # the host still sees stderr
        assert any("***" in d for d in details)
    assert "correlation" in caplog.text
    assert_clean(caplog.text)


def test_check_shows_scrubbed_stderr(tmp_path: Path) -> None:
    config = _dying_spec(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "LEAK_TOKEN": SECRET},
    )
    output = result.stdout + result.stderr
    assert "stderr:" in output and "***" in output, output
    assert_clean(output)


# -- spec error excerpts ---------------------------------------------------------------------
MISSPELT = [
    'evn = {{ TOKEN = "{s}" }}',
    'header = "{s}"',
    'auths = {{ bearer = "{s}" }}',
    'headers_ = {{ Authorization = "Bearer {s}" }}',
    'envs = ["{s}"]',
    'token = "{s}"',
]


@pytest.mark.parametrize("line", MISSPELT)
def test_spec_errors_never_print_a_secret_under_a_misspelt_key(tmp_path: Path, line: str) -> None:
    literal = "Lit3ral-Secr3t-Value"
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "x"\n[policy]\ndefault = "allow"\n'
        f'[sources.a]\ntype = "mcp"\ncommand = "srv"\n{line.format(s=literal)}\n'
        f'[sourcs.b.env]\nTOKEN = "{literal}"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(tmp_path / "codemode.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "unknown key" in result.stderr
    assert_clean(result.stdout + result.stderr, literal)


#: Errors located inside a secret string that is not one closed line: a multi-line string
#: (the error on a later line of it) and a string left open.
INSIDE_SECRETS = {
    "headers, multi-line, bad escape": (
        '[sources.a.headers]\nAuthorization = """\nBearer {s}\\q\n"""\n'
    ),
    "headers, multi-line, bad key after": (
        '[sources.a.headers]\nAuthorization = """\nBearer {s}\n"""\n"bad key" = 1\n'
    ),
    "env, multi-line, bad escape": '[sources.a.env]\nTOKEN = """{s}\nmore-{s}\\q"""\n',
    "env, multi-line literal, bad key after": "[sources.a.env]\nTOKEN = '''{s}\n{s}'''\n8x = 1\n",
    "headers, unterminated": '[sources.a.headers]\nAuthorization = "{s}\n',
    "env, unterminated": '[sources.a.env]\nTOKEN = "{s}\n',
    "env inline, unterminated": '[sources.a]\nenv = {{ TOKEN = "{s}\n',
}


@pytest.mark.parametrize("tail", list(INSIDE_SECRETS.values()), ids=list(INSIDE_SECRETS))
def test_spec_errors_inside_a_secret_string_never_print_it(tmp_path: Path, tail: str) -> None:
    literal = "Lit3ral-Secr3t-Value"
    head = 'version = 1\nname = "x"\n[policy]\ndefault = "allow"\n'
    source = '[sources.a]\ntype = "mcp"\ncommand = "srv"\n'
    if tail.startswith("[sources.a]\n"):
        source = ""
        tail = tail.replace("[sources.a]\n", '[sources.a]\ntype = "mcp"\ncommand = "srv"\n', 1)
    (tmp_path / "codemode.toml").write_text(head + source + tail.format(s=literal))
    result = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(tmp_path / "codemode.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output
    assert_clean(output, literal)
    assert not re.search(r"\*\*\*[A-Za-z0-9]", output), output  # no last character kept


# -- OpenAPI error excerpts ------------------------------------------------------------------
class EchoingApi:
    """An API that echoes the credential it received inside an error page, after ``pad``
    characters of filler, in the requested encoding and media type."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        query = dict(parse_qsl(scope["query_string"].decode()))
        headers = dict((k.decode(), v.decode()) for k, v in scope["headers"])
        token = encodings(headers["x-api-key"])[query["form"]]
        pad = int(query["pad"])
        media = query["media"]
        if media == "application/json":
            body = json.dumps({"detail": "a" * pad + token}).encode()
        elif media == "text/html":
            body = ("<p>" + "a" * pad + token + "</p>" + "<i>x</i>" * 3000).encode()
        else:
            body = ("a" * pad + token + "b" * 20000).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 500,
                "headers": [(b"content-type", media.encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def api_key_document(paths: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI document of ``paths``, every operation behind an ``X-Api-Key`` header."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "echo", "version": "1"},
        "components": {
            "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}}
        },
        "security": [{"key": []}],
        "paths": paths,
    }


ERROR_DOCUMENT = api_key_document(
    {
        "/err": {
            "get": {
                "operationId": "fail",
                "parameters": [
                    {"name": n, "in": "query", "required": True, "schema": {"type": t}}
                    for n, t in (("pad", "integer"), ("form", "string"), ("media", "string"))
                ],
                "responses": {"200": {"description": "ok"}},
            }
        }
    }
)

BOUND = 16 * 1024


async def test_openapi_error_excerpts_are_scrubbed_before_cutting(tmp_path: Path) -> None:
    from tests.providers.openapi.server import ServerThread

    (tmp_path / "api.json").write_text(json.dumps(ERROR_DOCUMENT))
    with ServerThread(EchoingApi()) as api:  # type: ignore[arg-type]
        (tmp_path / "codemode.toml").write_text(
            'version = 1\nname = "x"\n[policy]\ndefault = "allow"\n'
            f'[sources.api]\ntype = "openapi"\ndocument = "api.json"\nbase_url = "{api.url}"\n'
            'auth = { api_key = "${API_KEY}" }\n'
        )
        spec = load_spec(tmp_path / "codemode.toml")
        cases = [
            (pad, form, media)
            for media in ("text/plain", "application/json", "text/html")
            for form in ("raw", "json", "url", "base64")
            for pad in (0, 400, BOUND - 18, BOUND - 3, BOUND - 30, BOUND - 12)
        ]
        async with CodeMode.from_spec(spec, environ={"API_KEY": SECRET}) as cm:
            for pad, form, media in cases:
                result = await cm.run(
                    f"return await tools.api.fail({{pad: {pad}, form: '{form}', media: '{media}'}});"
                )
                assert result.diagnostic is not None and result.diagnostic.code == "TOOL_ERROR"
                assert "HTTP 500" in result.diagnostic.message
                assert_clean(json.dumps(result.diagnostic.to_json(), ensure_ascii=False))
