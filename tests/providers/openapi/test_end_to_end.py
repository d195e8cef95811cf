"""TypeScript in the sandbox calling an OpenAPI source served on 127.0.0.1."""

from __future__ import annotations

import shutil
from pathlib import Path

from codemodekit import CodeMode, ErrorCode, Limits, allow_all_tool_calls, load_spec
from tests.providers.openapi.conftest import FIXTURES, make_provider
from tests.providers.openapi.server import ServerThread


async def test_typescript_calls_the_api(server: ServerThread) -> None:
    provider = make_provider("wire.yaml", base_url=server.url + "/api", name="wire")
    async with CodeMode(
        sources=[provider], policy=allow_all_tool_calls(), limits=Limits(tool_result_bytes=50_000)
    ) as cm:
        assert cm.catalog.get("wire", "queryForm") is not None
        ok = await cm.run(
            "const r = await tools.wire.queryForm({ arrx: ['a', 'b'], flag: false });\n"
            "const c = await tools.wire.collide({ id: 'x', requestBody: { R: 1 } });\n"
            "return [r.structuredContent.query, c.structuredContent.body];"
        )
        assert ok.ok, ok.diagnostic
        assert ok.value == ["flag=false&arrx=a&arrx=b", '{"R":1}']

        caught = await cm.run(
            "try { await tools.wire.status({ code: 404 }); }\n"
            "catch (e) { return [e.code, e.message.slice(0, 40)]; }"
        )
        assert caught.ok, caught.diagnostic
        assert caught.value == ["TOOL_ERROR", "GET /status/{code} failed: HTTP 404 Not "]

        invalid = await cm.run("return await tools.wire.status({ code: 'x' });")
        assert invalid.diagnostic is not None
        assert invalid.diagnostic.code == ErrorCode.TOOL_INPUT_INVALID

        huge = await cm.run("return await tools.wire.huge({});")
        assert huge.diagnostic is not None
        assert huge.diagnostic.code == ErrorCode.TOOL_RESULT_TOO_LARGE

        files = cm.generate()
        generated = "\n".join(files.values())
        assert "queryForm" in generated


async def test_from_spec_with_secrets(server: ServerThread, tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "secure.yaml", tmp_path / "secure.yaml")
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "t"\n[policy]\ndefault = "allow"\n'
        "[sources.sec]\n"
        'type = "openapi"\n'
        'document = "secure.yaml"\n'
        f'base_url = "{server.url}"\n'
        'auth = { api_key = "${E2E_KEY}" }\n'
    )
    spec = load_spec(tmp_path / "codemode.toml")
    async with CodeMode.from_spec(spec, environ={"E2E_KEY": "e2e-secret-value"}) as cm:
        result = await cm.run(
            "const r = await tools.sec.headerKey({}); return r.structuredContent.headers;"
        )
        assert result.ok, result.diagnostic
        assert result.value["x-api-key"] == "***"  # sent, but never visible to the sandbox
        assert server.app.last.header("x-api-key") == "e2e-secret-value"
        skipped = {s.name for s in cm.catalog.skipped}
        assert "mtls" in skipped and "bearer" not in skipped
        denied = await cm.run("return await tools.sec.bearer({});")
        assert denied.diagnostic is not None and denied.diagnostic.code == "TOOL_ERROR"
        assert "needs auth.bearer" in denied.diagnostic.message
        assert "e2e-secret-value" not in repr(cm.health) + "".join(cm.generate().values())
