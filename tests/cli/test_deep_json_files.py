"""Every JSON file the CLI reads, nested deeper than a parser recurses, is a clear error.

``json.loads`` raises ``RecursionError`` (not ``ValueError``) past Python's recursion
limit. A committed client config, an installed plugin's files or the generated manifest
holding such a document ended the command in a traceback (found by a review helper for
``codemode install``; the others are its neighbours).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import codemode_cli
from tests.providers.plugin.test_plugin_source import MCP_SCHEMA, PLUGIN_SCHEMA

DEEP = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
PLUGIN = "vendor/team-tools"


def _plugin_project(project: Path) -> None:
    root = project / PLUGIN
    root.mkdir(parents=True)
    (root / "plugin.json").write_text(
        json.dumps({"$schema": PLUGIN_SCHEMA, "name": "team-tools", "version": "1.0.0"})
    )
    (root / "mcp.json").write_text(json.dumps({"$schema": MCP_SCHEMA, "mcpServers": {}}))
    (project / "codemode.toml").write_text(
        'version = 1\nname = "host"\n[policy]\ndefault = "allow"\n'
        f'[sources.team]\ntype = "plugin"\npath = "{PLUGIN}"\n'
    )


CASES = {
    "install claude-code: .mcp.json": (".mcp.json", ("install", "claude-code"), None),
    "install cursor: .cursor/mcp.json": (".cursor/mcp.json", ("install", "cursor"), None),
    "plugin.json": (f"{PLUGIN}/plugin.json", ("check",), _plugin_project),
    "plugin mcp.json": (f"{PLUGIN}/mcp.json", ("check",), _plugin_project),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_deep_json_file_is_a_clear_error(tmp_path: Path, case: str) -> None:
    relative, command, setup = CASES[case]
    if setup is None:
        assert codemode_cli(tmp_path, "init", ".").returncode == 0
    else:
        setup(tmp_path)
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(DEEP)
    done = codemode_cli(tmp_path, *command)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode != 0
    assert Path(relative).name in done.stderr + done.stdout


def test_a_deep_generated_manifest_is_taken_as_no_manifest(tmp_path: Path) -> None:
    assert codemode_cli(tmp_path, "init", ".").returncode == 0
    assert codemode_cli(tmp_path, "generate").returncode == 0
    (tmp_path / "codemode" / "catalog.json").write_text(DEEP)
    done = codemode_cli(tmp_path, "generate")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "codemode" / "catalog.json").read_text())  # written anew
