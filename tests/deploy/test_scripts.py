"""The setup scripts: the demo installs the package alone, the tests their extras.

A stand-in interpreter records what each script asks pip to install, so this runs offline
and touches no real environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_RECORDER = """#!/bin/sh
# Stands in for python: `-m venv DIR` makes DIR/bin/python a copy of this script; every
# other call is recorded, one line per call.
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && chmod +x "$3/bin/python"
  exit 0
fi
echo "$*" >> "$RECORD"
"""


def installs(tmp_path: Path, *args: str) -> list[str]:
    fake = tmp_path / "python"
    fake.write_text(_RECORDER, encoding="utf-8")
    fake.chmod(0o755)
    record = tmp_path / "record.txt"
    env = {
        **os.environ,
        "PYTHON": str(fake),
        "CODEMODE_VENV": str(tmp_path / "venv"),
        "RECORD": str(record),
    }
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh"), *args], env=env, check=True, timeout=60
    )
    lines = record.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.startswith("-m pip install")]


def test_setup_installs_the_development_extras_by_default(tmp_path: Path) -> None:
    calls = installs(tmp_path)
    assert calls[-1] == "-m pip install --quiet --disable-pip-version-check -e .[dev]"


def test_package_only_installs_the_package_and_nothing_else(tmp_path: Path) -> None:
    calls = installs(tmp_path, "--package-only")
    assert calls == ["-m pip install --quiet --disable-pip-version-check --no-compile -e ."]


def test_the_demo_installs_the_package_only_and_the_tests_their_extras() -> None:
    demo = (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")
    test = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "bash scripts/setup.sh --package-only" in demo
    assert "bash scripts/setup.sh\n" in test
