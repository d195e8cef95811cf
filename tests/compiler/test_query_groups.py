"""The query's lazily compiled groups are skipped only where they cannot match.

``compiler.query.capture`` runs the core query and, when a script can contain what they
match, the groups compiled on first need (start-up cost). Its result must be exactly what
one query made of every pattern captures: checked on every compiler test case, on scripts
made of their fragments, and on the fragments with the trigger words moved around.
"""

from __future__ import annotations

import tree_sitter as ts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemodekit.compiler import query as compiler_query
from codemodekit.compiler.query import LANGUAGE, capture
from tests.compiler import test_erasure, test_rejections, test_semantics

WHOLE = ts.Query(
    LANGUAGE,
    compiler_query._QUERY_SOURCE + "\n".join(g.source for g in compiler_query._LAZY_GROUPS),
)

SOURCES = [
    *(code for _, code, _ in test_erasure.CASES),
    *(code for _, code, _ in test_semantics.CASES),
    *(case[1] for case in test_rejections.UNSUPPORTED),
    # Each group's trigger present without its construct, and the construct in odd places.
    "const classes = 1; const s = `a${classes}`; return s",
    "const o = { m?() { return 1 } }; return (o as any)\n(1)",
    "function f(this: Window, readonly = 1) { return readonly }",
    "const x = a < b > `t`; const y = import.meta; return import('m')",
    "abstract class A { abstract m(): void; declare x: number; accessor y = 1 }",
    "class P { constructor(private x: number, public override y?: string) {} }",
    "const v = (x satisfies T)[0]; const w = (<T>y as U)(z); return v",
]


def _positions(captures: dict[str, list[ts.Node]]) -> dict[str, list[tuple[int, int, str]]]:
    return {
        name: sorted((n.start_byte, n.end_byte, n.type) for n in nodes)
        for name, nodes in captures.items()
    }


def _assert_same(code: str) -> None:
    data = code.encode("utf-8")
    root = ts.Parser(LANGUAGE).parse(data).root_node
    expected = _positions(ts.QueryCursor(WHOLE).captures(root))
    assert _positions(capture(root, data)) == expected, code


def test_every_compiler_case_gets_the_captures_of_the_whole_query() -> None:
    assert len(SOURCES) > 100
    for code in SOURCES:
        _assert_same(code)


def test_captures_are_in_source_order() -> None:
    code = "class A { readonly a = 1; private b?: number; readonly c!: string }"
    data = code.encode()
    found = capture(ts.Parser(LANGUAGE).parse(data).root_node, data)
    for nodes in found.values():
        starts = [n.start_byte for n in nodes]
        assert starts == sorted(starts)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SOURCES), min_size=1, max_size=4), st.sampled_from(["\n", ";\n"]))
def test_scripts_made_of_case_fragments(fragments: list[str], separator: str) -> None:
    _assert_same(separator.join(fragments))
