"""Readable syntax errors from tree-sitter ERROR and MISSING nodes: the first one only."""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

_OPENERS = {"(": ")", "[": "]", "{": "}", "${": "}"}
_CLOSERS = {")", "]", "}"}
_MAX_LEAVES = 4096
_MAX_TOKEN = 30
_OPERATORS = frozenset(
    [
        "=",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "**=",
        "&&=",
        "||=",
        "??=",
        "<<=",
        ">>=",
        ">>>=",
        "&=",
        "|=",
        "^=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "**",
        "==",
        "===",
        "!=",
        "!==",
        "<",
        ">",
        "<=",
        ">=",
        "&&",
        "||",
        "??",
        "&",
        "|",
        "^",
        "<<",
        ">>",
        ">>>",
        ",",
        "=>",
        "?",
        ":",
        "in",
        "instanceof",
    ]
)
_STATEMENT_LISTS = frozenset({"program", "statement_block", "switch_case", "switch_default"})
_QUOTES = {
    '"': 'unterminated string: missing the closing `"`',
    "'": "unterminated string: missing the closing `'`",
    "`": "unterminated template string: missing the closing backtick",
}


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    message: str
    offset: int
    """Byte offset in the UTF-8 source."""
    unsupported: bool = False
    """Valid in a dialect we do not accept (JSX): ``UNSUPPORTED_SYNTAX``."""


_JSX_TAG = re.compile(rb"</([A-Za-z][\w.:-]*)\s*>|<([A-Za-z][\w.:-]*)(?:\s[^<>]*)?/>")
_NOT_CODE = frozenset(
    {"string_fragment", "string", "comment", "template_string", "regex_pattern", "escape_sequence"}
)


def first_syntax_error(source: bytes, root: ts.Node) -> SyntaxProblem:
    jsx = _jsx_element(source, root)
    if jsx is not None:
        return SyntaxProblem(
            "JSX is not supported (the code is TypeScript, not TSX): "
            "build strings or plain objects instead",
            jsx,
            unsupported=True,
        )
    node = _first_bad(root)
    if node is None:  # has_error without a visible culprit: report the whole code
        return SyntaxProblem("the code is not valid TypeScript", 0)
    if node.is_missing:
        return SyntaxProblem(f"missing {_kind(node.type, node.is_named)}", node.start_byte)
    return _describe_error(source, node)


def _jsx_element(source: bytes, root: ts.Node) -> int | None:
    """Offset of the first JSX-looking element (`<a>…</a>`, `<A />`) outside literals."""
    if b"</" not in source and b"/>" not in source:
        return None
    for match in _JSX_TAG.finditer(source):
        leaf = root.descendant_for_byte_range(match.start(), match.start() + 1)
        if leaf is not None and leaf.type in _NOT_CODE:
            continue
        if match.group(1) is None:
            return match.start()  # self-closing: the element starts here
        opening = source.rfind(b"<" + match.group(1), 0, match.start())
        while opening >= 0:
            after = source[opening + 1 + len(match.group(1)) : opening + 2 + len(match.group(1))]
            if after in (b">", b"/", b" ", b"\n", b"\t", b"\r"):
                return opening
            opening = source.rfind(b"<" + match.group(1), 0, opening)
        return match.start()
    return None


def _first_bad(root: ts.Node) -> ts.Node | None:
    """The first ERROR or MISSING node in document order."""
    if root.is_error or root.is_missing:
        return root
    node = root
    while True:
        for child in node.children:
            if child.is_missing or child.is_error:
                return child
            if child.has_error:
                node = child
                break
        else:
            return None


def _kind(kind: str, named: bool) -> str:
    if kind == "identifier":  # tree-sitter stands an identifier in for any expression
        return "an expression"
    return kind.replace("_", " ") if named else f"`{kind}`"


def _leaves(node: ts.Node) -> list[ts.Node]:
    leaves: list[ts.Node] = []
    stack = [node]
    while stack and len(leaves) < _MAX_LEAVES:
        current = stack.pop()
        if current.child_count == 0 or current.type in ("string", "template_string", "regex"):
            if current.end_byte > current.start_byte or current.is_missing:
                leaves.append(current)
        else:
            stack.extend(reversed(current.children))
    return leaves


