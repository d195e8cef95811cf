"""Type erasure: every construct compiles to JavaScript that runs and keeps every position."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compiler.jsrun import body_of, compile_ts, run_ts

CASES: list[tuple[str, str, Any]] = [
    ("annotations", "const x: number = 1; let y: string | null = 'a'; return [x, y]", [1, "a"]),
    (
        "interface",
        "interface User {\n  id: number;\n  tags?: readonly string[];\n}\n"
        "const u: User = { id: 3 };\nreturn u.id",
        3,
    ),
    (
        "type_alias",
        "type Pair<A, B> = [A, B];\ntype Key = keyof { a: 1 };\nconst p: Pair<number, Key> = [1, 'a'];\n"
        "return p",
        [1, "a"],
    ),
    (
        "generic_function",
        "function first<T extends { id: number }>(xs: T[]): T | undefined { return xs[0] }\n"
        "return first<{ id: number }>([{ id: 7 }])!.id",
        7,
    ),
    (
        "generic_call_and_new",
        "const m = new Map<string, number>();\nm.set('a', 1);\n"
        "const s = new Set<number>([1, 2, 2]);\nreturn [m.get('a'), s.size]",
        [1, 2],
    ),
    (
        "instantiation_expression",
        "function id<T>(x: T): T { return x }\nconst idNum = id<number>;\nreturn idNum(4)",
        4,
    ),
    ("as_expression", "const v = JSON.parse('{\"a\": 2}') as { a: number };\nreturn v.a", 2),
    ("as_const", "const v = [1, 2] as const;\nreturn v.length", 2),
    ("as_in_parens_member", "const o: unknown = { y: 5 };\nreturn (o as any).y", 5),
    ("double_as", "const o = 'x' as unknown as number;\nreturn o", "x"),
    ("satisfies", "const c = { port: 80 } satisfies { port: number };\nreturn c.port", 80),
    (
        "non_null",
        "const a: { b?: { c: number } } = { b: { c: 9 } };\nreturn a!.b!.c + a.b?.c!",
        18,
    ),
    ("non_null_call", "const f: (() => number) | undefined = () => 3;\nreturn f!()", 3),
    ("definite_assignment", "let x!: number;\nx = 4;\nreturn x", 4),
    (
        "optional_params",
        "function f(a: number, b?: number, ...rest: number[]): number {\n"
        "  return a + (b ?? 0) + rest.length\n}\nreturn [f(1), f(1, 2, 3, 4)]",
        [1, 5],
    ),
    (
        "this_parameter",
        "function name(this: { n: string }, suffix?: string): string { return this.n + (suffix ?? '') }\n"
        "function only(this: { n: string } /* c */, ) { return this.n }\n"
        "return [name.call({ n: 'a' }, '!'), only.call({ n: 'b' })]",
        ["a!", "b"],
    ),
    (
        "arrow_types",
        "const add = (a: number, b: number): number => a + b;\n"
        "const gen = <T,>(x: T): T[] => [x];\n"
        "const gen2 = async <T extends string>(x: T): Promise<T> => x;\n"
        "return [add(1, 2), gen(3), await gen2('z')]",
        [3, [3], "z"],
    ),
    (
        "type_assertion_prefix",
        "const v = <number>(<unknown>'5');\nreturn <string>v + '!'",
        "5!",
    ),
    (
        "type_predicate",
        "function isStr(x: unknown): x is string { return typeof x === 'string' }\n"
        "function check(x: unknown): asserts x is number { if (typeof x !== 'number') throw 1 }\n"
        "function ok(x: unknown): asserts x { if (!x) throw 2 }\n"
        "check(1); ok(true);\nreturn [isStr('a'), isStr(1)]",
        [True, False],
    ),
    (
        "overloads",
        "function f(x: string): string;\nfunction f(x: number): number;\n"
        "function f(x: any): any { return x }\nreturn [f('a'), f(1)]",
        ["a", 1],
    ),
    (
        "declare",
        "declare const injected: number;\ndeclare function g(): void;\n"
        "declare namespace NS { const x: number }\ndeclare enum E { A }\ndeclare global { var q: number }\n"
        "return typeof injected",
        "undefined",
    ),
    (
        "import_type",
        "import type { Foo } from './foo';\nimport { type Bar, type Baz } from 'bar';\n"
        "const x: Foo | Bar | Baz = 1 as any;\nreturn x",
        1,
    ),
    (
        "class_members",
        "abstract class Base<T> implements Iterable<T> {\n"
        "  private readonly items: T[] = [];\n"
        "  protected count?: number;\n"
        "  declare tag: string;\n"
        "  public static override readonly kind: string = 'base';\n"
        "  [key: string]: any;\n"
        "  abstract describe(): string;\n"
        "  abstract label: string;\n"
        "  add(item: T): this { this.items.push(item); return this }\n"
        "  get size(): number { return this.items.length }\n"
        "  opt?(): void {}\n"
        "  *[Symbol.iterator](): Iterator<T> { yield* this.items }\n"
        "}\n"
        "class Impl extends Base<number> {\n"
        "  label = 'impl';\n"
        "  override describe(): string { return `${this.label}:${this.size}` }\n"
        "}\n"
        "const i = new Impl().add(1).add(2);\n"
        "return [i.describe(), [...i], 'tag' in i, Object.keys(i).sort(), typeof i.opt]",
        ["impl:2", [1, 2], False, ["count", "items", "label"], "function"],
    ),
    (
        "class_method_overloads",
        "class C {\n  m(x: string): string;\n  m(x: number): number;\n  m(x: any) { return x }\n}\n"
        "return new C().m(2)",
        2,
    ),
    (
        "class_expression_implements",
        "interface I { v(): number }\nconst K = class implements I { v() { return 6 } };\n"
        "return new K().v()",
        6,
    ),
    (
        "unique_symbol_keyof_typeof",
        "const sym: unique symbol = Symbol('s') as any;\nconst conf = { a: 1, b: 2 };\n"
        "type K = keyof typeof conf;\nconst k: K = 'b';\nreturn conf[k]",
        2,
    ),
    (
        "catch_clause_type",
        "try { throw new Error('boom') } catch (e: unknown) { return (e as Error).message }",
        "boom",
    ),
    (
        "object_methods",
        "const o = {\n  twice(x: number): number { return x * 2 },\n  get v(): number { return 1 },\n};\n"
        "return o.twice(o.v)",
        2,
    ),
    (
        "hash_bang",
        "#!/usr/bin/env codemode\nreturn 1",
        1,
    ),
    (
        "multiline_types",
        "const cfg: {\n  a: number;\n  b: string;\n} = {\n  a: 1,\n  b: 'x',\n};\n"
        "function f<\n  T,\n>(x: T): T {\n  return x\n}\nreturn f(cfg).a",
        1,
    ),
    ("comments_in_types", "let x: /* c */ number /* d */ = 1;\nreturn x", 1),
    (
        "non_ascii_in_types",
        "type Greeting = 'héllo' | '😀';\nconst g: Greeting = '😀';\nconst m: { 'ключ': 'é' } = { 'ключ': 'é' };\n"
        "return [g, m['ключ']]",
        ["😀", "é"],
    ),
    (
        "tagged_template",
        "function tag(s: TemplateStringsArray) { return s[0] }\nreturn tag`hi`",
        "hi",
    ),
    (
        "tools_calls",
        "type R = { content: unknown[]; structuredContent?: { tool: string } };\n"
        "const r: R = await tools.github.searchIssues({ query: 'x' });\n"
        "const d = await tools['deployment-api'].deploy({ id: 1 }) as R;\n"
        "return [r.structuredContent!.tool, d.structuredContent?.tool]",
        ["searchIssues", "deploy"],
    ),
]


@pytest.mark.parametrize(("source", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_erased_code_runs_and_keeps_positions(source: str, expected: Any) -> None:
    assert run_ts(source) == expected


def test_erased_text_is_blank_and_the_rest_is_verbatim() -> None:
    source = "let a: Map<string, number> = new Map<string, number>();\nreturn a.size as number"
    assert body_of(compile_ts(source)) == (
        "let a                      = new Map                ();\nreturn a.size          "
    )


def test_class_modifiers_are_blanked() -> None:
    source = "class A {\n  private readonly x?: number = 1;\n  protected override m(): void {}\n}"
    assert body_of(compile_ts(source)) == (
        "class A {\n                   x          = 1;\n                     m()       {}\n}"
    )


def test_abstract_class_modifier_is_blanked() -> None:
    assert body_of(compile_ts("abstract class A {}")) == "         class A {}"


def test_plain_javascript_is_unchanged() -> None:
    source = "const a = [1, 2].map(x => x < 2 ? x : -x);\n// done\nreturn a"
    assert body_of(compile_ts(source)) == source
    assert run_ts(source) == [1, -2]
