"""A path parameter value never changes which path is requested.

Scripts run through ``CodeMode`` (spec, rules policy, sandbox) against a real HTTP server on
127.0.0.1 that records the raw request path. Every hostile value either reaches the
upstream inside its own segment of the templated path, or is refused before any request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from codemodekit import CodeMode, load_spec
from tests.providers.openapi.server import RecordingApp, ServerThread

DOCUMENT = {
    "openapi": "3.0.3",
    "info": {"title": "posts", "version": "1"},
    "paths": {
        "/posts/{postId}": {
            "delete": {
                "operationId": "deletePost",
                "parameters": [
                    {"name": "postId", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/posts/{postId}/comments/{commentId}": {
            "delete": {
                "operationId": "deleteComment",
                "parameters": [
                    {
                        "name": "postId",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "commentId",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/users/{id}": {
            "get": {
                "operationId": "getUser",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/files/{name}": {
            "get": {
                "operationId": "getFile",
                "parameters": [
                    {
                        "name": "name",
                        "in": "path",
                        "required": True,
                        "style": "label",
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {"200": {"description": "ok"}},
            }
        },
    },
}

SPEC = """
version = 1
name = "traversal"

[policy]
default = "deny"
rules = [
  {{ tools = "api.deleteComment", decision = "allow" }},
  {{ tools = "api.getUser", decision = "allow" }},
  {{ tools = "api.getFile", decision = "allow" }},
  {{ tools = "api.deletePost", decision = "deny" }},
]

[sources.api]
type = "openapi"
document = "api.json"
base_url = "{base}"
"""

HOSTILE = [
    "..",
    ".",
    "%2e%2e",
    "%2E%2E",
    "%252e%252e",
    "/",
    "../..",
    "..%2f..",
    "..%2F",
    "\\",
    "..\\",
    "..\\..",
    "?",
    "#",
    "?x=1",
    "#frag",
    "",
    " ",
    "\uff0e\uff0e",  # fullwidth full stops (NFKC: "..")
    "\u2025",  # two dot leader (NFKC: "..")
    "\u2024",  # one dot leader (NFKC: ".")
    "\u3002\u3002",  # ideographic full stops
    ".%00",
    "..;",
    ";..",
    "...",
    "a/../b",
    "%",
    "%%32%65",
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[ServerThread]:
    with ServerThread(RecordingApp()) as running:
        yield running


def _code_mode(tmp_path: Path, upstream: ServerThread) -> CodeMode:
    (tmp_path / "api.json").write_text(json.dumps(DOCUMENT))
    (tmp_path / "codemode.toml").write_text(SPEC.format(base=upstream.url + "/api"))
    return CodeMode.from_spec(load_spec(tmp_path / "codemode.toml"))


async def _call(cm: CodeMode, upstream: ServerThread, call: str) -> tuple[str | None, str | None]:
    """(raw path the upstream received or None, error code or None) for one tool call."""
    before = len(upstream.app.requests)
    result = await cm.run(f"return await {call};")
    received = upstream.app.requests[before:]
    assert len(received) <= 1
    code = None if result.ok else str(result.diagnostic.code)  # type: ignore[union-attr]
    return (received[0].raw_path if received else None), code


def _assert_templated(
    raw: str | None, code: str | None, prefix: str, value: str, suffix: str
) -> None:
    if raw is None:
        assert code == "TOOL_ERROR", code  # refused before sending, with a clear error
        return
    assert code is None
    assert raw.startswith(prefix) and raw.endswith(suffix), raw
    segment = raw[len(prefix) : len(raw) - len(suffix)]
    # Exactly one segment, which decodes back to the value the script passed.
    assert segment and "/" not in segment, raw
    assert unquote(segment) == value, (raw, value)


async def test_hostile_values_stay_inside_their_segment(
    tmp_path: Path, upstream: ServerThread
) -> None:
    async with _code_mode(tmp_path, upstream) as cm:
        for value in HOSTILE:
            arg = json.dumps(value)
            raw, code = await _call(
                cm, upstream, f"tools.api.deleteComment({{postId: '42', commentId: {arg}}})"
            )
            _assert_templated(raw, code, "/api/posts/42/comments/", value, "")
            raw, code = await _call(cm, upstream, f"tools.api.getUser({{id: {arg}}})")
            _assert_templated(raw, code, "/api/users/", value, "")
            raw, code = await _call(
                cm, upstream, f"tools.api.deleteComment({{postId: {arg}, commentId: '7'}})"
            )
            _assert_templated(raw, code, "/api/posts/", value, "/comments/7")


async def test_dot_values_are_refused_not_sent(tmp_path: Path, upstream: ServerThread) -> None:
    async with _code_mode(tmp_path, upstream) as cm:
        for value in ("..", ".", "%2e%2e", "\uff0e\uff0e", "..\\", "", "a/../b"):
            arg = json.dumps(value)
            result = await cm.run(
                f"try {{ await tools.api.deleteComment({{postId: '42', commentId: {arg}}}); }}"
                " catch (e) { return [e.code, e.message]; }"
            )
            assert result.ok, result.diagnostic
            code, message = result.value
            assert code == "TOOL_ERROR"
            assert "would change which path is requested" in message
        # The denied operation stays denied, and a label-style value cannot form "..".
        denied = await cm.run("return await tools.api.deletePost({postId: '42'});")
        assert denied.diagnostic is not None and denied.diagnostic.code == "TOOL_DENIED"
        raw, code = await _call(cm, upstream, "tools.api.getFile({name: '.'})")
        assert raw is None and code == "TOOL_ERROR"
        raw, code = await _call(cm, upstream, "tools.api.getFile({name: 'report'})")
        assert raw == "/api/files/.report" and code is None
    assert not any(
        r.raw_path.rstrip("/") in ("/api/posts/42", "/api", "") for r in upstream.app.requests
    )
