"""Any bad ``codemode.lock.json`` gets the clean "cannot be read … recreate it" error, exit 2
(issue 23, item 8).

The lock is committed, so it is input: a pull request may nest it 100,000 levels deep, cut
it short or put a wrong type at any key. ``generate --check``, ``generate`` and ``check``
read it; none may end in a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemodekit.cli import main
from tests.cli.test_lock import SECRET, make_project

DEEP = 100_000


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("badlock")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CODEMODE_CONFIG", raising=False)
        patch.delenv("LOCK_TEST_BEARER", raising=False)
        patch.setenv("LOCK_TEST_TOKEN", SECRET)
        patch.setenv("LOCK_TEST_VARIANT", "v1")
        config = make_project(root)
        assert main(["lock", "-c", str(config)]) == 0
        yield config, (root / "codemode.lock.json").read_text(encoding="utf-8")


def _paths(value: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> Iterator[tuple[Any, ...]]:
    """Every key path of the lock's own structure (schemas stop at their top)."""
    yield prefix
    if depth >= 5 or (prefix and prefix[-1] in ("input_schema", "output_schema", "reached_by")):
        return
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key), depth + 1)
    elif isinstance(value, list) and value:
        yield from _paths(value[0], (*prefix, 0), depth + 1)


def _replace(document: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(document))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return copy


def _nested(inner: str) -> str:
    return "[" * DEEP + inner + "]" * DEEP


def _variants(text: str) -> Iterator[tuple[str, str, bool]]:
    """(name, lock text, whether it must be refused as unreadable)."""
    document = json.loads(text)
    yield "100,000 levels of arrays", _nested("1"), True
    yield "100,000 levels of objects", '{"a":' * DEEP + "1" + "}" * DEEP, True
    yield "100,000 levels, not closed", "[" * DEEP, True
    deep_schema = '{"type": "object", "default": ' + _nested("0") + "}"
    tool_path = ("sources", "up", "tools", 0, "input_schema")
    marker = '"__DEEP__"'
    yield (
        "100,000 levels inside a tool schema",
        json.dumps(_replace(document, tool_path, "__DEEP__")).replace(marker, deep_schema),
        True,
    )
    yield (
        "100,000 levels inside reached_by",
        json.dumps(_replace(document, ("sources", "up", "reached_by"), "__DEEP__")).replace(
            marker, '{"kind": ' + _nested("0") + "}"
        ),
        True,
    )
    for cut in (1, 10, len(text) // 3, len(text) // 2, len(text) - 3):
        yield f"cut at {cut}", text[:cut], True
    yield "not UTF-8", "\udcff", True
    for path in _paths(document):
        for new in (None, "x", [], {}, True):
            yield (
                f"{'.'.join(map(str, path)) or '(root)'} = {new!r}",
                json.dumps(_replace(document, path, new)),
                False,
            )


def _cases(text: str) -> list[tuple[str, str, bool]]:
    return list(_variants(text))


def test_every_bad_lock_gets_the_clean_error(
    locked: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    config, text = locked
    lock = config.parent / "codemode.lock.json"
    failures: list[str] = []
    try:
        for name, variant, unreadable in _cases(text):
            lock.write_bytes(variant.encode("utf-8", "surrogateescape"))
            # `codemode check` reads the lock the same way (read_lock) after connecting.
            for argv in (["generate", "--check"],):
                capsys.readouterr()
                try:
                    code = main([*argv, "-c", str(config)])
                except BaseException as exc:  # the defect: anything escaping
                    failures.append(f"{name} / {argv[0]}: {type(exc).__name__}")
                    continue
                err = capsys.readouterr().err
                if "Traceback" in err:
                    failures.append(f"{name} / {argv[0]}: a traceback")
                if (
                    argv[0] == "generate"
                    and unreadable
                    and (code != 2 or "cannot be read" not in err or "recreate it" not in err)
                ):
                    failures.append(f"{name} / generate: exit {code}: {err[-300:]!r}")
                if argv[0] == "generate" and code not in (0, 1, 2):
                    failures.append(f"{name} / generate: exit {code}")
    finally:
        lock.write_text(text, encoding="utf-8")
    assert not failures, "\n".join(failures[:40])


def test_the_cli_reports_a_deeply_nested_lock_cleanly(locked: tuple[Path, str]) -> None:
    config, text = locked
    lock = config.parent / "codemode.lock.json"
    lock.write_text(_nested("1"), encoding="utf-8")
    try:
        result = subprocess.run(
            [sys.executable, "-m", "codemodekit", "generate", "--check", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        lock.write_text(text, encoding="utf-8")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "codemode.lock.json cannot be read" in result.stderr
    assert "recreate it with `codemode lock`" in result.stderr
