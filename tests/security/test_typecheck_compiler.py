"""`codemode typecheck` runs only the project's TypeScript compiler (issue 23, item 5).

A ``node_modules/typescript`` in ``/tmp`` or any folder above the project is anybody's: it
is never run. The compiler is looked for in the config's folder and its parents up to the
repository root, then on ``PATH``; it must answer ``--version`` like TypeScript, and the
result names it. A compiler that prints nothing is an error, never "no type errors".
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from codemodekit.cli import main
from tests.conftest import node_tool

FAKES = {
    "silent": "process.exit(0);\n",
    "fails silently": "process.exit(3);\n",
    "wrong version text": "console.log('tsc-evil 1.0');\n",
    "version then nothing": (
        "if (process.argv.includes('--version')) { console.log('Version 5.0.0'); }\n"
        "process.exit(0);\n"
    ),
    "version then a crash": (
        "if (process.argv.includes('--version')) { console.log('Version 5.0.0'); process.exit(0); }\n"
        "process.exit(7);\n"
    ),
}
MARKER = "FAKE TSC RAN"


def _fake_package(root: Path, body: str) -> Path:
    script = root / "node_modules" / "typescript" / "bin" / "tsc"
    script.parent.mkdir(parents=True)
    script.write_text(f"require('fs').writeFileSync({str(root / 'ran')!r}, '{MARKER}');\n" + body)
    return script


def _real_package(root: Path) -> None:
    package = node_tool("tsc").resolve().parent.parent  # node_modules/typescript
    (root / "node_modules").mkdir(parents=True, exist_ok=True)
    (root / "node_modules" / "typescript").symlink_to(package, target_is_directory=True)


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """outside/ (no repository) ⊃ repo/ (.git) ⊃ project/ (codemode.toml); PATH has node only."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "node").symlink_to(node)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    repo = tmp_path / "outside" / "repo"
    project = repo / "project"
    project.mkdir(parents=True)
    (repo / ".git").mkdir()
    monkeypatch.chdir(project)
    assert main(["init", "."]) == 0
    return tmp_path / "outside", project


@pytest.mark.parametrize("fake", list(FAKES))
def test_a_compiler_above_the_repository_is_never_run(
    fake: str, layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    outside, _project = layout
    _fake_package(outside, FAKES[fake])
    capsys.readouterr()
    code = main(["typecheck", "hello.ts"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "the TypeScript compiler (tsc) was not found" in err
    assert not (outside / "ran").exists()


@pytest.mark.parametrize("fake", list(FAKES))
@pytest.mark.parametrize("where", ["project", "repository root", "PATH"])
def test_a_compiler_that_does_not_answer_like_typescript_is_an_error(
    fake: str, where: str, layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    outside, project = layout
    if where == "PATH":
        script = outside.parent / "bin" / "tsc"
        script.write_text(
            f"#!{shutil.which('node')}\n"
            f"require('fs').writeFileSync({str(outside / 'ran')!r}, '{MARKER}');\n" + FAKES[fake]
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    else:
        _fake_package(project if where == "project" else project.parent, FAKES[fake])
    capsys.readouterr()
    code = main(["typecheck", "hello.ts"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "no type errors" not in err
    assert "TypeScript compiler" in err or "without reporting anything" in err


@pytest.mark.parametrize("where", ["project", "repository root"])
def test_the_projects_own_compiler_runs_and_is_named(
    where: str, layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _outside, project = layout
    root = project if where == "project" else project.parent
    _real_package(root)
    capsys.readouterr()
    assert main(["typecheck", "hello.ts"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("hello.ts: no type errors (TypeScript 5.")
    assert str(root / "node_modules" / "typescript") in err


def test_without_a_repository_only_the_configs_folder_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    monkeypatch.setenv("PATH", os.path.dirname(node))
    if shutil.which("tsc") is not None:
        pytest.skip("a tsc is on the PATH next to node")
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    project = tmp_path / "a" / "project"
    project.mkdir(parents=True)
    _fake_package(tmp_path / "a", FAKES["silent"])
    monkeypatch.chdir(project)
    assert main(["init", "."]) == 0
    capsys.readouterr()
    assert main(["typecheck", "hello.ts"]) == 2
    assert not (tmp_path / "a" / "ran").exists()
