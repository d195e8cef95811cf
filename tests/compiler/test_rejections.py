"""Constructs that need code generation or a module system: UNSUPPORTED_SYNTAX, exact place."""

from __future__ import annotations

import pytest

from codemodekit.errors import ErrorCode, Location, Phase
from tests.compiler.jsrun import body_of, compile_ts, failure, run_ts

# (id, code, line, column, words the message must contain)
UNSUPPORTED: list[tuple[str, str, int, int, str]] = [
    ("enum", "const a = 1;\nenum Color { Red, Green }", 2, 1, "const object"),
    ("const_enum", "const a = 1;\n  const enum E { A = 1 }", 2, 3, "enums are not supported"),
    ("namespace", "namespace N {\n  export const x = 1\n}", 1, 1, "namespaces"),
    ("module_declaration", "let v = 1;\nmodule M { }", 2, 1, "module declarations"),
    ("nested_namespace", "function f() {\n  namespace Inner {}\n}", 2, 3, "namespaces"),
    ("import_alias", "import x = N.y;", 1, 1, "const x"),
    (
        "parameter_property",
        "class P {\n  constructor(private readonly x: number) {}\n}",
        2,
        15,
        "parameter properties",
    ),
    ("parameter_property_readonly", "class P { constructor(readonly x) {} }", 1, 23, "parameter"),
    (
        "parameter_property_public_optional",
        "class P { constructor(public x?: number) {} }",
        1,
        23,
        "parameter",
    ),
    ("class_decorator", "const d = (c: any) => c;\n@d\nclass A {}", 2, 1, "decorators"),
    ("member_decorator", "class A {\n  @log m() {}\n}", 2, 3, "decorators"),
    ("parameter_decorator", "class A { m(@inject x: number) {} }", 1, 13, "decorators"),
    ("import_default", "import fs from 'fs';\nreturn 1", 1, 1, "imports are not supported"),
    ("import_side_effect", "const a = 1;\nimport 'polyfill';", 2, 1, "imports"),
    ("import_mixed_type", "import { type A, b } from 'm';", 1, 1, "imports"),
    ("import_require", "import fs = require('fs');", 1, 1, "imports"),
    ("export_const", "export const a = 1;", 1, 1, "return"),
    ("export_default", "const a = 1;\nexport default a;", 2, 1, "exports"),
    ("export_type", "export type T = number;", 1, 1, "exports"),
    ("export_list", "const a = 1;\nexport { a };", 2, 1, "exports"),
    ("dynamic_import", "const m = await import('node:fs');", 1, 17, "import()"),
    ("require", "const fs = require('fs');", 1, 12, "require"),
    ("require_nested", "function f() {\n  return [require('x')]\n}", 2, 11, "require"),
    ("import_meta", "const u = import.meta.url;", 1, 11, "import.meta"),
    ("html_open_comment", "const a = 1, b = 2;\nconst r = a <!-- b\nreturn r", 2, 13, "HTML-like"),
    ("html_close_comment", "const a = 1;\n  --> note\nreturn a", 2, 3, "HTML-like"),
    (
        "html_close_after_block_comment",
        "let x = 1;\n/* a\n*/ --> 0\nreturn x",
        3,
        4,
        "HTML-like",
    ),
    (
        "generic_tagged_template",
        "const t = (s: any) => s;\nreturn t<number>`x`",
        2,
        9,
        "tagged template",
    ),
    ("jsx_element", "const x = 1;\nreturn <div className='a'>hi</div>", 2, 8, "JSX"),
    ("jsx_self_closing", "const el = <Widget size={2} />;", 1, 12, "JSX"),
    ("yield_type_assertion_line_break", "function* g() {\n  yield <number>\n  1\n}", 2, 3, "yield"),
    ("return_assertion_broken_inside", "const x = 1;\nreturn <\nnumber>x", 2, 1, "return"),
    ("auto_accessor", "class A {\n  accessor x = 1\n}", 2, 3, "getter and a setter"),
    (
        "async_generic_arrow_line_break",
        "const f = async <T>\n(x: T) => x;",
        1,
        11,
        "async <T>",
    ),
    (
        "arrow_return_type_line_break",
        "const f = (x: number):\n  number => x;",
        1,
        22,
        "return type",
    ),
]


@pytest.mark.parametrize(
    ("source", "line", "column", "words"),
    [c[1:] for c in UNSUPPORTED],
    ids=[c[0] for c in UNSUPPORTED],
)
def test_unsupported_syntax_is_refused_at_its_location(
    source: str, line: int, column: int, words: str
) -> None:
    diagnostic = failure(source)
    assert diagnostic.code is ErrorCode.UNSUPPORTED_SYNTAX
    assert diagnostic.phase is Phase.COMPILE
    assert diagnostic.location == Location(line, column)
    assert words in diagnostic.message


