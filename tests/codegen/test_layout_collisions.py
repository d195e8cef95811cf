"""Every source gets a declaration file of its own, whatever other sources are named
(found by a review helper: ``a-b``, ``a_b`` and ``a-b-d44362`` gave two files for three
sources, and one source's declarations were silently dropped).

Names that slug alike get a hash suffix; a suffixed name can itself be another source's
slug. Plugin servers become sources named ``<plugin>-<server>``, so a plugin chooses part
of these names.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from codemodekit import CodeMode, allow_all_tool_calls, define_tool, local


def _h(text: str, size: int = 6) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


FAMILIES = {
    "a suffixed name is another's slug": ["a-b", "a_b", f"a-b-{_h('a-b')}"],
    "both suffixed names taken": ["a-b", "a_b", f"a-b-{_h('a-b')}", f"a-b-{_h('a_b')}"],
    "the longer hash taken too": [
        "a-b",
        "a_b",
        f"a-b-{_h('a-b')}",
        f"a-b-{_h('a-b', 12)}",
        f"a_b-{_h('a-b', 12)}",
    ],
    "case and punctuation": [
        "Team",
        "team",
        "TEAM",
        "te.am".replace(".", "_"),
        "team-" + _h("team"),
    ],
}


@pytest.mark.parametrize("family", list(FAMILIES), ids=list(FAMILIES))
async def test_each_source_is_declared_in_a_file_of_its_own(family: str) -> None:
    names = FAMILIES[family]
    tool = {name: f"t{index}" for index, name in enumerate(names)}
    sources = [
        local(
            name,
            {
                tool[name]: define_tool(
                    description=name, input_schema={"type": "object"}, execute=lambda a: 1
                )
            },
        )
        for name in names
    ]
    async with CodeMode(sources=sources, policy=allow_all_tool_calls()) as cm:
        files = cm.generate()
    per_source = [path for path in files if path.startswith("tools.") and path != "tools.d.ts"]
    assert len(per_source) == len(names), sorted(per_source)
    for name in names:
        declared = [p for p in per_source if re.search(rf"\b{tool[name]}\??:", files[p])]
        assert len(declared) == 1, (name, declared)
