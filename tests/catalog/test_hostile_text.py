"""Text no well-formed catalog holds cannot break building one, or the lock.

Two families, each found by a review helper:

- a lone surrogate (JSON's ``"\\ud800"``, which UTF-8 cannot encode) anywhere in what a
  source or a committed lock lists: a tool's name, description, schema, annotations or a
  skipped tool's reason. ``Catalog.build`` ended in a ``UnicodeEncodeError`` (every digest
  and file encodes its text), so one hostile upstream broke the whole catalog, and a
  committed lock broke ``generate --check``;
- a lock text whose unterminated strings made the nesting check before parsing quadratic
  (a 300 KB lock kept ``generate --check`` busy for minutes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.codegen.helpers import catalog_from_json

from codemodekit.catalog.lock import LockError, parse_lock
from codemodekit.codegen.artifacts import generate

LONE = ["\ud800", "\udfff", "\udc00\ud800"]  # a high, a low, a reversed pair

PLACES: dict[str, Any] = {
    "name": lambda s: {"name": f"tool{s}"},
    "description": lambda s: {"name": "t", "description": f"text{s}"},
    "property": lambda s: {
        "name": "t",
        "input_schema": {"type": "object", "properties": {f"k{s}": {"type": "string"}}},
    },
    "enum": lambda s: {"name": "t", "input_schema": {"type": "string", "enum": [f"v{s}"]}},
    "output": lambda s: {"name": "t", "output_schema": {"type": "object", "title": f"o{s}"}},
    "annotations": lambda s: {"name": "t", "annotations": {"title": f"a{s}"}},
    # Too deep to walk: the catalog quarantines it, under a name that encodes.
    "deep schema": lambda s: {"name": f"deep{s}", "input_schema": _deep(5000, s)},
}


def _deep(depth: int, text: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": text}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize("lone", LONE, ids=["high", "low", "reversed"])
@pytest.mark.parametrize("place", list(PLACES))
def test_a_lone_surrogate_anywhere_in_a_source_leaves_a_catalog_that_encodes(
    place: str, lone: str
) -> None:
    tool = PLACES[place](lone)
    catalog = catalog_from_json(
        {
            "sources": {
                "app": {
                    "tools": [tool, {"name": "fine"}],
                    "skipped": [{"name": f"s{lone}", "reason": f"r{lone}"}],
                }
            }
        }
    )
    assert {t.name for t in catalog.tools} >= {"fine"}
    for path, text in generate(catalog, name="demo").items():
        text.encode("utf-8")  # strict: every generated file is valid UTF-8
        assert lone not in text, path
    assert lone not in json.dumps([t.name for t in catalog.tools], ensure_ascii=False)


def _project(tmp_path: Path, lock_text: str) -> Path:
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "t"\n[policy]\ndefault = "allow"\n'
        '[sources.up]\ntype = "mcp"\ncommand = "some-mcp-server"\n'
    )
    (tmp_path / "codemode.lock.json").write_text(lock_text)
    return tmp_path / "codemode.toml"


@pytest.mark.parametrize("field", ["name", "description", "skipped"])
def test_a_committed_lock_with_a_lone_surrogate_is_no_traceback(tmp_path: Path, field: str) -> None:
    tool = {"name": "t", "description": "", "input_schema": {"type": "object"}}
    skipped = []
    if field == "skipped":
        skipped.append({"name": "s", "reason": "EVIL"})
    else:
        tool[field] = "EVIL"
    lock = {
        "format": 1,
        "generator": "codemodekit",
        "sources": {
            "up": {
                "reached_by": {"kind": "mcp", "command": "some-mcp-server", "args": []},
                "tools": [tool],
                "skipped": skipped,
            }
        },
    }
    config = _project(tmp_path, json.dumps(lock).replace("EVIL", "evil\\ud800"))
    for command in (["generate", "--check"], ["generate"]):
        done = subprocess.run(
            [sys.executable, "-m", "codemodekit", *command, "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert "Traceback" not in done.stderr, (command, done.stderr[-2000:])
        assert done.returncode in (0, 1, 2), (command, done.stderr[-2000:])


@pytest.mark.parametrize(
    "text",
    [
        "[" * 120 + '"' + '\\"' * 150_000,  # every quote an unterminated string
        "[" * 120 + '"' * 150_000,
        "[" * 120 + '"\\' * 150_000,
        '{"a": "' + "\\\\" * 150_000,
    ],
    ids=["escaped quotes", "quotes", "backslash quote", "backslashes"],
)
def test_a_hostile_lock_is_refused_in_linear_time(tmp_path: Path, text: str) -> None:
    with pytest.raises(LockError):
        parse_lock(text[:2000])  # the same shape, small: refused
    # No clock of ours: before the fix each took minutes (quadratic in 300 KB), and the
    # subprocess's timeout is the hang guard.
    done = subprocess.run(
        [sys.executable, "-m", "codemodekit", "generate", "--check"],
        cwd=_project(tmp_path, text).parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "codemode.lock.json" in done.stderr