def test_the_first_refusal_in_the_code_is_reported() -> None:
    diagnostic = failure("const a = 1;\nnamespace N {}\nenum E { A }\nimport x from 'y';")
    assert diagnostic.location == Location(2, 1)


@pytest.mark.parametrize(
    "source",
    [
        "import type { A } from 'a';\nimport { type B } from 'b';\nreturn 1",
        "declare namespace N { export const x: number }\ndeclare enum E { A }\nreturn 1",
        "declare module 'm' { export function f(): void }\nreturn 1",
    ],
    ids=["import-type", "declare-namespace-enum", "declare-module"],
)
def test_type_only_module_syntax_is_erased_not_refused(source: str) -> None:
    program = compile_ts(source)
    assert body_of(program).strip(" ;\n") == "return 1"  # everything else was types
    assert run_ts(source) == 1


def test_lookalikes_are_not_refused() -> None:
    # `require` as a property, `import` in strings and comments, `-->` as `-- >`.
    source = (
        "const o = { require: (x: string) => x };\nconst r = o.require('a');\n"
        "// import x from 'y'\nconst s = 'export const a = 1; <!-- -->';\n"
        "let x = 3; while (x --> 0) {}\nreturn new.target"
    )
    program = compile_ts(source)
    assert body_of(program) == source.replace(": string", "        ")  # only the type erased
    # The engine reads the lookalikes as what they are (without the last line, which only
    # QuickJS refuses: `new.target` outside a function).
    assert run_ts(source.replace("new.target", "[r, s, x]")) == [
        "a",
        "export const a = 1; <!-- -->",
        -1,
    ]


def test_messages_say_what_to_write_instead() -> None:
    assert "const object" in failure("enum E { A }").message
    assert "tools." in failure("import fs from 'fs'").message
    assert "`return` the value" in failure("export const a = 1").message
    assert (
        "assign it in the constructor" in failure("class A { constructor(private x) {} }").message
    )


def test_location_column_counts_characters_not_bytes() -> None:
    diagnostic = failure("const s = 'héllo wörld 😀'; enum E { A }")
    # 27 characters precede `enum` (28 UTF-16 units, 32 UTF-8 bytes).
    assert diagnostic.location == Location(1, 28)


# Line breaks where TypeScript and a blanked JavaScript (or tree-sitter) would read the code
# differently: refused at the token, so nothing changes meaning silently.
LINE_BREAKS: list[tuple[str, str, ErrorCode, int, int, str]] = [
    ("before_arrow", "const f = ()\n => 1", ErrorCode.COMPILE_ERROR, 2, 2, "before `=>`"),
    (
        "before_return_type",
        "const f = (x: number)\n: number => x",
        ErrorCode.UNSUPPORTED_SYNTAX,
        2,
        1,
        "return type",
    ),
    ("after_let", "let\n x = 1", ErrorCode.COMPILE_ERROR, 1, 1, "`let`"),
    (
        "before_non_null",
        "const a = { b: 1 }\nconst r = a/*\n*/!.b",
        ErrorCode.COMPILE_ERROR,
        3,
        3,
        "non-null `!`",
    ),
    (
        "after_modifier",
        "class A { private/*\n*/ x = 1 }",
        ErrorCode.COMPILE_ERROR,
        1,
        11,
        "after `private`",
    ),
    ("after_type_keyword", "type/*\n*/ T = number", ErrorCode.COMPILE_ERROR, 1, 1, "after `type`"),
    (
        "before_as",
        "const v = 1 + 2/*\n*/ as number",
        ErrorCode.COMPILE_ERROR,
        2,
        4,
        "before `as`",
    ),
]


@pytest.mark.parametrize(
    ("source", "code", "line", "column", "words"),
    [c[1:] for c in LINE_BREAKS],
    ids=[c[0] for c in LINE_BREAKS],
)
def test_meaning_changing_line_breaks_are_refused(
    source: str, code: ErrorCode, line: int, column: int, words: str
) -> None:
    diagnostic = failure(source)
    assert diagnostic.code is code
    assert diagnostic.location == Location(line, column)
    assert words in diagnostic.message


def test_markup_in_strings_is_not_mistaken_for_jsx() -> None:
    diagnostic = failure("const s = '<b>x</b>'; foo bar")
    assert diagnostic.code is ErrorCode.COMPILE_ERROR
    assert diagnostic.location == Location(1, 27)
