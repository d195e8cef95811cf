"""Uncaught exceptions: "Name: message" at the user's own line and column."""

from __future__ import annotations

from codemodekit.errors import ErrorCode
from codemodekit.sandbox.base import CodeSandbox, CompiledProgram
from tests.conformance.sandbox.harness import code_of, run


async def test_uncaught_error_has_name_message_and_user_location(sandbox: CodeSandbox) -> None:
    code = "const a = 1;\nfunction boom() {\n  throw new TypeError('bad ' + a);\n}\nboom();"
    outcome = await run(sandbox, code)
    assert code_of(outcome) is ErrorCode.UNCAUGHT_EXCEPTION
    assert outcome.diagnostic is not None
    assert outcome.diagnostic.message == "TypeError: bad 1"
    # The column is the engine's choice within the throwing statement (QuickJS: the call).
    location = outcome.diagnostic.location
    assert location is not None and location.line == 3
    assert 3 <= location.column <= len("  throw new TypeError('bad ' + a);")


async def test_error_after_await_keeps_its_location(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "await null;\n\n  null.x")
    assert outcome.diagnostic is not None
    assert outcome.diagnostic.message.startswith("TypeError:")
    assert outcome.diagnostic.location is not None
    assert outcome.diagnostic.location.line == 3


async def test_thrown_non_errors(sandbox: CodeSandbox) -> None:
    plain = await run(sandbox, "throw 'plain text'")
    assert plain.diagnostic is not None and plain.diagnostic.message == "Uncaught plain text"
    obj = await run(sandbox, "throw { reason: 'x' }")
    assert obj.diagnostic is not None and obj.diagnostic.message == 'Uncaught {"reason":"x"}'
    custom = await run(
        sandbox,
        "class MyError extends Error { constructor(m) { super(m); this.name = 'MyError' } }\n"
        "throw new MyError('custom')",
    )
    assert custom.diagnostic is not None
    assert custom.diagnostic.message == "MyError: custom"
    assert custom.diagnostic.location is not None
    # Where the Error object was made: the subclass constructor or the throw statement.
    assert custom.diagnostic.location.line in (1, 2)


async def test_caught_errors_do_not_fail_the_run(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "try { null.x } catch (e) { return e instanceof TypeError }")
    assert outcome.ok and outcome.value is True


async def test_hostile_getters_on_thrown_values_are_bounded(sandbox: CodeSandbox) -> None:
    code = "throw { get name() { for (;;) {} }, toString() { for (;;) {} } }"
    outcome = await run(sandbox, code, compute_time_ms=200)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT
    assert (await run(sandbox, "return 2")).value == 2


async def test_engine_syntax_error_is_a_compile_error(sandbox: CodeSandbox) -> None:
    # Built by hand: the compiler would reject this first, the sandbox must still hold.
    program = CompiledProgram("(async () => {\nlet x = ;\n})()", 1, "let x = ;")
    outcome = await run(sandbox, program)
    assert code_of(outcome) is ErrorCode.COMPILE_ERROR
    assert outcome.diagnostic is not None and outcome.diagnostic.location is not None
    assert outcome.diagnostic.location.line == 1


async def test_program_that_escapes_its_wrapper_cannot_hang_the_host(sandbox: CodeSandbox) -> None:
    source = "}); throw { toString() { for (;;) {} } }; (async () => {"
    program = CompiledProgram("(async () => {\n" + source + "\n})()", 1, source)
    outcome = await run(sandbox, program, compute_time_ms=200)
    assert not outcome.ok
    assert (await run(sandbox, "return 3")).value == 3


async def test_columns_count_characters_not_bytes(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "const s = 'éé😀'; null.x")
    assert outcome.diagnostic is not None and outcome.diagnostic.location is not None
    assert outcome.diagnostic.location.column == "const s = 'éé😀'; null.x".index("null") + 1
