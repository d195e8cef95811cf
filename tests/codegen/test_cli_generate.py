"""``codemode generate`` through the CLI entry point, on real sources."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from codemodekit.cli import main
from codemodekit.codegen import BLOCK_BEGIN, skill_dir

SERVER = Path(__file__).parents[1] / "servers" / "mcp_test_server.py"


def _project(tmp_path: Path, description: str = "Look up a record") -> tuple[Path, str]:
    """A codemode.toml with a Python source (module name unique per test: imports are cached)."""
    module = f"cm_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "from codemodekit import define_tool\n"
        "lookup = define_tool(\n"
        f"    description={description!r},\n"
        "    input_schema={'type': 'object', 'properties': {'id': {'type': 'string'}},\n"
        "                  'required': ['id'], 'additionalProperties': False},\n"
        "    execute=lambda args: {'id': args['id']},\n"
        ")\n"
    )
    config = tmp_path / "codemode.toml"
    config.write_text(
        'version = 1\nname = "demo"\n[policy]\ndefault = "deny"\n'
        f'[sources.app]\ntype = "python"\nmodule = "{module}"\n'
    )
    return config, module


def _retarget(tmp_path: Path, module: str, description: str) -> None:
    """Change the tool under the same module name (a new module file, imported fresh)."""
    new = f"cm_tools_{uuid.uuid4().hex[:8]}"
    text = (tmp_path / f"{module}.py").read_text()
    (tmp_path / f"{new}.py").write_text(text.replace("Look up a record", description))
    config = tmp_path / "codemode.toml"
    config.write_text(config.read_text().replace(module, new))


def _mtimes(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()
    }


def test_generate_writes_next_to_the_config_and_a_rerun_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _ = _project(tmp_path)
    assert main(["generate", "-c", str(config)]) == 0
    out = tmp_path / "codemode"
    assert sorted(p.name for p in out.iterdir()) == [
        "catalog.json",
        "globals.d.ts",
        "tools.app.d.ts",
        "tools.d.ts",
        "tsconfig.json",
    ]
    assert (
        "lookup: (input: AppLookupInput) => Promise<ToolResult<unknown>>"
        in (out / "tools.d.ts").read_text()
    )
    for path in out.iterdir():
        os.utime(path, ns=(10**9, 10**9))
    before = _mtimes(out)
    capsys.readouterr()
    assert main(["generate", "-c", str(config)]) == 0
    assert _mtimes(out) == before
    assert "0 written, 0 removed, 5 unchanged" in capsys.readouterr().err


def test_check_reports_drift_as_a_diff_and_exit_1_without_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, module = _project(tmp_path)
    out = tmp_path / "gen"
    assert main(["generate", "-c", str(config), "--out", str(out)]) == 0
    assert main(["generate", "-c", str(config), "--out", str(out), "--check"]) == 0
    assert "up to date" in capsys.readouterr().err

    _retarget(tmp_path, module, "Fetch a record by id")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["generate", "-c", str(config), "--out", str(out), "--check"]) == 1
    captured = capsys.readouterr()
    assert "-/** Look up a record */" in captured.out.replace("    ", "")
    assert "+/** Fetch a record by id */" in captured.out.replace("    ", "")
    assert "out of date" in captured.err and "codemode generate" in captured.err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before

    (out / "tools.app.d.ts").unlink()
    assert main(["generate", "-c", str(config), "--out", str(out)]) == 0
    assert main(["generate", "-c", str(config), "--out", str(out), "--check"]) == 0


def test_check_reports_a_removed_source_file_as_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _ = _project(tmp_path)
    assert main(["generate", "-c", str(config)]) == 0
    (tmp_path / "codemode" / "tools.app.d.ts").unlink()
    assert main(["generate", "-c", str(config), "--check"]) == 1
    assert "+++ " in capsys.readouterr().out


def test_plugin_regeneration_keeps_authored_skill_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, module = _project(tmp_path)
    plugin = tmp_path / "plugin"
    assert main(["generate", "-c", str(config), "--plugin", str(plugin)]) == 0
    mcp = json.loads((plugin / "mcp.json").read_text())
    capsys.readouterr()
    assert main(["install", "json", "-c", str(config), "--print"]) == 0
    installed = json.loads(capsys.readouterr().out)["mcpServers"]["demo"]
    # What `codemode install` writes: an absolute command and `-c /abs/codemode.toml`.
    assert mcp == {
        "$schema": "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json",
        "mcpServers": {"demo": installed},
    }
    assert Path(installed["command"]).is_absolute()
    assert installed["args"][-3:] == ["serve", "-c", str(config.resolve())]
    skill = plugin / skill_dir("demo") / "SKILL.md"
    skill.write_text(skill.read_text() + "\n## Workflow (authored)\n\nAsk before deleting.\n")

    _retarget(tmp_path, module, "Fetch a record by id")
    assert main(["generate", "-c", str(config), "--plugin", str(plugin), "--check"]) == 1
    assert main(["generate", "-c", str(config), "--plugin", str(plugin)]) == 0
    text = skill.read_text()
    assert text.endswith("## Workflow (authored)\n\nAsk before deleting.\n")
    assert "Fetch a record by id" in text and text.count(BLOCK_BEGIN) == 1
    assert main(["generate", "-c", str(config), "--plugin", str(plugin), "--check"]) == 0


def test_an_authored_file_in_the_way_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _ = _project(tmp_path)
    out = tmp_path / "codemode"
    out.mkdir()
    (out / "tools.d.ts").write_text("// mine\n")
    assert main(["generate", "-c", str(config)]) == 2
    assert "not generated by codemode" in capsys.readouterr().err
    assert (out / "tools.d.ts").read_text() == "// mine\n"


def test_spec_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "codemode.toml"
    config.write_text('version = 1\nname = "x"\n')
    assert main(["generate", "-c", str(config)]) == 2
    assert "codemode.toml" in capsys.readouterr().err
    assert not (tmp_path / "codemode").exists()


def test_an_unavailable_source_aborts_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _ = _project(tmp_path)
    config.write_text(
        config.read_text() + '[sources.gone]\ntype = "python"\nmodule = "no_such_module_xyz"\n'
    )
    assert main(["generate", "-c", str(config)]) == 2
    err = capsys.readouterr().err
    assert "gone" in err and "--allow-unavailable" in err
    assert not (tmp_path / "codemode").exists()
    assert main(["generate", "-c", str(config), "--allow-unavailable"]) == 0
    lock = json.loads((tmp_path / "codemode" / "catalog.json").read_text())
    assert lock["sources"]["gone"]["tools"] == {}


def test_secrets_in_source_env_never_reach_generated_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-live-" + uuid.uuid4().hex
    monkeypatch.setenv("CM_TEST_TOKEN", secret)
    config = tmp_path / "codemode.toml"
    config.write_text(
        'version = 1\nname = "secretive"\n[policy]\ndefault = "deny"\n'
        '[sources.srv]\ntype = "mcp"\n'
        f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}]\n"
        'env = { API_TOKEN = "${CM_TEST_TOKEN}", LITERAL = "' + secret + '-literal" }\n'
    )
    plugin = tmp_path / "plugin"
    assert main(["generate", "-c", str(config), "--plugin", str(plugin)]) == 0
    captured = capsys.readouterr()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".toml"]
    assert any(p.name == "tools.srv.d.ts" for p in written)
    assert "secret_env" in (tmp_path / "codemode" / "tools.d.ts").read_text()
    for path in written:
        assert secret not in path.read_text(errors="replace"), path
    assert secret not in captured.out + captured.err


def test_a_failed_write_exits_1_and_keeps_the_previous_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from codemodekit.codegen import writer

    config, module = _project(tmp_path)
    assert main(["generate", "-c", str(config)]) == 0
    out = tmp_path / "codemode"
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _retarget(tmp_path, module, "Fetch a record by id")
    real = os.replace
    calls = {"n": 0}

    def failing(src: object, dst: object) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(5, "Input/output error")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(writer.os, "replace", failing)
    assert main(["generate", "-c", str(config)]) == 1
    assert "previous files were restored" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
