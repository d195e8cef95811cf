"""Every file codemode writes next to a user's file refuses planted links (issue 23, item 2).

A repository the user cloned may commit a symbolic link at the name a writer uses (the
target, its old fixed temporary name, a folder on the way) pointing at any file of the
user's. Every writer (install for each client, lock, generate's lock, init) is run with
each placement; the file the link points at must stay as it was, and a secret-holding
file must be created ``0600`` from the start (item 10).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codemodekit.cli import main
from codemodekit.safe_write import UnsafeTarget, write_file

pytestmark = pytest.mark.skipif(os.name != "posix", reason="symbolic links and modes")

TOOLS = """
from codemodekit import tool

@tool
def ping() -> dict:
    \"\"\"Answer.\"\"\"
    return {"ok": True}
"""
API = {
    "openapi": "3.0.3",
    "info": {"title": "t", "version": "1"},
    "components": {"securitySchemes": {"b": {"type": "http", "scheme": "bearer"}}},
    "security": [{"b": []}],
    "paths": {
        "/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}
    },
}
PRECIOUS = "precious: the user's own file\n"


@dataclass(frozen=True)
class Writer:
    name: str
    argv: Callable[[Path], list[str]]
    target: Callable[[Path], Path]


WRITERS = [
    Writer("install claude-code", lambda p: ["install", "claude-code"], lambda p: p / ".mcp.json"),
    Writer("install cursor", lambda p: ["install", "cursor"], lambda p: p / ".cursor/mcp.json"),
    Writer(
        "install claude-desktop --copy-env",
        lambda p: ["install", "claude-desktop", "--copy-env"],
        lambda p: p.parent / "xdg/Claude/claude_desktop_config.json",
    ),
    Writer("lock", lambda p: ["lock"], lambda p: p / "codemode.lock.json"),
    Writer("generate (its lock)", lambda p: ["generate"], lambda p: p / "codemode.lock.json"),
    Writer(
        "init --force",
        lambda p: ["init", str(p / "fresh"), "--force"],
        lambda p: p / "fresh/codemode.toml",
    ),
    Writer("init (hello.ts)", lambda p: ["init", str(p / "fresh")], lambda p: p / "fresh/hello.ts"),
]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    root = tmp_path / "proj"
    root.mkdir()
    (root / "safe_write_tools.py").write_text(TOOLS, encoding="utf-8")
    (root / "codemode.toml").write_text(
        'version = 1\nname = "safe"\n[policy]\ndefault = "allow"\n'
        '[sources.app]\ntype = "python"\nmodule = "safe_write_tools"\n'
        '[sources.api]\ntype = "openapi"\ndocument = "api.json"\n'
        'base_url = "http://127.0.0.1:9"\nauth = { bearer = "${SAFE_WRITE_TOKEN}" }\n',
        encoding="utf-8",
    )
    (root / "api.json").write_text(json.dumps(API), encoding="utf-8")
    (root / "fresh").mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SAFE_WRITE_TOKEN", "tok-secret-123")
    monkeypatch.chdir(root)
    yield root


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim" / "id_rsa"
    victim.parent.mkdir(exist_ok=True)
    victim.write_text(PRECIOUS)
    victim.chmod(0o644)
    return victim


def _intact(victim: Path) -> None:
    assert victim.read_text() == PRECIOUS
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644  # not chmod-ed through a link
    assert not any(p.name.endswith("tmp") for p in victim.parent.iterdir())


def _temp_names(target: Path) -> list[Path]:
    """Every fixed temporary name a writer has used or could guess."""
    return [
        target.with_name(target.name + ".codemode-tmp"),
        target.with_name(target.name + ".tmp"),
        target.with_name("." + target.name + ".tmp"),
        target.with_name(f".{target.name}.codemode-tmp"),
    ]


@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.name)
def test_a_link_at_the_target_is_refused(
    writer: Writer, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = _victim(tmp_path)
    target = writer.target(project)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(victim)
    assert main(writer.argv(project)) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert target.is_symlink()
    _intact(victim)


@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.name)
def test_a_link_at_a_temporary_name_is_never_written_through(
    writer: Writer, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = _victim(tmp_path)
    target = writer.target(project)
    target.parent.mkdir(parents=True, exist_ok=True)
    for name in _temp_names(target):
        name.symlink_to(victim)
    assert main(writer.argv(project)) == 0, capsys.readouterr().err
    _intact(victim)
    assert target.is_file() and not target.is_symlink()
    for name in _temp_names(target):
        assert name.is_symlink()  # left alone, never replaced or followed


@pytest.mark.parametrize(
    ("argv", "folder", "inside"),
    [
        (["install", "cursor"], ".cursor", "mcp.json"),
        (["init", "fresh/sub", "--force"], "fresh/sub", "codemode.toml"),
    ],
    ids=["install cursor", "init into a linked folder below the project"],
)
def test_a_linked_folder_below_the_project_is_refused(
    argv: list[str],
    folder: str,
    inside: str,
    project: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / folder).parent.mkdir(parents=True, exist_ok=True)
    (project / folder).symlink_to(elsewhere, target_is_directory=True)
    code = main(argv)
    err = capsys.readouterr().err
    if argv[0] == "init":
        # `init DIR` chooses DIR itself: a link there is the user's choice, and is used.
        assert code == 0, err
        return
    assert code == 2
    assert "symbolic link" in err and "Traceback" not in err
    assert list(elsewhere.iterdir()) == []


def test_install_names_the_link_it_refused(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = _victim(tmp_path)
    (project / ".mcp.json").symlink_to(victim)
    assert main(["install", "claude-code", "--copy-env"]) == 2
    err = capsys.readouterr().err
    assert f"{project / '.mcp.json'} is a symbolic link" in err
    _intact(victim)


def test_a_secret_holding_file_is_created_0600_from_the_start(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 10: no window in which the copied secrets sit in a file the umask left open."""
    created: list[tuple[str, int, int]] = []
    real_open = os.open

    def spy(path: object, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if flags & os.O_CREAT:
            created.append((os.fspath(path), flags, mode))  # type: ignore[arg-type]
        return real_open(path, flags, mode, dir_fd=dir_fd)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", spy)
    old_umask = os.umask(0)  # the worst umask: nothing narrows the mode
    try:
        assert main(["install", "claude-desktop", "--copy-env"]) == 0
    finally:
        os.umask(old_umask)
    written = tmp_path / "xdg/Claude/claude_desktop_config.json"
    assert "tok-secret-123" in written.read_text()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert created, "the file was not created through os.open"
    for _path, flags, mode in created:
        assert mode == 0o600
        assert flags & os.O_EXCL and flags & os.O_NOFOLLOW


def test_an_existing_file_keeps_its_mode_and_a_non_regular_target_is_refused(
    tmp_path: Path,
) -> None:
    kept = tmp_path / "kept.json"
    kept.write_text("{}")
    kept.chmod(0o640)
    write_file(kept, "[]")
    assert kept.read_text() == "[]" and stat.S_IMODE(kept.stat().st_mode) == 0o640
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeTarget, match="not a regular file"):
        write_file(fifo, "x")
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere" / "new-file")
    with pytest.raises(UnsafeTarget, match="symbolic link"):
        write_file(dangling, "x")
    assert not (tmp_path / "nowhere").exists()
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []


def test_install_output_is_still_valid_json(project: Path) -> None:
    assert main(["install", "claude-code"]) == 0
    assert "safe" in json.loads((project / ".mcp.json").read_text())["mcpServers"]
