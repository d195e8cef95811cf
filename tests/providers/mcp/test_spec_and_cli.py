"""MCP sources declared in codemode.toml: CodeMode.from_spec and `codemode check`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codemodekit import CodeMode, load_spec
from codemodekit.providers.base import HealthStatus
from tests.servers import SERVER_SCRIPT


def write_spec(folder: Path, extra: str = "") -> Path:
    spec = folder / "codemode.toml"
    spec.write_text(
        "version = 1\n"
        'name = "mcp-spec-test"\n'
        "[policy]\n"
        'default = "allow"\n'
        "[sources.up]\n"
        'type = "mcp"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER_SCRIPT))}]\n"
        'env = { UPSTREAM_TOKEN = "${CM_SPEC_TOKEN}" }\n'
        'cwd = "work"\n' + extra
    )
    (folder / "work").mkdir(exist_ok=True)
    return spec


async def test_from_spec_runs_typescript_against_an_mcp_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CM_SPEC_TOKEN", "tok-123456")
    spec = load_spec(write_spec(tmp_path))
    async with CodeMode.from_spec(spec) as cm:
        result = await cm.run(
            "const env = await tools.up.secret_env({ name: 'UPSTREAM_TOKEN' });\n"
            "const sum = await tools.up.add({ a: 1, b: 2 });\n"
            "const cwd = await tools.up.cwd({});\n"
            "return [env.structuredContent.result, sum.structuredContent.total,\n"
            "        cwd.structuredContent.result];"
        )
        assert result.ok, result.diagnostic
        assert result.value[:2] == [True, 3]
        # `cwd` is resolved against the spec file's folder.
        assert Path(result.value[2]) == (tmp_path / "work").resolve()
        assert "tok-123456" not in json.dumps([h.to_json() for h in cm.health])


async def test_unset_secret_leaves_the_source_unavailable_with_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CM_SPEC_TOKEN", raising=False)
    spec = load_spec(write_spec(tmp_path))
    async with CodeMode.from_spec(spec) as cm:
        (health,) = cm.health
        assert health.status == HealthStatus.UNAVAILABLE
        assert "CM_SPEC_TOKEN" in health.message
        result = await cm.run("return await tools.up.echo({ text: 'x' });")
        assert result.diagnostic is not None and result.diagnostic.code == "SOURCE_UNAVAILABLE"


def test_codemode_check_reports_a_dead_mcp_source(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        '[sources.dead]\ntype = "mcp"\ncommand = "/nonexistent/mcp-server"\ntimeout_ms = 3000\n',
    )
    env = {"CM_SPEC_TOKEN": "tok-abcdef", "PATH": "/usr/bin:/bin"}
    completed = subprocess.run(
        [sys.executable, "-m", "codemodekit", "check", "-c", str(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output
    assert "dead" in output and "unavailable" in output
    assert "up" in output
    assert "tok-abcdef" not in output
