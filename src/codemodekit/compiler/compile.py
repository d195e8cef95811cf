"""TypeScript → JavaScript by position-preserving type erasure (see docs/adr/0004).

``CodeCompiler().compile(source, max_source_bytes=...)`` returns a ``CompiledProgram`` whose
``javascript`` is one expression evaluating to a Promise: the user's code, with type-only
syntax replaced by spaces, as the body of an async arrow function. Line ``N`` of the user's
code is line ``N + line_offset`` of the JavaScript and columns are unchanged, so engine
positions map back with ``user_location`` and no source map.

Failures raise ``CompileFailure`` with a ``SOURCE_TOO_LARGE``, ``COMPILE_ERROR`` or
``UNSUPPORTED_SYNTAX`` diagnostic located in the user's own code.

Locations are 1-based. Lines are counted the way JavaScript counts them (LF, CR, CRLF,
U+2028, U+2029 each end a line, as QuickJS does); columns count Unicode code points (one per
Python ``str`` character). QuickJS reports UTF-8 byte columns: ``user_location`` converts.
"""

from __future__ import annotations

import json
import threading
import time

import tree_sitter as ts

from codemodekit.compiler.calls import plan_direct_calls, site_table
from codemodekit.compiler.ending import ends_in_expression
from codemodekit.compiler.erase import plan_erasure, render
from codemodekit.compiler.location import LINE_BREAK, user_location
from codemodekit.compiler.query import LANGUAGE
from codemodekit.compiler.size import _check_size, check_source_size
from codemodekit.compiler.sources import referenced_sources
from codemodekit.compiler.syntax import first_syntax_error
from codemodekit.errors import CompileFailure, Diagnostic, ErrorCode, Location
from codemodekit.sandbox.base import CompiledProgram

__all__ = [
    "WRAPPER_HEAD",
    "WRAPPER_TAIL",
    "CodeCompiler",
    "check_source_size",
    "location_at",
    "user_location",
]

WRAPPER_HEAD = "(async () => {\n"
# The tail starts on its own line so a trailing `// comment` cannot swallow it.
WRAPPER_TAIL = "\n})()"
LINE_OFFSET = WRAPPER_HEAD.count("\n")


