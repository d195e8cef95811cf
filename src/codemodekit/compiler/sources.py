"""Which sources a script can reach, read statically from its tree-sitter parse.

``codemode run`` starts only those sources. Every way of reaching ``tools`` other than
``tools.<name>`` or ``tools["<name>"]`` (a computed key, passing ``tools`` around,
``globalThis`` or ``this``, which can lead to the global object) makes the answer ``None``:
start every source. So does a name written with a ``\\u`` escape (``\\u0074ools`` is
``tools``), which no comparison of names' text would see. A wrong "all" costs start-up
time; a wrong subset would fail a run, so every doubt goes to "all".
"""

from __future__ import annotations

import bisect
import re

import tree_sitter as ts

from codemodekit.compiler.query import escape_holders

_TOOLS = b"tools"
# Names that may reach the global object, and with it `tools`, without naming it.
_GLOBAL_REACH = frozenset({b"globalThis", b"this"})
_NAME_NODES = frozenset(
    {"identifier", "shorthand_property_identifier", "shorthand_property_identifier_pattern"}
)


_ESCAPE = re.compile(rb"\\u")


def escaped_names(data: bytes, root: ts.Node) -> bool:
    """Whether a ``\\u`` of ``data`` (parsed as ``root``) may be in a name rather than in a
    string, template text, regular expression or comment: the name's text then differs from
    the name JavaScript reads (``\\u0074ools``, ``\\u0024cm``)."""
    if b"\\u" not in data:
        return False
    holders = sorted((n.start_byte, n.end_byte) for n in escape_holders(root))
    starts = [start for start, _ in holders]
    for match in _ESCAPE.finditer(data):
        i = bisect.bisect_right(starts, match.start()) - 1
        if i < 0 or match.start() >= holders[i][1]:
            return True
    return False


def referenced_sources(root: ts.Node, data: bytes) -> frozenset[str] | None:
    """The source names ``root`` (the tree of ``data``) reaches through ``tools``, or ``None``
    when not static."""
    if escaped_names(data, root):
        return None
    found: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind == "this" or (kind in _NAME_NODES and node.text in _GLOBAL_REACH):
            return None
        if kind in _NAME_NODES and node.text == _TOOLS:
            name = _static_member(node)
            if name is None:
                return None
            found.add(name)
        elif kind == "property_identifier" and node.text == _TOOLS:
            # `x.tools` may be `globalThis.tools` under another name; `{ tools: 1 }` is a
            # key (parent `pair`) and harmless.
            parent = node.parent
            if parent is None or parent.type != "pair":
                return None
        stack.extend(node.children)
    return frozenset(found)


def _static_member(node: ts.Node) -> str | None:
    """``name`` for ``tools.name`` / ``tools["name"]``; ``None`` for any other use."""
    parent = node.parent
    if parent is None or node.type != "identifier":
        return None
    obj = parent.child_by_field_name("object")
    if obj is None or obj.id != node.id:
        return None
    if parent.type == "member_expression":
        prop = parent.child_by_field_name("property")
        if prop is not None and prop.type == "property_identifier" and prop.text:
            return prop.text.decode("utf-8")
        return None
    if parent.type == "subscript_expression":
        index = parent.child_by_field_name("index")
        if index is None or index.type != "string":
            return None
        parts = [c for c in index.children if c.type not in ('"', "'")]
        if len(parts) == 1 and parts[0].type == "string_fragment" and parts[0].text:
            return parts[0].text.decode("utf-8")
        if not parts:
            return ""
    return None
