"""Direct calls: ``await tools.<source>.<tool>(args)`` compiled to a call that skips the
``tools`` proxies and carries its own call site.

The prelude reaches a tool through two proxy reads, a proxy call and a promise proxy (so a
forgotten ``await`` can be pointed out), and captures two stacks to find the call site. When
the compiler sees the call awaited on the spot, none of that is needed: the callee
``tools.a.b`` is replaced, in place and at the same width, by ``<table>[k]``, an entry of a
table of direct-call functions the prelude builds when the program starts, handed in as the
wrapper's parameter. Each entry knows its source, tool and the position of ``tools`` in the
user's code (the caret of a failing call). Every other reference to ``tools`` keeps the
proxy path, with its hints and messages.

Lowering is all or nothing per script and refuses whenever it cannot be sure that ``tools``
is the global: any other use of the word ``tools`` (a binding, a key, a string), a ``with``
statement or a name written with a ``\\u`` escape (``\\u0074ools`` binds ``tools`` without
the word) leaves the script as it is. The table's name is one the script does not contain,
so user code cannot name it.
"""

from __future__ import annotations

import bisect
import re

import tree_sitter as ts

from codemodekit.compiler.location import LINE_BREAK
from codemodekit.compiler.sources import escaped_names

_CANDIDATE = re.compile(
    rb"(?<![A-Za-z0-9_$.])await[ \t]+(tools\.[A-Za-z_$][A-Za-z0-9_$]*\.[A-Za-z_$][A-Za-z0-9_$]*)"
)
"""Where a lowered call may be; the tree confirms each (a tree-sitter query would cost a
fresh process ≈20 ms to compile)."""
_CALLEE = re.compile(rb"tools\.([A-Za-z_$][A-Za-z0-9_$]*)\.([A-Za-z_$][A-Za-z0-9_$]*)")
_WORD = re.compile(rb"(?<![A-Za-z0-9_$])tools(?![A-Za-z0-9_$])")
_WITH = re.compile(rb"(?<![A-Za-z0-9_$.])with(?![A-Za-z0-9_$])")
MAX_DIRECT_CALLS = 1000
"""Direct-call sites per script (``t[999]`` still fits the narrowest callee, ``tools.a.b``)."""


def _parameter(data: bytes) -> str | None:
    for i in range(100):
        name = f"$cm{i}" if i else "$cm"
        if name.encode() not in data:
            return name
    return None


def plan_direct_calls(
    data: bytes, root: ts.Node, erased: list[tuple[int, int]]
) -> tuple[bytes, str, list[tuple[int, str, str]]] | None:
    """Which callees to replace: ``(new data, parameter, [(offset, source, tool)])``, or
    ``None`` when the script keeps the proxy path throughout."""
    if b"tools" not in data or _WITH.search(data) or escaped_names(data, root):
        return None
    uses = [m.start() for m in _WORD.finditer(data)]
    for at in uses:
        if data[at + 5 : at + 6] != b".":
            return None  # `tools` bound, passed, indexed or written as text: keep it global
    parameter = _parameter(data)
    if parameter is None:
        return None
    starts = [start for start, _ in erased]
    calls: list[tuple[int, str, str]] = []
    out = bytearray(data)
    for candidate in _CANDIDATE.finditer(data):
        start, end = candidate.span(1)
        callee = _awaited_callee(root, start, end)
        if callee is None:
            continue  # in a string, a comment or a template; or not called at once
        match = _CALLEE.fullmatch(data, start, end)
        if match is None:  # pragma: no cover - the candidate pattern is narrower
            continue
        i = bisect.bisect_right(starts, start) - 1
        if i >= 0 and start < erased[i][1]:
            continue  # inside erased text
        replacement = f"{parameter}[{len(calls)}]".encode()
        if len(replacement) > end - start or len(calls) >= MAX_DIRECT_CALLS:
            continue
        out[start:end] = replacement.ljust(end - start)
        calls.append((start, match.group(1).decode(), match.group(2).decode()))
    if not calls:
        return None
    return bytes(out), parameter, calls


def _awaited_callee(root: ts.Node, start: int, end: int) -> ts.Node | None:
    """The member expression ``tools.a.b`` at ``[start, end)`` when it is the callee of a
    call that is itself the operand of ``await``; ``None`` otherwise."""
    node = root.descendant_for_byte_range(start, end)
    if node is None or node.type != "member_expression":
        return None
    if node.start_byte != start or node.end_byte != end:
        return None
    inner = node.child_by_field_name("object")
    if inner is None or inner.type != "member_expression":
        return None
    root_name = inner.child_by_field_name("object")
    if root_name is None or root_name.type != "identifier":
        return None
    call = node.parent
    if call is None or call.type != "call_expression":
        return None
    function = call.child_by_field_name("function")
    arguments = call.child_by_field_name("arguments")
    if function is None or function.id != node.id:
        return None
    if arguments is None or arguments.type != "arguments":
        return None  # a tagged template
    if any(child.type in ("?.", "optional_chain") for child in call.children):
        return None  # `tools.a.b?.(x)`: left to the proxy path
    awaited = call.parent
    if awaited is None or awaited.type != "await_expression":
        return None
    return node


def site_table(
    data: bytes, body: str, calls: list[tuple[int, str, str]], line_offset: int
) -> list[str | int]:
    """``[source, tool, line, column, …]`` with each call's position in the JavaScript as
    QuickJS writes it in a stack (1-based line, 1-based UTF-8 byte column)."""
    lines = LINE_BREAK.split(body)
    table: list[str | int] = []
    text_at, chars, line, line_start = 0, 0, 1, 0
    for offset, source, tool in calls:  # in source order, as numbered
        chunk = data[text_at:offset].decode("utf-8", "surrogatepass")
        for match in LINE_BREAK.finditer(chunk):
            line += 1
            line_start = chars + match.end()
        chars += len(chunk)
        text_at = offset
        column = chars - line_start  # code points before `tools` on its line
        prefix = lines[line - 1][:column]
        table += [
            source,
            tool,
            line + line_offset,
            len(prefix.encode("utf-8", "surrogatepass")) + 1,
        ]
    return table
