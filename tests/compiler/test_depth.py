"""Deeply nested code is refused at a bound instead of sending tree-sitter's query engine
into minutes of work (it turns superlinear past 65,535 levels)."""

from __future__ import annotations

import pytest

from codemodekit.compiler.compile import MAX_NESTING, CodeCompiler
from codemodekit.errors import CompileFailure, ErrorCode

SHAPES = {
    "non-null chain": lambda n: "const x: any = 1;\nreturn x" + "!" * n + ";",
    "as chain": lambda n: "const x: any = 1;\nreturn x" + " as any" * n + ";",
    "parentheses": lambda n: "return " + "(" * n + "1" + ")" * n + ";",
    "arrays": lambda n: "return " + "[" * n + "]" * n + ";",
    "member chain": lambda n: "const x: any = {};\nreturn x" + ".a" * n + ";",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_code_nested_past_the_bound_is_a_compile_error(shape: str) -> None:
    source = SHAPES[shape](MAX_NESTING * 2)
    with pytest.raises(CompileFailure) as caught:
        CodeCompiler().compile(source, max_source_bytes=1 << 20)
    diagnostic = caught.value.diagnostic
    assert diagnostic.code == ErrorCode.COMPILE_ERROR
    assert f"more than {MAX_NESTING} levels deep" in diagnostic.message
    assert diagnostic.location is not None


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_code_nested_within_the_bound_compiles(shape: str) -> None:
    program = CodeCompiler().compile(SHAPES[shape](MAX_NESTING // 4), max_source_bytes=1 << 20)
    assert program.javascript
