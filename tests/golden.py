"""Golden files: compare generated text with ``tests/golden/<case>/``, or rewrite it.

Check mode (default) fails with a unified diff and the command that updates the files;
update mode (``CODEMODE_UPDATE_GOLDEN=1`` or ``pytest --update-goldens``) rewrites them.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

GOLDEN_ROOT = Path(__file__).parent / "golden"
UPDATE_COMMAND = "CODEMODE_UPDATE_GOLDEN=1 python -m pytest tests  (or: pytest --update-goldens)"

_update_requested = False


def set_update(value: bool) -> None:
    global _update_requested
    _update_requested = value


def updating() -> bool:
    return _update_requested or os.environ.get("CODEMODE_UPDATE_GOLDEN") == "1"


def assert_golden(expected_dir: Path, actual: Mapping[str, str], *, exact_set: bool = True) -> None:
    """Compare ``actual`` ({relative path: text}) with the files under ``expected_dir``.

    With ``exact_set`` the golden folder's files (below ``expected_dir``) must be exactly the
    generated ones; otherwise only the generated paths are compared.
    """
    if updating():
        expected_dir.mkdir(parents=True, exist_ok=True)
        if exact_set:
            for stale in _files(expected_dir) - set(actual):
                (expected_dir / stale).unlink()
        for rel, text in actual.items():
            target = expected_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                target.write_text(text, encoding="utf-8")
        return
    problems: list[str] = []
    present = _files(expected_dir) if expected_dir.exists() else set()
    for rel in sorted(actual):
        target = expected_dir / rel
        old = target.read_text(encoding="utf-8") if target.exists() else ""
        if rel not in present:
            problems.append(f"missing golden file {target}")
        if old != actual[rel]:
            problems.append(
                "".join(
                    difflib.unified_diff(
                        old.splitlines(keepends=True),
                        actual[rel].splitlines(keepends=True),
                        fromfile=f"golden/{rel}",
                        tofile=f"generated/{rel}",
                    )
                )
            )
    if exact_set:
        for stale in sorted(present - set(actual)):
            problems.append(f"golden file {expected_dir / stale} is no longer generated")
    if problems:
        pytest.fail(
            f"golden mismatch in {expected_dir}:\n"
            + "\n".join(problems)
            + f"\nIf the change is intended, update the goldens: {UPDATE_COMMAND}",
            pytrace=False,
        )


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
