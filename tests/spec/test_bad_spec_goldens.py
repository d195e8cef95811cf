"""Every malformed spec under tests/golden/bad_spec_*/ gets its exact one-screen error.

The CLI runs in-process from the case's input folder, so the file shows as
``codemode.toml`` and stderr is byte-stable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codemodekit.cli import main
from tests.golden import GOLDEN_ROOT, assert_golden

BAD_CASES = sorted(p for p in GOLDEN_ROOT.glob("bad_spec_*") if (p / "input").is_dir())


def test_there_are_enough_bad_spec_cases() -> None:
    assert len(BAD_CASES) >= 14


@pytest.mark.parametrize("case", BAD_CASES, ids=[p.name for p in BAD_CASES])
def test_bad_spec_error_is_pinned(
    case: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(case / "input")
    code = main(["check", "--offline"])
    out, err = capsys.readouterr()
    assert code == 2  # a spec error, as in every command
    assert out == ""
    assert "Traceback" not in err
    first = err.splitlines()[0]
    assert first.startswith("codemode.toml:"), first
    assert len(err.splitlines()) <= 30, "a bad spec must fit on one screen"
    assert_golden(case / "expected", {"stderr.txt": err})


def test_offline_summary_is_pinned(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = GOLDEN_ROOT / "check_summary_offline"
    monkeypatch.chdir(case / "input")
    monkeypatch.delenv("CODEMODE_TEST_UNSET_TOKEN", raising=False)
    monkeypatch.delenv("CODEMODE_TEST_UNSET_DEPLOY", raising=False)
    code = main(["check", "--offline"])
    out, err = capsys.readouterr()
    assert code == 0
    assert_golden(case / "expected", {"stdout.txt": out, "stderr.txt": err})
