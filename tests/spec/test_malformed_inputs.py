"""Arbitrary damage to a spec never escapes as anything but SpecError, and the position
scanner agrees with tomllib on awkward but valid TOML."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from codemodekit.spec import SpecError, parse_spec

BASE = (Path(__file__).resolve().parents[2] / "codemode.toml.example").read_text("utf-8")
NOISE = ['"', "'", "[", "]", "{", "}", "=", ",", ".", "\n", "#", "\\", " ", "x", "1", "-", "$"]


def mutations(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        text = list(BASE)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text))
            action = rng.choice(("delete", "insert", "replace"))
            if action == "delete":
                del text[at]
            elif action == "insert":
                text.insert(at, rng.choice(NOISE))
            else:
                text[at] = rng.choice(NOISE)
        out.append("".join(text))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_damaged_specs_give_spec_errors_only(seed: int) -> None:
    for text in mutations(seed, 60):
        try:
            parse_spec(text)
        except SpecError as exc:
            rendered = str(exc)
            assert rendered.startswith("codemode.toml:")
            assert exc.line >= 1
            assert len(rendered.splitlines()) <= 8 * 4 + 1


AWKWARD = '''\
# a comment with "quotes" and [brackets]
version = 1 # trailing comment
"name" = """multi
[policy]
line"""

[limits] # comment after a header
'max_tool_calls' = 5
[ policy ]
default = 'deny'
rules = [ # comment inside an array
  { tools = "a\\"b", decision = "allow" },

  # blank lines and comments between items
  { tools = 'c\\d', decision = "deny", read_only = false },
]
[sources . "x-y" ]
type = "python"
module = "m"
path = [
  "a",
  'b',
]
'''


def test_awkward_but_valid_toml_loads() -> None:
    spec = parse_spec(AWKWARD)
    assert spec.name == "multi\n[policy]\nline"
    assert [r.tools for r in spec.policy.rules] == ['a"b', "c\\d"]
    assert list(spec.sources) == ["x-y"]


@pytest.mark.parametrize(
    "old, new, line, column, key",
    [
        ("'max_tool_calls' = 5", "'max_tool_calls' = 0", 8, 20, "limits.max_tool_calls"),
        ("read_only = false }", 'read_only = "no" }', 15, 51, "policy.rules[1].read_only"),
        ("  'b',\n", "  2,\n", 22, 3, "sources.x-y.path[1]"),
        ('module = "m"', 'module = "9m"', 19, 10, "sources.x-y.module"),
        ("default = 'deny'", "default = 'deny'\nextra = 1", 11, 1, "policy.extra"),
    ],
)
def test_errors_in_awkward_toml_are_located(
    old: str, new: str, line: int, column: int, key: str
) -> None:
    assert old in AWKWARD
    with pytest.raises(SpecError) as info:
        parse_spec(AWKWARD.replace(old, new))
    assert (info.value.line, info.value.column, info.value.key) == (line, column, key)
