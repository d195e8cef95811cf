"""TypeScript → JavaScript (placeholder: the execution-core issue replaces the body).

``CodeCompiler().compile(source, max_source_bytes=...) -> CompiledProgram`` or raises
``CompileFailure`` with a ``SOURCE_TOO_LARGE`` / ``COMPILE_ERROR`` / ``UNSUPPORTED_SYNTAX``
diagnostic located in the user's own code.
"""

from __future__ import annotations

from codemodekit.errors import CompileFailure, Diagnostic, ErrorCode
from codemodekit.sandbox.base import CompiledProgram

WRAPPER_HEAD = "(async () => {\n"
WRAPPER_TAIL = "\n})()"


class CodeCompiler:
    def compile(self, source: str, *, max_source_bytes: int) -> CompiledProgram:
        size = len(source.encode("utf-8"))
        if size > max_source_bytes:
            raise CompileFailure(
                Diagnostic(
                    ErrorCode.SOURCE_TOO_LARGE,
                    f"code is {size} bytes; the limit is {max_source_bytes} bytes",
                )
            )
        return CompiledProgram(WRAPPER_HEAD + source + WRAPPER_TAIL, 1, source)
