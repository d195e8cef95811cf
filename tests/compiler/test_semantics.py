"""Erasure must not change what the code means: ASI, restricted productions, precedence."""

from __future__ import annotations

from typing import Any

import pytest

from codemodekit.errors import ErrorCode, Location
from tests.compiler.jsrun import body_of, compile_ts, failure, run_ts

# (id, TypeScript, the value TypeScript's own output returns)
CASES: list[tuple[str, str, Any]] = [
    (
        "return_assertion_line_break",
        "const x = 5;\nreturn <number>\nx",
        5,
    ),
    (
        "return_assertion_line_break_binary",
        "const x = 5;\nreturn <number>\nx + 1",
        6,
    ),
    (
        "throw_assertion_line_break",
        "try {\n  throw <Error>\n  new Error('e')\n} catch (e) {\n  return (e as Error).message\n}",
        "e",
    ),
    (
        "return_generic_arrow_line_break",
        "const f = (() => {\n  return <T,>\n  (x: T) => x\n})();\nreturn typeof f",
        "function",
    ),
    (
        "as_then_parenthesis_on_next_line",
        "const calls: string[] = [];\nconst x: any = () => calls.push('called');\n"
        "let y = 1\nx as any\n(y)\nreturn calls.length",
        0,
    ),
    (
        "array_annotation_then_bracket_on_next_line",
        "const seen: number[] = [];\nlet a: number[]\n[1].forEach(v => seen.push(v))\nreturn seen",
        [1],
    ),
    (
        "annotation_then_parenthesis_on_next_line",
        "let z = 0;\nlet x: number\n(z = 3)\nreturn [x, z]",
        [None, 3],
    ),
    (
        "annotation_comment_then_parenthesis",
        "let z = 0;\nlet x: number // why\n(z = 3)\nreturn [x, z]",
        [None, 3],
    ),
    (
        "interface_between_statements",
        "const b = (v: number) => v * 2;\nconst c = 4;\nconst a = b\ninterface X { y: number }\n(c)\n"
        "return typeof a",
        "function",
    ),
    (
        "type_alias_between_statements",
        "const b = 1;\nlet a = b\ntype T = number\n[2].forEach(() => {})\nreturn a",
        1,
    ),
    (
        "class_field_annotation_then_computed_method",
        "const k = 'm';\nclass A {\n  x: number\n  [k]() { return 'method' }\n}\nreturn new A()[k]()",
        "method",
    ),
    (
        "class_field_annotation_comment_then_computed_method",
        "const k = 'm';\nclass A {\n  x: number // c\n  [k]() { return 'method' }\n}\n"
        "return Object.keys(new A())",
        ["x"],
    ),
    (
        "declare_field_between_members",
        "class A {\n  a = 1\n  declare b: number\n  ['c']() { return 3 }\n}\nreturn new A().c()",
        3,
    ),
    (
        "overload_then_parenthesized",
        "function f(x: number): number\nfunction f(x: any) { return x }\nreturn f(2)",
        2,
    ),
    ("as_in_parentheses_then_member", "const o: unknown = { y: 5 };\nreturn (o as any).y", 5),
    ("non_null_then_member", "const a = { b: 2 } as { b?: number };\nreturn a!.b! + 1", 3),
    (
        "non_null_then_call_on_next_line",
        "const a = (v: number) => v + 1;\nconst r = a!\n(1)\nreturn r",
        2,
    ),
    (
        "generic_call_across_lines",
        "function f<T>(x: T) { return [x] }\nconst r = f<number>\n(1)\nreturn r",
        [1],
    ),
    (
        "definite_assignment_then_parenthesis",
        "let z = 0;\nlet x!: number\n(z = 2)\nreturn z",
        2,
    ),
    ("return_type_on_same_line", "const f = (x: number): number => x + 1;\nreturn f(1)", 2),
    (
        "comparison_not_generic",
        "const a = 1, b = 2, c = 3;\nreturn [a < b, b > c, a < b && b > a]",
        [True, False, True],
    ),
    ("goes_to_operator", "let x = 3, n = 0;\nwhile (x --> 0) n++;\nreturn n", 3),
    ("optional_chain_non_null", "const a: any = { b: { c: 1 } };\nreturn a?.b!.c", 1),
    (
        "as_expression_precedence",
        "const v = 1 + 2 as number;\nconst w = (3 as number) * 2;\nreturn [v, w]",
        [3, 6],
    ),
    ("last_expression_is_not_returned", "1 + 1", None),
    ("reaching_the_end_returns_undefined", "const x = 1;\nif (x > 5) return 'big'", None),
    ("top_level_await", "const v = await new Promise(r => r(3));\nreturn v", 3),
    ("trailing_line_comment", "return 7 // the answer", 7),
    ("trailing_comment_without_newline", "const a = 1\n// end", None),
    ("crlf_line_endings", "const a: number = 1;\r\nconst b: number = 2;\r\nreturn a + b", 3),
]


@pytest.mark.parametrize(("source", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_meaning_is_preserved(source: str, expected: Any) -> None:
    assert run_ts(source) == expected


def test_return_assertion_line_break_is_written_as_a_comma_expression() -> None:
    # `return <T>` + newline would return undefined once blanked; `0 ,` keeps the operand.
    assert body_of(compile_ts("return <T>\nx")) == "return 0 ,\nx"


def test_statement_ending_in_types_gets_its_semicolon() -> None:
    assert body_of(compile_ts("let x: T\n(y)")) == "let x;  \n(y)"
    assert body_of(compile_ts("x as any\n(y)")) == "x ;     \n(y)"


def test_erased_statement_keeps_a_statement_boundary() -> None:
    assert body_of(compile_ts("a = b\ninterface I {}\n(c)")) == "a = b\n;             \n(c)"


@pytest.mark.parametrize(
    ("source", "line", "column"),
    [
        # tree-sitter reads these differently from TypeScript; refusing beats a silent change.
        ("const x = [10];\nx satisfies number[]\n[1].forEach(v => v)", 3, 1),
        ("let a: Array\n<number>b", 2, 9),
        ("const x: any = 1;\nconst r = x as any\n`t`", 2, 11),
    ],
)
def test_readings_that_differ_from_typescript_fail_loudly(
    source: str, line: int, column: int
) -> None:
    diagnostic = failure(source)
    assert diagnostic.code is ErrorCode.COMPILE_ERROR
    assert diagnostic.location == Location(line, column)
