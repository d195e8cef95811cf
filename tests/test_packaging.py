"""The distributions a user installs: built from this checkout, then inspected and installed.

Slow (it builds in an isolated environment fetched from the package index), so marked."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=900,
    )
    return out


def test_the_wheel_carries_the_package_data_and_the_license(dist: Path) -> None:
    [wheel] = dist.glob("codemodekit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "codemodekit/py.typed",
        "codemodekit/sandbox/prelude.js",
        "codemodekit/examples/codemode.toml",
        "codemodekit/examples/hello.ts",
        "codemodekit/cli/cmd_install.py",
    ):
        assert required in names, required
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: MIT" in text
    for classifier in ("Programming Language :: Python :: 3.13", "Typing :: Typed"):
        assert f"Classifier: {classifier}" in text


def test_the_sdist_carries_tests_docs_schema_and_the_example(dist: Path) -> None:
    [sdist] = dist.glob("codemodekit-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for required in (
        "LICENSE",
        "README.md",
        "codemode.toml.example",
        "schema/codemode.schema.json",
        "docs/api.md",
        "tests/conftest.py",
        "tests/cli/test_lazy_imports.py",
        "src/codemodekit/py.typed",
    ):
        assert required in names, required
    assert not any("node_modules" in n or "__pycache__" in n for n in names)


def test_the_wheel_installs_and_runs_outside_the_checkout(dist: Path, tmp_path: Path) -> None:
    [wheel] = dist.glob("codemodekit-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    # --no-deps: `codemode --version` imports nothing else (lazy imports), so the check needs
    # no index; the full dependency set is what CI's own install exercises.
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "-q", str(wheel)],
        check=True,
        timeout=300,
    )
    done = subprocess.run(
        [str(bin_dir / "codemode"), "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "codemode 0.1.0"
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import codemodekit; print(codemodekit.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv)  # the installed copy, not src/
