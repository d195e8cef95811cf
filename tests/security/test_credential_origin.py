"""A credential goes only to an origin ``codemode.toml`` names (issue 23, item 3).

The OpenAPI document is input (SECURITY.md): its ``servers`` (top level, path item or
operation) must never decide where ``auth`` is sent. A source with ``auth`` and no
``base_url`` is a spec error at its line; with ``base_url``, a real server the document
names receives nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from codemodekit import CodeMode, SpecError, load_spec
from codemodekit.cli import main

TOKEN = "credential-origin-token-1234"
AUTH_FORMS = {
    "bearer inline": 'auth = { bearer = "${ORIGIN_TOKEN}" }\n',
    "api_key inline": 'auth = { api_key = "${ORIGIN_TOKEN}" }\n',
    "basic inline": 'auth = { username = "u", password = "${ORIGIN_TOKEN}" }\n',
    "bearer table": '[sources.api.auth]\nbearer = "${ORIGIN_TOKEN}"\n',
    "literal bearer": 'auth = { bearer = "not-a-variable" }\n',
}


def _document(servers: str) -> dict[str, object]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": servers}],
        "components": {
            "securitySchemes": {
                "b": {"type": "http", "scheme": "bearer"},
                "k": {"type": "apiKey", "in": "header", "name": "X-Key"},
                "basic": {"type": "http", "scheme": "basic"},
            }
        },
        "security": [{"b": []}, {"k": []}, {"basic": []}, {}],  # {}: may go without
        "paths": {
            "/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}},
            "/elsewhere": {
                "servers": [{"url": servers}],
                "get": {
                    "operationId": "elsewhere",
                    "servers": [{"url": servers}],
                    "responses": {"200": {"description": "ok"}},
                },
            },
        },
    }


class _Recorder(ThreadingHTTPServer):
    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert isinstance(self.server, _Recorder)
        self.server.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[_Recorder, _Recorder]]:
    legit, attacker = _Recorder(), _Recorder()
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (legit, attacker)]
    for thread in threads:
        thread.start()
    yield legit, attacker
    for server in (legit, attacker):
        server.shutdown()
        server.server_close()


def _spec(tmp_path: Path, auth: str, base_url: str | None, document_server: str) -> Path:
    (tmp_path / "api.json").write_text(json.dumps(_document(document_server)))
    config = tmp_path / "codemode.toml"
    head = 'version = 1\nname = "x"\n[policy]\ndefault = "allow"\n'
    source = '[sources.api]\ntype = "openapi"\ndocument = "api.json"\n'
    if base_url is not None:
        source += f'base_url = "{base_url}"\n'
    config.write_text(head + source + auth)
    return config


@pytest.mark.parametrize("form", list(AUTH_FORMS))
def test_auth_without_base_url_is_a_spec_error_at_its_line(
    form: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ORIGIN_TOKEN", TOKEN)
    config = _spec(tmp_path, AUTH_FORMS[form], None, "http://attacker.example")
    line = config.read_text().splitlines().index(AUTH_FORMS[form].splitlines()[0]) + 1
    with pytest.raises(SpecError) as caught:
        load_spec(config)
    assert "needs `base_url`" in str(caught.value)
    assert caught.value.line == line
    (tmp_path / "one.ts").write_text("return 1;")
    for command in (["check", "--offline"], ["run", str(tmp_path / "one.ts")], ["lock"]):
        capsys.readouterr()
        assert main([*command, "-c", str(config)]) == 2, command
        err = capsys.readouterr().err
        assert f"codemode.toml:{line}:" in err and "needs `base_url`" in err
        assert TOKEN not in err


async def test_the_credential_reaches_only_base_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, servers: tuple[_Recorder, _Recorder]
) -> None:
    legit, attacker = servers
    monkeypatch.setenv("ORIGIN_TOKEN", TOKEN)
    config = _spec(tmp_path, AUTH_FORMS["bearer inline"], legit.url, attacker.url)
    async with CodeMode.from_spec(load_spec(config)) as cm:
        result = await cm.run(
            "const a = await tools.api.ping({});\n"
            "let b = null; try { b = await tools.api.elsewhere({}); } catch (e) { b = e.code; }\n"
            "return [a.ok, b];"
        )
    assert result.ok, result.diagnostic
    assert attacker.seen == []
    assert legit.seen and all(h.get("authorization") == f"Bearer {TOKEN}" for h in legit.seen)


async def test_without_auth_the_document_may_still_choose_its_server(
    tmp_path: Path, servers: tuple[_Recorder, _Recorder]
) -> None:
    legit, _ = servers
    config = _spec(tmp_path, "", None, legit.url)
    async with CodeMode.from_spec(load_spec(config)) as cm:
        result = await cm.run("await tools.api.ping({}); return true;")
    assert result.ok and result.value is True, result.diagnostic
    assert legit.seen and "authorization" not in legit.seen[0]
