"""`f<T>(x)` is a call for TypeScript wherever type arguments can be read; tree-sitter reads
`(f < T) > (x)…` at the end of the code when more binary operators follow. Every such
script runs as TypeScript runs it or is refused with a message saying what to write; plain
comparisons keep TypeScript's meaning."""

from __future__ import annotations

import pytest

from codemodekit.errors import CompileFailure, ErrorCode
from tests.compiler.jsrun import compile_ts, failure
from tests.compiler.test_against_tsc import _outcome, _transpile

HEAD = (
    "class Item { n = 1 }\n"
    "function count<T>(xs: T[]): number { return xs.length }\n"
    "const xs = [new Item(), new Item()]\n"
    "let a = 1, b = 2, c = 3, d = 4, r: unknown = 0\n"
)

CALLS = [
    "return count<Item>(xs) + 1 + 1",
    "return count<Item>(xs) * 2 * 3",
    "return count<string>([]) - 1 - 1",
    "return count<Item>(xs) + 1 + 1 // done",
    "return 1 + count<Item>(xs) + 1 + 1",
    "return count<Item>\n(xs) + 1 + 1",
    "return count<Item>(xs).toString() + 1 + 1",
    "return [count<Item>(xs) + 1 + 1]",
    "r = count<Item>(xs) + 1 + 1\nreturn r",
    "const y = count<Item>(xs) + 1 + 1\nreturn y",
    "count<Item>(xs) + 1 + 1",
]
COMPARISONS = [
    "return a < b && c > d",
    "return a < b && c > (d)",
    "return a < b || c > (d) + 1 + 1",
    "return a < b > c",
    "return (a < b) > (c)",
    "return (a < b) > (c) + 1 + 1",
    "return a < b == c > d",
    "return [a < b, c > (d)]",
    "return a < b ? c > (d) : 0",
]
SUFFIXES = ["", ";", "\n", " ", "\n// end"]
SOURCES = [HEAD + line + suffix for line in CALLS + COMPARISONS for suffix in SUFFIXES]


@pytest.fixture(scope="module")
def typescript() -> dict[str, tuple[str, object]]:
    outputs = _transpile(SOURCES)
    expected = {}
    for source, output in zip(SOURCES, outputs, strict=True):
        assert not output["diagnostics"], source
        expected[source] = _outcome(output["js"].replace("export {};", "").rstrip().rstrip(";"))
    return expected


@pytest.mark.parametrize("source", SOURCES, ids=[repr(s[len(HEAD) :]) for s in SOURCES])
def test_runs_as_typescript_or_is_refused(
    source: str, typescript: dict[str, tuple[str, object]]
) -> None:
    try:
        program = compile_ts(source)
    except CompileFailure as exc:
        assert exc.diagnostic.code is ErrorCode.UNSUPPORTED_SYNTAX
        assert "end the statement with `;`" in exc.diagnostic.message
        assert not any(source.startswith(HEAD + line) for line in COMPARISONS)
        return
    assert _outcome(program.javascript) == typescript[source]


@pytest.mark.parametrize("line", COMPARISONS)
def test_ordinary_comparisons_compile(line: str) -> None:
    for suffix in SUFFIXES:
        compile_ts(HEAD + line + suffix)


def test_the_refusal_points_at_the_type_arguments() -> None:
    diagnostic = failure(HEAD + "return count<Item>(xs) + 1 + 1")
    assert (diagnostic.location.line, diagnostic.location.column) == (5, 13)
    assert "`(a < b) > (c)`" in diagnostic.message