def _next_leaf(node: ts.Node) -> ts.Node | None:
    current: ts.Node | None = node
    while current is not None and current.next_sibling is None:
        current = current.parent
    if current is None:
        return None
    following = current.next_sibling
    while following is not None and following.child_count:
        following = following.child(0)
    return following


def _token(source: bytes, node: ts.Node) -> str:
    text = source[node.start_byte : node.end_byte].decode("utf-8", "replace")
    text = " ".join(text.split())
    return text if len(text) <= _MAX_TOKEN else text[: _MAX_TOKEN - 3] + "..."


def _describe_error(source: bytes, error: ts.Node) -> SyntaxProblem:
    start = error.start_byte
    text = source[start:]
    if error.end_byte == start:
        if not source[start:].strip():
            return SyntaxProblem("unexpected end of code", start)
        return SyntaxProblem("unexpected token", start)
    unterminated = _unterminated(text)
    if unterminated is not None and error.end_byte >= len(source.rstrip()):
        return SyntaxProblem(unterminated, start)

    leaves = _leaves(error)
    at_end = not source[error.end_byte :].strip()
    if len(leaves) == 1 and leaves[0].type in _OPERATORS and not at_end:
        # `x = ;`, `1 + ;`: tree-sitter skips the operator; the operand is what is missing.
        following = _next_leaf(error)
        if following is not None and following.type in (";", ")", "]", "}", ","):
            return SyntaxProblem(
                f"expected an expression after `{leaves[0].type}`", following.start_byte
            )
    quotes = [leaf for leaf in leaves if leaf.type in _QUOTES]
    counts = {kind: sum(1 for q in quotes if q.type == kind) for kind in _QUOTES}
    for quote in quotes:
        if counts[quote.type] % 2 == 1:
            return SyntaxProblem(_QUOTES[quote.type], quote.start_byte)
    stack: list[ts.Node] = []
    for leaf in leaves:
        kind = leaf.type
        if kind in _OPENERS:
            stack.append(leaf)
        elif kind in _CLOSERS:
            if not stack or _OPENERS[stack[-1].type] != kind:
                return SyntaxProblem(f"unexpected `{kind}`", leaf.start_byte)
            stack.pop()
    if stack and at_end:
        opener = stack[-1]
        closer = _OPENERS[opener.type]
        return SyntaxProblem(
            f"missing `{closer}`: the `{opener.type}` here is never closed", opener.start_byte
        )

    if at_end and leaves and len(leaves) > 1:
        last = leaves[-1]
        return SyntaxProblem(
            f"the code ends in the middle of a statement, after {_quoted(_token(source, last))}",
            last.start_byte,
        )
    children = error.children
    following = error.next_sibling
    if (
        following is not None
        and error.parent is not None
        and error.parent.type in _STATEMENT_LISTS
        and children
        and all(c.is_named and not c.has_error for c in children)
        and not _has_line_break(source[error.end_byte : following.start_byte])
    ):
        # The ERROR holds a complete expression (`foo` in `foo bar`): what does not fit is
        # the token after it.
        after = _leaves(following)
        culprit = after[0] if after else following
        return SyntaxProblem(f"unexpected {_quoted(_token(source, culprit))}", culprit.start_byte)
    culprit = leaves[0] if leaves else error
    if (
        len(children) >= 2
        and children[0].is_named
        and not children[0].has_error
        and children[0].type != "comment"
    ):
        second = _leaves(children[1])
        culprit = second[0] if second else children[1]
    if culprit.is_missing:
        return SyntaxProblem(f"missing {_kind(culprit.type, culprit.is_named)}", culprit.start_byte)
    return SyntaxProblem(f"unexpected {_quoted(_token(source, culprit))}", culprit.start_byte)


def _quoted(token: str) -> str:
    return "a backtick" if token == "`" else f"`{token}`"


def _unterminated(text: bytes) -> str | None:
    """Name what an error at the start of ``text`` leaves open, if it is a literal or comment."""
    if text.startswith(b"/*") and b"*/" not in text:
        return "unterminated comment: missing `*/`"
    return None


def _has_line_break(text: bytes) -> bool:
    return b"\n" in text or b"\r" in text or b"\xe2\x80\xa8" in text or b"\xe2\x80\xa9" in text
