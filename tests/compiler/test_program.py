"""The compiled program: wrapper shape, positions an engine reports, limits, determinism."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import quickjs
from benchmarks.bench_compiler import realistic_script

from codemodekit.compiler.compile import CodeCompiler, user_location
from codemodekit.errors import CompileFailure, ErrorCode, Location
from tests.compiler.jsrun import (
    JsError,
    assert_positions_preserved,
    body_of,
    compile_ts,
    failure,
    run_js,
    run_ts,
    stack_position,
)


def test_program_is_one_promise_expression_over_the_source() -> None:
    source = "const a: number = 1;\nreturn a"
    program = compile_ts(source)
    assert program.source == source
    assert program.line_offset == 1
    assert program.javascript.startswith("(async () => {\n")
    assert body_of(program) == "const a         = 1;\nreturn a"
    ctx = quickjs.Context()
    assert ctx.eval(f"({program.javascript}) instanceof Promise") is True


def test_user_line_n_is_javascript_line_n_plus_offset() -> None:
    source = "const a = 1;\n\nconst b: string = 'x';\nreturn b"
    program = compile_ts(source)
    js_lines = program.javascript.split("\n")
    for number, line in enumerate(source.split("\n"), start=1):
        assert len(js_lines[number + program.line_offset - 1]) == len(line)


@pytest.mark.parametrize(
    "source",
    [
        # Code after the last line: a trailing comment must not swallow the wrapper's tail.
        "return 1 // done",
        "return 1 /* done */",
        "return 1\n// done",
        "return 1 // done\r",
        "return 1 // done })(); (async () => {",
    ],
)
def test_trailing_comments_do_not_swallow_the_wrapper(source: str) -> None:
    assert run_ts(source) == 1


BREAKOUTS = [
    "}); (async () => {",
    "})(); globalThis.escaped = 1; (async () => {",
    "}\n)(); globalThis.escaped = 1; (async () => {",
    "return 1 })(); (() => {",
    "/*",
    "*/ })(); globalThis.escaped = 1; (async () => { /*",
    "`",
    "'",
    "x = a <!--{\n})(); globalThis.escaped = 1; (async () => {",
    "x = 1\n--> })(); globalThis.escaped = 1; (async () => {",
    "/* \n */ --> })(); globalThis.escaped = 1; (async () => {",
    "x = 1 // \u2028 })(); globalThis.escaped = 1; (async () => {",
    "x = 1 // \u2029 })(); globalThis.escaped = 1; (async () => {",
    "x = 1 // \r })(); globalThis.escaped = 1; (async () => {",
    "return 1 \\",
    "return `${",
    "return /[/",
]


@pytest.mark.parametrize("source", BREAKOUTS)
def test_code_cannot_break_out_of_the_function_body(source: str) -> None:
    try:
        program = compile_ts(source)
    except CompileFailure as exc:
        assert exc.diagnostic.code in (ErrorCode.COMPILE_ERROR, ErrorCode.UNSUPPORTED_SYNTAX)
        return
    _assert_single_promise(program.javascript)


def _assert_single_promise(javascript: str) -> None:
    """The engine either rejects the program or reads it as exactly one async call."""
    ctx = quickjs.Context()
    ctx.set_time_limit(2)
    try:
        ctx.eval("globalThis.__r = " + javascript)
    except quickjs.JSException as exc:
        assert "SyntaxError" in str(exc) or "Error" in str(exc)
        assert ctx.eval("globalThis.escaped") is None
        return
    assert ctx.eval("__r instanceof Promise") is True
    assert ctx.eval("globalThis.escaped") is None


def test_randomised_breakout_attempts() -> None:
    pieces = [
        "}", ")", "(", "{", "})()", "(async () => {", "//", "/*", "*/", "'", '"', "`", "${",
        "/", "\n", "\r", "\u2028", ";", "x", "<!--", "-->", "return", "<T>", ": T", " as T",
        "=>", "\\", "[", "]", " ", "1",
    ]  # fmt: skip
    rng = random.Random(1234)
    compiled = 0
    for _ in range(3000):
        source = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        try:
            program = compile_ts(source)
        except CompileFailure:
            continue
        compiled += 1
        _assert_single_promise(program.javascript)
    assert compiled > 50


def _engine_location(source: str) -> Location | None:
    program = compile_ts(source)
    with pytest.raises(JsError) as caught:
        run_js(program.javascript)
    line, column = stack_position(caught.value.stack)
    return user_location(program, line, column)


def test_engine_positions_map_back_to_user_columns() -> None:
    # QuickJS counts UTF-8 bytes; the compiler's locations count characters. The same code
    # with every non-ASCII character replaced by one ASCII letter must map to the same place.
    template = (
        "type {u} = '{e}';\n"
        "const s: '{e}' | {u} = '{e}'; const o: any = null; const t = '{e}' + o.{u};"
    )
    ascii_location = _engine_location(template.format(u="Uxxxxxx", e="xxx"))
    unicode_location = _engine_location(template.format(u="Ünïcödé", e="é😀日"))
    assert ascii_location is not None and ascii_location.line == 2
    assert unicode_location == ascii_location
    line = template.format(u="Uxxxxxx", e="xxx").split("\n")[1]
    assert line.index("o.U") < ascii_location.column <= len(line)


def test_engine_positions_in_the_wrapper_map_to_nothing() -> None:
    program = compile_ts("return 1")
    assert user_location(program, 1, 5) is None
    assert user_location(program, 3, 1) is None
    assert user_location(program, 2, 1) == Location(1, 1)


def test_engine_syntax_error_maps_back() -> None:
    # tree-sitter accepts `break` outside a loop; QuickJS reports it and the position maps.
    program = compile_ts("const ü = 1;\n  break;")
    with pytest.raises(quickjs.JSException) as caught:
        quickjs.Context().eval(program.javascript)
    line, column = stack_position(str(caught.value))
    location = user_location(program, line, column)
    assert location is not None and location.line == 2


def test_source_size_limit_counts_utf8_bytes_before_parsing() -> None:
    compiler = CodeCompiler()
    compiler.compile("return 1", max_source_bytes=8)
    diagnostic = failure("return 12", limit=8)
    assert diagnostic.code is ErrorCode.SOURCE_TOO_LARGE
    assert "9 bytes" in diagnostic.message and "8 bytes" in diagnostic.message
    assert diagnostic.location is None
    assert failure("'ééé'", limit=7).code is ErrorCode.SOURCE_TOO_LARGE  # 5 chars, 8 bytes
    # Oversized garbage is refused for its size, not parsed.
    assert failure(")" * 10_000, limit=1000).code is ErrorCode.SOURCE_TOO_LARGE


def test_compilation_is_deterministic_and_thread_safe() -> None:
    script = realistic_script()
    compiler = CodeCompiler()
    first = compiler.compile(script, max_source_bytes=1 << 20)
    with ThreadPoolExecutor(max_workers=8) as pool:
        outputs = list(
            pool.map(
                lambda _: compiler.compile(script, max_source_bytes=1 << 20).javascript, range(64)
            )
        )
    assert set(outputs) == {first.javascript}
    assert CodeCompiler().compile(script, max_source_bytes=1 << 20) == first


def test_realistic_script_compiles_to_valid_javascript() -> None:
    script = realistic_script()
    program = compile_ts(script)
    assert_positions_preserved(script, program)  # types erased in place, nothing moved
    assert ": number" not in body_of(program) and "interface " not in body_of(program)
    ctx = quickjs.Context()
    # Parse without running: wrap in a function that is never called.
    assert ctx.eval(f"typeof (() => {program.javascript})") == "function"


def test_parse_budget_bounds_adversarial_input_and_the_compiler_recovers() -> None:
    compiler = CodeCompiler(parse_budget_ms=1)
    with pytest.raises(CompileFailure) as caught:
        compiler.compile("`" + "${" * 30_000, max_source_bytes=1 << 20)
    assert caught.value.diagnostic.code is ErrorCode.COMPILE_ERROR
    assert "could not be parsed within 1 ms" in caught.value.diagnostic.message
    assert compiler.compile("return 1", max_source_bytes=100).javascript.endswith("})()")


def test_parse_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="parse_budget_ms"):
        CodeCompiler(parse_budget_ms=0)


def test_unbalanced_input_at_the_root_is_located() -> None:
    diagnostic = failure("(" * 5000)
    assert diagnostic.code is ErrorCode.COMPILE_ERROR
    assert diagnostic.location is not None
    assert "never closed" in diagnostic.message
