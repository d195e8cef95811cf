"""`codemode install`: the client entry uses absolute paths, passes the spec's ${VAR}s, and
a real MCP client started from it (elsewhere than the project) can run code."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from codemodekit.cli import main
from codemodekit.cli.cmd_install import serve_command

TOOLS = """
from codemodekit import tool

@tool
def whoami() -> dict:
    \"\"\"Which token the source sees (its length only).\"\"\"
    import os
    return {"length": len(os.environ.get("INSTALL_TEST_TOKEN", ""))}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    root = tmp_path / "proj"
    root.mkdir()
    (root / "install_tools.py").write_text(TOOLS, encoding="utf-8")
    (root / "codemode.toml").write_text(
        'version = 1\nname = "my tools"\n[policy]\ndefault = "allow"\n'
        '[sources.app]\ntype = "python"\nmodule = "install_tools"\n'
        '[sources.remote]\ntype = "mcp"\nurl = "http://127.0.0.1:9/mcp"\n'
        'headers = { Authorization = "Bearer ${INSTALL_TEST_TOKEN}" }\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(root)
    return root


def test_claude_code_gets_a_project_mcp_json_with_variables(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".mcp.json").write_text('{"mcpServers": {"other": {"command": "x"}}}\n')
    assert main(["install", "claude-code"]) == 0
    out = capsys.readouterr().out
    assert out == f"added server 'my-tools' in {project / '.mcp.json'}\n"
    document = json.loads((project / ".mcp.json").read_text(encoding="utf-8"))
    assert document["mcpServers"]["other"] == {"command": "x"}  # kept
    entry = document["mcpServers"]["my-tools"]
    assert entry["type"] == "stdio"
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][-3:] == ["serve", "-c", str(project / "codemode.toml")]
    assert entry["env"] == {"INSTALL_TEST_TOKEN": "${INSTALL_TEST_TOKEN}"}
    assert main(["install", "claude-code"]) == 0
    assert "updated server 'my-tools'" in capsys.readouterr().out


def test_cursor_and_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install", "cursor"]) == 0
    cursor = json.loads((project / ".cursor" / "mcp.json").read_text(encoding="utf-8"))
    assert cursor["mcpServers"]["my-tools"]["env"] == {
        "INSTALL_TEST_TOKEN": "${env:INSTALL_TEST_TOKEN}"
    }
    capsys.readouterr()
    assert main(["install", "json", "--name", "x"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed["mcpServers"]) == ["x"]


def test_claude_desktop_copies_values_only_when_asked(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("APPDATA", str(tmp_path / "appdata"))
    monkeypatch.setenv("INSTALL_TEST_TOKEN", "tok-123")
    assert main(["install", "claude-desktop", "--print"]) == 0
    out, err = capsys.readouterr()
    assert "env" not in json.loads(out)["mcpServers"]["my-tools"]
    assert "Claude Desktop does not expand variables: re-run with --copy-env" in err
    assert main(["install", "claude-desktop", "--copy-env"]) == 0
    out, err = capsys.readouterr()
    written = Path(out.split(" in ", 1)[1].strip())
    assert written.name == "claude_desktop_config.json" and written.is_file()
    entry = json.loads(written.read_text(encoding="utf-8"))["mcpServers"]["my-tools"]
    assert entry["env"] == {"INSTALL_TEST_TOKEN": "tok-123"}
    assert "holds the values of INSTALL_TEST_TOKEN in plain text" in err
    if os.name == "posix":
        assert written.stat().st_mode & 0o077 == 0


async def test_a_real_client_runs_code_through_the_installed_entry(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["install", "json"]) == 0
    entry = json.loads(capsys.readouterr().out)["mcpServers"]["my-tools"]
    # What a client does: expand ${VAR} from its environment, start the command elsewhere.
    env = {k: os.path.expandvars(v) for k, v in entry.get("env", {}).items()}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**env, "INSTALL_TEST_TOKEN": "abcd"},
        cwd=str(elsewhere),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "run_typescript" in names
        ran = await client.call_tool(
            "run_typescript",
            {"code": "return (await tools.app.whoami({})).structuredContent;"},
        )
    assert ran.is_error is False
    assert ran.structured_content is not None
    assert ran.structured_content["value"] == {"length": 4}


async def test_the_plugin_mcp_json_works_from_any_folder_of_the_project(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", "--plugin", str(project / "plugin"), "--allow-unavailable"]
    assert await asyncio.to_thread(main, argv) == 0  # `remote` is down: its tools drop out
    capsys.readouterr()
    servers = json.loads((project / "plugin" / "mcp.json").read_text(encoding="utf-8"))
    [entry] = servers["mcpServers"].values()
    # What `codemode install` writes (issue 20 item 15): an absolute command and config.
    command, prefix = serve_command()
    assert entry["command"] == command
    assert entry["args"] == [*prefix, "serve", "-c", str((project / "codemode.toml").resolve())]
    nested = project / "src" / "deep"
    nested.mkdir(parents=True)
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], cwd=str(nested), env={}
    )
    async with Client(params, read_timeout_seconds=60) as client:
        ran = await client.call_tool("run_typescript", {"code": "return 6 * 7;"})
    assert ran.is_error is False
    assert ran.structured_content is not None and ran.structured_content["value"] == 42
