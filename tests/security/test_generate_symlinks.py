"""`codemode generate` never follows a symbolic link inside its output folder.

The committed ``catalog.json`` lists the files the generator owns; it is input, so a
listed ``link/x`` (with ``link`` pointing out of the folder) must not make a delete or a
write land outside it. Every placement of a link is refused with a clear error and leaves
the files outside untouched.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

TOOLS = """
from codemodekit import define_tool

lookup = define_tool(description="Look up.", input_schema={"type": "object"},
                     execute=lambda args: {})
"""


def _project(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    project.mkdir()
    module = f"linktools_{uuid.uuid4().hex[:8]}"
    (project / f"{module}.py").write_text(TOOLS)
    config = project / "codemode.toml"
    config.write_text(
        'version = 1\nname = "demo"\n[policy]\ndefault = "deny"\n'
        f'[sources.app]\ntype = "python"\nmodule = "{module}"\n'
    )
    return config, project / "codemode"


def _generate(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemodekit", "generate", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=config.parent,
    )


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    for name in ("x", "tools.d.ts", "tools.app.d.ts", "catalog.json"):
        (outside / name).write_text(f"precious {name}\n")
    return outside


def _listed(out: Path, *paths: str) -> None:
    manifest = json.loads((out / "catalog.json").read_text())
    manifest["files"] = sorted({*manifest.get("files", []), *paths})
    (out / "catalog.json").write_text(json.dumps(manifest))


def _untouched(outside: Path) -> None:
    for name in ("x", "tools.d.ts", "tools.app.d.ts", "catalog.json"):
        assert (outside / name).read_text() == f"precious {name}\n", name


def _refused(result: subprocess.CompletedProcess[str], link: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "symbolic link" in result.stderr, result.stderr
    assert link in result.stderr
    assert "Traceback" not in result.stderr


def test_stale_listed_file_behind_a_directory_link_is_not_deleted(tmp_path: Path) -> None:
    config, out = _project(tmp_path)
    assert _generate(config).returncode == 0
    outside = _outside(tmp_path)
    (out / "link").symlink_to(outside, target_is_directory=True)
    _listed(out, "link/x")
    _refused(_generate(config), "link")
    _untouched(outside)


@pytest.mark.parametrize(
    "placement",
    ["generated-file", "manifest", "txn-folder", "stale-file", "nested-folder"],
)
def test_every_link_placement_is_refused(tmp_path: Path, placement: str) -> None:
    config, out = _project(tmp_path)
    assert _generate(config).returncode == 0
    outside = _outside(tmp_path)
    if placement == "generated-file":
        (out / "tools.d.ts").unlink()
        (out / "tools.d.ts").symlink_to(outside / "tools.d.ts")
        link = "tools.d.ts"
    elif placement == "manifest":
        (out / "catalog.json").unlink()
        (out / "catalog.json").symlink_to(outside / "catalog.json")
        link = "catalog.json"
    elif placement == "txn-folder":
        (out / ".codemode-txn").symlink_to(outside, target_is_directory=True)
        link = ".codemode-txn"
    elif placement == "stale-file":
        (out / "old.d.ts").symlink_to(outside / "x")
        _listed(out, "old.d.ts")
        link = "old.d.ts"
    else:
        (out / "deep").mkdir()
        (out / "deep" / "link").symlink_to(outside, target_is_directory=True)
        _listed(out, "deep/link/x")
        link = "deep/link"
    # Make the run want to change something, so writes and deletes are attempted.
    (out / "tools.app.d.ts").write_text("// edited\n") if placement != "generated-file" else None
    _refused(_generate(config), link)
    _untouched(outside)


@pytest.mark.parametrize("name", ["tsconfig.json", "globals.d.ts"])
def test_a_link_in_place_of_an_editor_file_is_refused(tmp_path: Path, name: str) -> None:
    config, out = _project(tmp_path)
    assert _generate(config).returncode == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / name).write_text("precious\n")
    (out / name).unlink()
    (out / name).symlink_to(outside / name)
    _refused(_generate(config), name)
    assert (outside / name).read_text() == "precious\n"
    assert (out / name).is_symlink()
