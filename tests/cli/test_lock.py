"""`codemode lock`, offline `generate` / `generate --check`, and drift in `codemode check`.

A real stdio MCP server (tests/servers/mcp_test_server.py, copied into the project so the
test can take it away) and a real OpenAPI document whose `auth` needs a variable that CI
does not have.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from codemodekit.cli import main
from tests.providers.openapi.conftest import FIXTURES
from tests.servers import SERVER_SCRIPT

SECRET = "lock-test-secret-value"


def make_project(root: Path) -> Path:
    shutil.copy(SERVER_SCRIPT, root / "server.py")
    shutil.copy(FIXTURES / "secure.yaml", root / "secure.yaml")
    config = root / "codemode.toml"
    config.write_text(
        'version = 1\nname = "locked"\n[policy]\ndefault = "allow"\n'
        "[sources.up]\n"
        'type = "mcp"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f'args = ["{root / "server.py"}"]\n'
        "env = { UPSTREAM_TOKEN = '${LOCK_TEST_TOKEN}', "
        "CODEMODE_TEST_SERVER_VARIANT = '${LOCK_TEST_VARIANT}' }\n"
        "[sources.api]\n"
        'type = "openapi"\n'
        'document = "secure.yaml"\n'
        'base_url = "http://127.0.0.1:9"\n'
        'auth = { bearer = "${LOCK_TEST_BEARER}" }\n',
        encoding="utf-8",
    )
    return config


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.delenv("LOCK_TEST_BEARER", raising=False)
    monkeypatch.setenv("LOCK_TEST_TOKEN", SECRET)
    monkeypatch.setenv("LOCK_TEST_VARIANT", "v1")
    monkeypatch.chdir(tmp_path)
    return make_project(tmp_path)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_works_offline_from_the_lock(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "lock")
    assert code == 0, err
    lock = project.parent / "codemode.lock.json"
    text = lock.read_text(encoding="utf-8")
    assert SECRET not in text
    document = json.loads(text)
    assert {t["name"] for t in document["sources"]["up"]["tools"]} >= {"echo", "pid", "add"}
    assert document["sources"]["up"]["reached_by"]["kind"] == "mcp"
    # Every OpenAPI operation is listed although no credential is set.
    assert "bearer" in {t["name"] for t in document["sources"]["api"]["tools"]}
    assert "codemode.lock.json: unchanged (" in cli(capsys, "lock")[2]

    # CI: no secret, and no server (any attempt to start it would fail).
    monkeypatch.delenv("LOCK_TEST_TOKEN")
    monkeypatch.delenv("LOCK_TEST_VARIANT")
    (project.parent / "server.py").unlink()
    code, _, err = cli(capsys, "generate")
    assert code == 0, err
    declarations = (project.parent / "codemode" / "tools.d.ts").read_text(encoding="utf-8")
    assert "echo" in declarations or "up" in declarations
    code, _, err = cli(capsys, "generate", "--check")
    assert code == 0, err
    assert "up to date" in err
    assert lock.read_text(encoding="utf-8") == text  # generate did not rewrite it


def test_check_mode_reports_a_missing_or_stale_lock(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "generate", "--check")
    assert code == 1
    assert "codemode.lock.json does not exist yet" in err
    assert cli(capsys, "generate")[0] == 0  # no lock yet: generate connects and writes it
    assert (project.parent / "codemode.lock.json").is_file()
    assert cli(capsys, "generate", "--check")[0] == 0

    # The source is now reached differently: its locked entry no longer stands for it.
    config = project.read_text(encoding="utf-8")
    project.write_text(config.replace('server.py"]', 'server.py", "--page-size", "2"]'))
    code, _, err = cli(capsys, "generate", "--check")
    assert code == 1
    assert "up: its configuration changed since the lock was written" in err
    assert "codemode lock" in err


def test_drift_of_a_live_source_is_reported(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "lock")[0] == 0
    monkeypatch.setenv("LOCK_TEST_VARIANT", "v2")  # the server's next release
    code, _, err = cli(capsys, "check")
    assert code == 0, err
    assert (
        "warning: up differs from codemode.lock.json: 1 added (ping); 1 removed (pid); "
        "1 changed (echo); run `codemode lock` and `codemode generate`"
    ) in err

    code, _, err = cli(capsys, "lock", "--check")
    assert code == 1
    assert "up: 1 added (ping); 1 removed (pid); 1 changed (echo)" in err
    code, _, err = cli(capsys, "lock")
    assert code == 0, err
    assert cli(capsys, "lock", "--check")[0] == 0
    assert "ping" in (project.parent / "codemode.lock.json").read_text(encoding="utf-8")


def test_a_source_that_cannot_be_reached_leaves_the_lock_alone(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "lock")[0] == 0
    lock = project.parent / "codemode.lock.json"
    before = lock.read_text(encoding="utf-8")
    (project.parent / "server.py").write_text("raise SystemExit(3)\n", encoding="utf-8")
    code, _, err = cli(capsys, "lock")
    assert code == 2
    assert "cannot reach source(s):\n  up:" in err
    assert lock.read_text(encoding="utf-8") == before
    code, _, err = cli(capsys, "lock", "--allow-unavailable")
    assert code == 0, err
    assert lock.read_text(encoding="utf-8") == before  # the down source kept its entry


# Each setting that changes which server or module a source reaches, beside one that does
# not: a change of the first kind leaves its locked entry stale (`cwd` and a python
# source's `path` did not, found by a review helper).
REACH_CHANGES = {
    "stdio cwd set": ("", 'cwd = "one"\n'),
    "stdio cwd moved": ('cwd = "one"\n', 'cwd = "two"\n'),
    "stdio args": ("", ""),  # the args change below, the baseline of the family
}


@pytest.mark.parametrize("change", list(REACH_CHANGES), ids=list(REACH_CHANGES))
def test_a_change_of_where_a_stdio_server_runs_makes_its_entry_stale(
    project: Path, capsys: pytest.CaptureFixture[str], change: str
) -> None:
    before, after = REACH_CHANGES[change]
    for folder in ("one", "two"):
        (project.parent / folder).mkdir(exist_ok=True)
    config = project.read_text(encoding="utf-8")
    up_line = f'args = ["{project.parent / "server.py"}"]\n'
    project.write_text(config.replace(up_line, up_line + before), encoding="utf-8")
    assert cli(capsys, "generate")[0] == 0
    assert cli(capsys, "generate", "--check")[0] == 0
    changed = config.replace(up_line, up_line + after)
    if change == "stdio args":
        changed = changed.replace('server.py"]', 'server.py", "--page-size", "2"]')
    project.write_text(changed, encoding="utf-8")
    code, _, err = cli(capsys, "generate", "--check")
    assert code == 1, err
    assert "up: its configuration changed since the lock was written" in err


@pytest.mark.parametrize("moved", [False, True], ids=["same path", "path moved"])
def test_a_python_source_is_stale_when_its_module_path_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], moved: bool
) -> None:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    module = f"cm_lock_path_{tmp_path.name.replace('-', '_')}"
    for folder, text in (("one", "first"), ("two", "second")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{module}.py").write_text(
            "from codemodekit import define_tool\n"
            f"t = define_tool(description={text!r}, input_schema={{'type': 'object'}},"
            " execute=lambda a: 1)\n",
            encoding="utf-8",
        )
    config = tmp_path / "codemode.toml"
    body = (
        'version = 1\nname = "n"\n[policy]\ndefault = "allow"\n'
        f'[sources.app]\ntype = "python"\nmodule = "{module}"\npath = ["FOLDER"]\n'
    )
    config.write_text(body.replace("FOLDER", "one"), encoding="utf-8")
    assert cli(capsys, "generate")[0] == 0
    config.write_text(body.replace("FOLDER", "two" if moved else "one"), encoding="utf-8")
    code, _, err = cli(capsys, "generate", "--check")
    assert code == (1 if moved else 0), err
