"""What the sandbox conformance suite needs: a host double and a one-call runner.

Any ``CodeSandbox`` adapter passes the suite by being added to ``SANDBOXES`` in
``conftest.py`` (or by overriding the ``sandbox`` fixture in a conftest of its own).
"""

from __future__ import annotations

import asyncio
from typing import Any

from codemodekit.catalog.catalog import tool_address
from codemodekit.compiler.compile import CodeCompiler
from codemodekit.errors import Diagnostic, ErrorCode
from codemodekit.limits import Limits
from codemodekit.sandbox.base import CodeSandbox, CompiledProgram, SandboxOutcome, ToolCallRejected


class HostDouble:
    """A ``SandboxHost`` with a few fixed tools; records every call it receives.

    - ``t.echo(args)``: returns ``{"content": [], "structuredContent": args}``
    - ``t.fail(args)``: rejects with ``TOOL_ERROR`` "refused: <args.why>"
    - ``t.wait(args)``: waits until ``release`` is set (or forever), records cancellation
    - ``t.sleep({"s": n})``: sleeps n seconds, returns the echo result
    - anything else: ``TOOL_NOT_FOUND``
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.cancelled = 0
        self.release = asyncio.Event()

    async def call_tool(self, source: str, tool: str, arguments: Any) -> Any:
        self.calls.append((source, tool, arguments))
        address = tool_address(source, tool)
        if tool == "echo":
            return {"content": [], "structuredContent": arguments}
        if tool == "fail":
            why = arguments.get("why", "no reason") if isinstance(arguments, dict) else "?"
            raise ToolCallRejected(
                Diagnostic(
                    ErrorCode.TOOL_ERROR,
                    f"refused: {why}",
                    tool=address,
                    source=source,
                    details=(("upstream_code", "E42"),),
                )
            )
        if tool == "wait":
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return {"content": [], "structuredContent": "released"}
        if tool == "sleep":
            await asyncio.sleep(arguments["s"])
            return {"content": [], "structuredContent": arguments}
        raise ToolCallRejected(
            Diagnostic(ErrorCode.TOOL_NOT_FOUND, f"no tool {address}", tool=address, source=source)
        )


def compile_code(code: str) -> CompiledProgram:
    return CodeCompiler().compile(code, max_source_bytes=Limits().source_bytes)


async def run(
    sandbox: CodeSandbox,
    code: str | CompiledProgram,
    host: HostDouble | None = None,
    **limits: Any,
) -> SandboxOutcome:
    program = compile_code(code) if isinstance(code, str) else code
    return await sandbox.run(program, host or HostDouble(), Limits(**limits))


def code_of(outcome: SandboxOutcome) -> ErrorCode | None:
    return outcome.diagnostic.code if outcome.diagnostic else None
