"""Syntax errors: COMPILE_ERROR, first error only, readable, at the user's line and column."""

from __future__ import annotations

import pytest

from codemodekit.errors import ErrorCode, Location, Phase
from tests.compiler.jsrun import failure

# (id, code, line, column, message)
ERRORS: list[tuple[str, str, int, int, str]] = [
    ("unclosed_call", "const a = 1;\nf(a, 2", 2, 2, "missing `)`: the `(` here is never closed"),
    (
        "unclosed_object",
        "const o = {\n  a: 1,\n",
        1,
        11,
        "missing `}`: the `{` here is never closed",
    ),
    ("unclosed_array", "x = [1, 2", 1, 5, "missing `]`: the `[` here is never closed"),
    ("unclosed_block", "if (a) {\n  b()\n", 2, 6, "missing `}`"),
    ("missing_paren", "if (x { y }", 1, 6, "missing `)`"),
    ("stray_paren", "const a = 1;\na)", 2, 2, "unexpected `)`"),
    ("stray_brace", "return 1\n}", 2, 1, "unexpected `}`"),
    ("mismatched_bracket", "f(a, b]", 1, 7, "unexpected `]`"),
    ("two_identifiers", "foo bar", 1, 5, "unexpected `bar`"),
    ("bad_binding", "let 5 = 3", 1, 5, "unexpected `5`"),
    ("missing_argument_separator", "a.b(c d)", 1, 7, "unexpected `d`"),
    ("empty_annotation", "let x: = 5", 1, 8, "unexpected `=`"),
    ("missing_initializer", "const x: number = ;", 1, 19, "expected an expression after `=`"),
    ("missing_operand", "const y = [1 + ]", 1, 15, "missing an expression"),
    (
        "missing_operand_before_semicolon",
        "const y = 1 + ;",
        1,
        15,
        "expected an expression after `+`",
    ),
    ("missing_condition", "if () {}", 1, 5, "missing an expression"),
    ("unterminated_string", "const s = 'abc\nreturn s", 1, 11, "unterminated string"),
    ("unterminated_double_string", 'x = "abc', 1, 5, "unterminated string"),
    ("unterminated_template", "x = `abc", 1, 5, "unterminated template string"),
    ("unterminated_comment", "const a = 1;\n/* never closed", 2, 1, "unterminated comment"),
    ("unterminated_substitution", "x = `a${b`", 1, 7, "missing `}`: the `${` here is never closed"),
    (
        "incomplete_expression",
        "let x = 1\nlet y = 2 +\n",
        2,
        11,
        "ends in the middle of a statement",
    ),
    ("await_without_operand", "async function f() { await }", 1, 22, "unexpected `await`"),
    ("wrapper_breakout", "}); (async () => {", 1, 1, "unexpected `}`"),
    ("non_ascii_line", "const é = '日本語'; foo bar", 1, 22, "unexpected `bar`"),
]


@pytest.mark.parametrize(
    ("source", "line", "column", "message"),
    [c[1:] for c in ERRORS],
    ids=[c[0] for c in ERRORS],
)
def test_syntax_error_location_and_message(
    source: str, line: int, column: int, message: str
) -> None:
    diagnostic = failure(source)
    assert diagnostic.code is ErrorCode.COMPILE_ERROR
    assert diagnostic.phase is Phase.COMPILE
    assert diagnostic.location == Location(line, column)
    assert message in diagnostic.message


def test_only_the_first_error_is_reported() -> None:
    diagnostic = failure("const a = 1;\nfoo bar\nbaz qux\n)")
    assert diagnostic.location == Location(2, 5)
    assert "qux" not in diagnostic.message


def test_message_is_bounded() -> None:
    long_name = "x" * 5000
    diagnostic = failure(f"foo {long_name}")
    assert len(diagnostic.message) < 100


def test_lines_count_every_javascript_line_terminator() -> None:
    # CR, CRLF, LF, U+2028 and U+2029 each end a line for JavaScript (and for QuickJS).
    assert failure("a = 1\r\nb = 2\rc = 3\u2028d = 4\u2029e = )").location == Location(5, 5)


def test_error_inside_a_deep_nesting_is_found() -> None:
    source = "if (a) {\n" * 50 + "  foo bar\n" + "}\n" * 50
    assert failure(source).location == Location(51, 7)


def test_unpaired_surrogate_is_a_compile_error() -> None:
    diagnostic = failure("const a = 1;\nconst s = '\ud800';")
    assert diagnostic.code is ErrorCode.COMPILE_ERROR
    assert diagnostic.location == Location(2, 12)