class CodeCompiler:
    """Compiles model-written TypeScript for a ``CodeSandbox``. Safe to share across threads.

    ``parse_budget_ms`` bounds the host CPU one compile may spend parsing: ordinary code at
    the default 128 KiB limit parses in well under 100 ms, but adversarial nesting can make
    tree-sitter's error recovery take seconds.
    """

    def __init__(self, *, parse_budget_ms: int = 1000) -> None:
        if parse_budget_ms <= 0:
            raise ValueError("parse_budget_ms must be positive")
        self.parse_budget_ms = parse_budget_ms
        # Parsers are not thread-safe; one per thread, reused across compiles.
        self._local = threading.local()

    def _parser(self) -> ts.Parser:
        parser: ts.Parser | None = getattr(self._local, "parser", None)
        if parser is None:
            parser = ts.Parser(LANGUAGE)
            self._local.parser = parser
        return parser

    def _parse(self, data: bytes) -> ts.Node:
        deadline = time.perf_counter() + self.parse_budget_ms / 1000
        if data.startswith(b"#!"):
            # tree-sitter's `#!` line runs to LF; JavaScript's, like a `//` comment's, ends
            # at CR, U+2028 and U+2029 too. Parsed as one, the code after them is code.
            data = b"//" + data[2:]

        def read(offset: int, _point: ts.Point) -> bytes:
            return data[offset:]

        def over_budget(_offset: int, _has_error: bool) -> bool:
            return time.perf_counter() > deadline

        parser = self._parser()
        try:
            return parser.parse(read, progress_callback=over_budget).root_node
        except ValueError:  # tree-sitter reports a cancelled parse as a failure
            parser.reset()
            raise CompileFailure(
                Diagnostic(
                    ErrorCode.COMPILE_ERROR,
                    f"the code could not be parsed within {self.parse_budget_ms} ms: "
                    "simplify deeply nested or unbalanced code",
                )
            ) from None

    def referenced_sources(self, source: str) -> frozenset[str] | None:
        """The sources ``source`` reaches as ``tools.<name>`` / ``tools["<name>"]``, or
        ``None`` when it reaches ``tools`` any other way (then every source may be needed).
        Code that does not parse also gives ``None``: its compile error comes from ``compile``.
        """
        data = source.encode("utf-8", "surrogatepass")
        try:
            root = self._parse(data)
        except CompileFailure:
            return None
        if root.has_error:
            return None
        return referenced_sources(root, data)

    def ends_in_expression(self, source: str) -> bool:
        """Whether ``source`` parses and its last statement is a bare expression (``x``),
        whose value is not returned: the body needs an explicit ``return``."""
        try:
            root = self._parse(source.encode("utf-8", "surrogatepass"))
        except CompileFailure:
            return False
        return not root.has_error and ends_in_expression(root)

    def compile(self, source: str, *, max_source_bytes: int) -> CompiledProgram:
        try:
            data = source.encode("utf-8")
        except UnicodeEncodeError as exc:
            data = source.encode("utf-8", "surrogatepass")
            _check_size(data, max_source_bytes)
            raise CompileFailure(
                Diagnostic(
                    ErrorCode.COMPILE_ERROR,
                    "code contains an unpaired UTF-16 surrogate, which is not valid text",
                    location_at(data, len(source[: exc.start].encode("utf-8"))),
                )
            ) from None
        _check_size(data, max_source_bytes)
        root = self._parse(data)
        if root.has_error:
            error = first_syntax_error(data, root)
            raise CompileFailure(
                Diagnostic(
                    ErrorCode.UNSUPPORTED_SYNTAX if error.unsupported else ErrorCode.COMPILE_ERROR,
                    error.message,
                    location_at(data, error.offset),
                )
            )
        _check_depth(data, root)
        plan = plan_erasure(data, root)
        if plan.rejection is not None:
            code = (
                ErrorCode.UNSUPPORTED_SYNTAX
                if plan.rejection.unsupported
                else ErrorCode.COMPILE_ERROR
            )
            raise CompileFailure(
                Diagnostic(code, plan.rejection.message, location_at(data, plan.rejection.offset))
            )
        lowered = plan_direct_calls(data, root, plan.ranges)
        if lowered is None:
            return CompiledProgram(
                WRAPPER_HEAD + render(data, plan) + WRAPPER_TAIL, LINE_OFFSET, source
            )
        # Awaited calls of statically named tools (see compiler/calls.py): the program is
        # `[wrapper taking the direct-call table, the table's sites]`; the prelude builds
        # the table and starts the wrapper with it.
        lowered_data, parameter, calls = lowered
        body = render(lowered_data, plan)
        table = json.dumps(
            site_table(lowered_data, body, calls, LINE_OFFSET), separators=(",", ":")
        )
        javascript = f"[(async ({parameter}) => {{\n{body}\n}}), {table}]"
        return CompiledProgram(javascript, LINE_OFFSET, source)


MAX_NESTING = 10_000
"""Deepest syntax tree compiled. tsc itself overflows its stack at about this depth, and
tree-sitter's query engine goes from linear to minutes past 65,535 levels (a 128 KiB chain
of `x!!!…` took 94 s)."""


def _check_depth(data: bytes, root: ts.Node) -> None:
    # Only a tree with more nodes than the bound can be deeper than it: ordinary code never
    # pays for the walk.
    if root.descendant_count <= MAX_NESTING:
        return
    cursor = root.walk()
    depth = 0
    while True:
        if cursor.goto_first_child():
            depth += 1
            if depth > MAX_NESTING:
                raise CompileFailure(
                    Diagnostic(
                        ErrorCode.COMPILE_ERROR,
                        f"the code nests more than {MAX_NESTING} levels deep here: "
                        "split the expression into steps",
                        location_at(data, cursor.node.start_byte if cursor.node else 0),
                    )
                )
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return
            depth -= 1


def location_at(data: bytes, offset: int) -> Location:
    """1-based line and code-point column of a byte offset of UTF-8 ``data``."""
    prefix = data[:offset].decode("utf-8", "replace")
    line = 1
    line_start = 0
    for match in LINE_BREAK.finditer(prefix):
        line += 1
        line_start = match.end()
    return Location(line, len(prefix) - line_start + 1)
