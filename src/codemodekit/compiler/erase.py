"""Position-preserving type erasure over a tree-sitter TypeScript parse.

``plan_erasure`` finds every type-only region of an error-free tree and every construct the
compiler refuses; ``render`` replaces the regions with spaces (line terminators kept), so each
character of the output sits at the same index as in the input. A handful of single ASCII
characters are written *inside* erased regions where blanking alone would change what the
JavaScript means (see ``_Planner``), and a CR, U+2028 or U+2029 that QuickJS would not count
as a line is written as LF (see ``_Planner._uncounted_breaks``).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

import tree_sitter as ts

from codemodekit.compiler.query import (
    REJECTIONS,
    capture,
    html_comment_tokens,
    uncounted_break_holders,
)

_BLANKABLE = re.compile(r"[^\n\r\u2028\u2029]")
_ASCII_BLANK = bytes(b if b in (0x0A, 0x0D) else 0x20 for b in range(128)) + bytes(128)
_MAY_BREAK = frozenset(b"\n\r/\xe2")
_HTML_OPEN = b"<!--"
_HTML_CLOSE = b"-->"
_LINE_TERMINATORS = "\n\r\u2028\u2029"
_LINE_END = re.compile(rb"[\n\r]|\xe2\x80[\xa8\xa9]")
_SEPARATORS = (b"\xe2\x80\xa8", b"\xe2\x80\xa9")
_UNCOUNTED_IN_BLOCK = re.compile(rb"\r(?!\n)|\xe2\x80[\xa8\xa9]")
# Blank for tree-sitter (its extras) though not all are JavaScript whitespace: QuickJS refuses
# those, so walking over them only ever refuses more.
_OTHER_BLANKS = "\ufeff\u200b\u2060"
_STATEMENT_ENDERS = frozenset(
    {
        "expression_statement",
        "lexical_declaration",
        "variable_declaration",
        "return_statement",
        "throw_statement",
        "public_field_definition",
    }
)


@dataclass(frozen=True, slots=True)
class Rejection:
    """A construct the compiler refuses, at a byte offset of the source."""

    kind: str
    offset: int
    message: str
    unsupported: bool = True
    """``UNSUPPORTED_SYNTAX`` when true, ``COMPILE_ERROR`` otherwise."""
    ambient: bool = True
    """Ignored inside erased text (`declare namespace N {}` emits nothing, so it is fine)."""


@dataclass(slots=True)
class Plan:
    ranges: list[tuple[int, int]] = field(default_factory=list)
    """Merged, sorted byte ranges to blank."""
    writes: dict[int, str] = field(default_factory=dict)
    """Byte offset (inside a range) → one ASCII character replacing the character there."""
    breaks: list[int] = field(default_factory=list)
    """Sorted byte offsets (outside the ranges) of CR, U+2028 or U+2029 written as LF."""
    rejection: Rejection | None = None


class _Planner:
    """Collects erased ranges, refusals and the few characters written inside erased text.

    Blanking type syntax can change what JavaScript makes of the rest, because automatic
    semicolon insertion and restricted productions look at line breaks and tokens that the
    types used to provide. The writes restore TypeScript's reading:

    - ``;`` where a statement ends in erased text (``let x: T⏎(y)``), at the start of an
      erased statement (``a = b⏎interface I {}⏎(c)``) and at ``as`` in ``x as T⏎(y)``;
    - ``0`` and ``,`` around ``<T>`` in ``return <T>⏎x`` (``return 0 ,⏎x`` returns ``x``).

    Where no such write exists, or tree-sitter reads a line break differently from
    TypeScript, the code is refused at the token instead of silently changing meaning.
    """

    def __init__(self, source: bytes, root: ts.Node) -> None:
        self.source = source
        self.root = root
        self.raw: list[tuple[int, int]] = []
        self.writes: dict[int, str] = {}
        self.rejections: list[Rejection] = []
        self.starts: list[int] = []
        self.ends: list[int] = []

    # --- collection --------------------------------------------------------------------

    def plan(self) -> Plan:
        captures = capture(self.root, self.source)
        self._collect_erasures(captures)
        self._collect_refusals(captures)
        self._merge()
        self._keep_meaning(captures)
        self._terminate_statements()
        self._check_html_comments()
        return Plan(
            ranges=list(zip(self.starts, self.ends, strict=True)),
            writes=self.writes,
            breaks=self._uncounted_breaks(),
            rejection=self._first_rejection(),
        )

    def _collect_erasures(self, captures: dict[str, list[ts.Node]]) -> None:
        get = captures.get
        if self.source.startswith(b"#!"):  # parsed as the `//` comment it is to JavaScript
            line_end = _LINE_END.search(self.source)
            self.raw.append((0, len(self.source) if line_end is None else line_end.start()))
        for node in get("erase", ()):
            self.raw.append((node.start_byte, node.end_byte))
        for expression in get("bang", ()):
            bang = expression.child(expression.child_count - 1)
            if bang is not None and bang.type == "!":
                self.raw.append((bang.start_byte, bang.end_byte))
        for expression in get("suffix", ()):
            node = next(c for c in expression.children if c.type in ("as", "satisfies"))
            self.raw.append((node.start_byte, expression.end_byte))
            if self._break_before(node):
                # TypeScript ends the expression before a line-leading `as`/`satisfies`.
                self._compile_error(
                    node, f"a line break before `{node.type}` is not allowed: move it up a line"
                )
        for node in get("this_param", ()):
            self._erase_this_parameter(node)
        for node in get("statement", ()):
            self.raw.append((node.start_byte, node.end_byte))
            # An erased statement must still end the previous one: `a = b\ninterface I {}\n(c)`.
            self.writes[node.start_byte] = ";"

    def _collect_refusals(self, captures: dict[str, list[ts.Node]]) -> None:
        get = captures.get
        for node in get("import", ()):
            if self._is_type_only_import(node):
                self.raw.append((node.start_byte, node.end_byte))
                self.writes[node.start_byte] = ";"
            else:
                self._reject("import", node)
        for kind in (
            "enum",
            "namespace",
            "import_alias",
            "decorator",
            "export",
            "dynamic_import",
            "html_comment",
            "generic_tag",
            "accessor",
        ):
            for node in get(kind, ()):
                self._reject(kind, node)
        for node in get("generic_call", ()):
            # `a < b > (c)` is a call for TypeScript (`a<b>(c)`); tree-sitter may read it as
            # two comparisons, at the end of the code, before more binary operators.
            right = node.child_by_field_name("right")
            if right is not None and self.source.startswith(b"(", right.start_byte):
                left = node.child_by_field_name("left")
                operator = left.child_by_field_name("operator") if left is not None else None
                self._reject("generic_call", operator or node)
        # Compared here, not with a query predicate: predicates need the tree's text, which a
        # tree parsed from a read callback fetches again through the callback, slowly.
        for node in get("callee", ()):
            if node.end_byte - node.start_byte == 7 and self.source.startswith(
                b"require", node.start_byte
            ):
                self._reject("require", node)
        for node in get("parameter_property", ()):
            self._reject("parameter_property", node, ambient=False)
        for node in get("meta_property", ()):
            if self.source.startswith(b"import", node.start_byte):
                self._reject("meta_property", node)

    def _keep_meaning(self, captures: dict[str, list[ts.Node]]) -> None:
        """Needs the merged ranges: decides writes and refusals around erased text."""
        get = captures.get
        for node in get("asserted_callee", ()):
            self._fix_asserted_callee(node)
        for node in get("restricted", ()):
            self._fix_restricted(node)
        for node in get("generic_arrow", ()):
            self._check_async_arrow(node)
        for node in get("arrow_function", ()):
            self._check_arrow_line_break(node)
        for expression in get("bang", ()):
            # TypeScript reads `a⏎!b` as two statements; tree-sitter may read a non-null `!`.
            node = expression.child(expression.child_count - 1)
            if node is not None and node.type == "!" and self._break_before(node):
                self._compile_error(
                    node, "a line break before a non-null `!` is not allowed: move it up a line"
                )
        for node in get("modifier", ()):
            # TypeScript reads `private⏎x` as a field named `private`; tree-sitter may not.
            following = self._next_token(node)
            if following is not None and self._has_line_break(node.end_byte, following.start_byte):
                word = self.source[node.start_byte : node.end_byte].decode()
                self._compile_error(
                    node,
                    f"a line break after `{word}` makes TypeScript read it as a name: "
                    f"keep `{word}` on the line of what it modifies",
                )
        for node in get("bare_let", ()):
            self._compile_error(
                node,
                "`let` followed by a line break reads ambiguously: "
                "put the first declared name on the line of `let`",
            )
        for node in get("type_continued", ()):
            self._check_type_continuation(node)

    def _reject(self, kind: str, node: ts.Node, *, ambient: bool = True) -> None:
        self.rejections.append(Rejection(kind, node.start_byte, REJECTIONS[kind], ambient=ambient))

    def _erase_this_parameter(self, node: ts.Node) -> None:
        end = node.end_byte
        following = node.next_sibling
        while following is not None and following.type == "comment":
            following = following.next_sibling
        if following is not None and following.type == ",":
            end = following.end_byte  # `f(this: T, x)`: the comma goes too
        self.raw.append((node.start_byte, end))

    def _is_type_only_import(self, node: ts.Node) -> bool:
        """`import type ...` or `import { type A, type B } from ...`: nothing at run time."""
        if any(child.type == "type" for child in node.children):
            return True
        specifiers = [
            n
            for clause in node.named_children
            if clause.type == "import_clause"
            for imports in clause.named_children
            if imports.type == "named_imports"
            for n in imports.named_children
            if n.type == "import_specifier"
        ]
        clauses = [c for c in node.named_children if c.type == "import_clause"]
        only_named = all(
            n.type == "named_imports" for clause in clauses for n in clause.named_children
        )
        return (
            bool(specifiers)
            and only_named
            and all(any(c.type == "type" for c in spec.children) for spec in specifiers)
        )

    # --- ranges ------------------------------------------------------------------------

    def _merge(self) -> None:
        starts: list[int] = []
        ends: list[int] = []
        for start, end in sorted(self.raw):
            if ends and start <= ends[-1]:
                if end > ends[-1]:
                    ends[-1] = end
            else:
                starts.append(start)
                ends.append(end)
        self.starts, self.ends = starts, ends

    def _range_at(self, offset: int) -> int:
        """Index of the erased range containing ``offset``, or -1."""
        i = bisect.bisect_right(self.starts, offset) - 1
        if i >= 0 and offset < self.ends[i]:
            return i
        return -1

    def _erased(self, offset: int) -> bool:
        return self._range_at(offset) >= 0

    def _has_line_break(self, start: int, end: int) -> bool:
        chunk = self.source[start:end]
        return (
            b"\n" in chunk or b"\r" in chunk or b"\xe2\x80\xa8" in chunk or b"\xe2\x80\xa9" in chunk
        )

    def _next_kept(self, offset: int) -> int:
        """First offset at or after ``offset`` that is not erased, whitespace or a comment."""
        source = self.source
        while offset < len(source):
            i = self._range_at(offset)
            if i >= 0:
                offset = self.ends[i]
            elif source[offset] in b" \t\n\r\f\v":
                offset += 1
            elif source.startswith(b"/*", offset):  # a regex never starts with `*` or `/`
                close = source.find(b"*/", offset + 2)
                offset = len(source) if close < 0 else close + 2
            elif source.startswith(b"//", offset):
                offset += 2
                while offset < len(source) and source[offset] not in b"\n\r":
                    offset += 1
            else:
                return offset
        return offset

    # --- meaning-preserving fixes --------------------------------------------------------

    def _fix_asserted_callee(self, node: ts.Node) -> None:
        """`x as T\n(y)` is two statements for TypeScript; blanked, it would be a call."""
        after = node.next_sibling
        while after is not None and after.type == "comment":
            after = after.next_sibling
        if after is None:
            return
        keyword = next(c for c in node.children if c.type in ("as", "satisfies"))
        if self._has_line_break(node.end_byte, after.start_byte):
            self.writes[keyword.start_byte] = ";"
        else:
            self.rejections.append(
                Rejection(
                    "asserted_callee",
                    after.start_byte,
                    f"wrap `{self._excerpt(node)}` in parentheses before calling or indexing it",
                    unsupported=False,
                    ambient=False,
                )
            )

    def _fix_restricted(self, node: ts.Node) -> None:
        """`return <T>\nx` returns x in TypeScript; blanked it would return undefined."""
        keyword = node.child(0)
        argument = next((c for c in node.named_children if c.type != "comment"), None)
        if argument is None or not self._erased(argument.start_byte):
            return
        if self._has_line_break(keyword.end_byte, argument.start_byte):
            return
        first = self._next_kept(argument.start_byte)
        if not self._has_line_break(argument.start_byte, first):
            return
        if node.type == "yield_expression":
            self._reject("keyword_break", node)
            return
        # `return 0 ,\nx` evaluates to x, exactly like `return <T>\nx`: the comma operator is
        # the lowest-precedence operator and `return`/`throw` take a full Expression.
        i = self._range_at(argument.start_byte)
        start, end = self.starts[i], self.ends[i]
        if start != argument.start_byte or end - start < 2 or self._has_line_break(start, end):
            self._reject("keyword_break", node, ambient=False)
            return
        self.writes[start] = "0"
        self.writes[end - 1] = ","

    def _check_async_arrow(self, node: ts.Node) -> None:
        first = node.child(0)
        if first.type != "async":
            return
        params = node.child_by_field_name("parameters")
        type_params = node.child_by_field_name("type_parameters")
        if params is None or type_params is None:
            return
        if self._has_line_break(type_params.start_byte, params.start_byte):
            self._reject("async_break", node, ambient=False)

    def _check_arrow_line_break(self, function: ts.Node) -> None:
        """JavaScript forbids a line break before `=>`; one before or inside an erased return
        type (`(x)⏎: T => x`, valid TypeScript) would become exactly that."""
        # Work from the function's own children: `Node.parent` and `prev_sibling` walk down
        # from the root, which makes deeply nested arrows quadratic.
        children = function.children
        index = next((i for i, c in enumerate(children) if c.type == "=>"), None)
        if index is None:
            return
        arrow = children[index]
        before = [c for c in children[:index] if c.type != "comment"]
        previous_end = before[-1].end_byte if before else arrow.start_byte
        if self._break_before(arrow, previous_end=previous_end):
            self._compile_error(
                arrow, "a line break before `=>` is not allowed: move `=>` up to the previous line"
            )
            return
        return_type = function.child_by_field_name("return_type")
        if return_type is not None:
            ahead = [c for c in children if c.end_byte <= return_type.start_byte]
            ahead = [c for c in ahead if c.type != "comment"]
            start = ahead[-1].end_byte if ahead else return_type.start_byte
            if self._has_line_break(start, return_type.end_byte):
                self._reject("arrow_break", return_type, ambient=False)

    def _break_before(self, node: ts.Node, *, previous_end: int | None = None) -> bool:
        """A line break between ``node`` and the previous token (comments included)."""
        source = self.source
        at = node.start_byte - 1
        while at >= 0 and source[at] in b" \t":
            at -= 1
        if at < 0 or source[at] not in b"\n\r\xa8\xa9/":
            return False  # the common case, decided without touching the tree
        if previous_end is None:
            previous_end = self._previous_end(node)
        return self._has_line_break(previous_end, node.start_byte)

    @staticmethod
    def _previous_end(node: ts.Node) -> int:
        """End of the previous sibling that is not a comment (comments may hide line breaks)."""
        before = node.prev_sibling
        while before is not None and before.type == "comment":
            before = before.prev_sibling
        return node.start_byte if before is None else before.end_byte

    @staticmethod
    def _next_token(node: ts.Node) -> ts.Node | None:
        following = node.next_sibling
        while following is not None and following.type == "comment":
            following = following.next_sibling
        return following

    def _compile_error(self, node: ts.Node, message: str) -> None:
        self.rejections.append(
            Rejection("syntax", node.start_byte, message, unsupported=False, ambient=False)
        )

    def _check_type_continuation(self, node: ts.Node) -> None:
        """TypeScript never continues a type with `[` or `<` after a line break; tree-sitter may.

        `let a: number[]\n[1].forEach(f)` is a declaration and a call for TypeScript; reading
        `number[][1]` as one type would silently erase the call.
        """
        if self._break_before(node):
            token = self.source[node.start_byte : node.start_byte + 1].decode()
            self.rejections.append(
                Rejection(
                    "type_continued",
                    node.start_byte,
                    f"a line break before `{token}` ends the type in TypeScript: "
                    "end the previous statement with `;` or keep the type on one line",
                    unsupported=False,
                    ambient=False,
                )
            )

    def _terminate_statements(self) -> None:
        """A statement ending in erased text gets the `;` that ASI gave it in TypeScript.

        `let x: T\n(y)` is `let x; (y)` in TypeScript; blanked it would read `let x(y)`.
        """
        source = self.source
        size = len(source)
        for start, end in zip(self.starts, self.ends, strict=True):
            if start in self.writes:
                continue
            # Only a line break (or a comment, which may hide one) lets ASI end the statement.
            following = end
            while following < size and source[following] in b" \t":
                following += 1
            if following >= size or source[following] not in _MAY_BREAK:
                continue
            node: ts.Node | None = self.root.descendant_for_byte_range(end - 1, end)
            while node is not None and _content_end(node) == end:
                if node.type in _STATEMENT_ENDERS:
                    if node.start_byte < start and not self._ends_with_semicolon(node):
                        self.writes[start] = ";"
                    break
                node = node.parent

    @staticmethod
    def _ends_with_semicolon(node: ts.Node) -> bool:
        if any(child.type == ";" for child in node.children):
            return True
        following = node.next_sibling
        return following is not None and following.type == ";"

    def _check_html_comments(self) -> None:
        """QuickJS reads `<!--` and a line-leading `-->` as comments; tree-sitter does not.

        One pass over the tokens the tree has there, in source order, up to the first refusal
        (a per-occurrence tree lookup was quadratic on a long line of `x-->0;`).
        """
        source = self.source
        if _HTML_OPEN not in source and _HTML_CLOSE not in source:
            return
        found = html_comment_tokens(self.root)
        candidates = sorted(
            [
                n.start_byte
                for n in found.get("less", ())
                if source.startswith(_HTML_OPEN, n.start_byte)
            ]
            + [
                n.start_byte
                for n in found.get("decrement", ())
                if source.startswith(_HTML_CLOSE, n.start_byte)
            ]
        )
        if not candidates:
            return
        comments = {n.end_byte: n.start_byte for n in found.get("comment", ())}
        for at in candidates:
            if self._erased(at):
                continue
            if source[at] == ord("<") or self._line_leading(at, comments):
                self.rejections.append(Rejection("html_comment", at, REJECTIONS["html_comment"]))
                return

    def _line_leading(self, offset: int, comments: dict[int, int]) -> bool:
        """A line terminator (LF, CR, U+2028, U+2029, also inside a comment or erased text)
        between the previous token and ``offset``, or no previous token: where QuickJS reads
        `-->` as a comment. Walks back over whitespace, comments (``comments``: end → start)
        and erased text only, so all the walks of one script together read it at most once.
        """
        source = self.source
        at = offset
        while at > 0:
            comment_start = comments.get(at)
            if comment_start is not None:
                if self._has_line_break(comment_start, at):
                    return True
                at = comment_start
                continue
            i = self._range_at(at - 1)
            if i >= 0:
                if self._has_line_break(self.starts[i], at):
                    return True
                at = self.starts[i]
                continue
            lead = at - 1
            while lead > 0 and 0x80 <= source[lead] < 0xC0:
                lead -= 1
            char = source[lead:at].decode("utf-8", "replace")
            if char in _LINE_TERMINATORS:
                return True
            if not (char.isspace() or char in _OTHER_BLANKS):
                return False
            at = lead
        return True  # the start of the code: the wrapper's line break precedes it

    def _uncounted_breaks(self) -> list[int]:
        """The line terminators QuickJS does not count as lines, to be written as LF.

        QuickJS numbers lines by the terminators it meets between tokens, but inside a block
        comment it counts only LF, and it counts no U+2028/U+2029 that ends a `//` comment
        or continues a string (nor, then, does it end the statement there, as TypeScript
        does: `return // c⏎1`). An LF there means the same to JavaScript, and every engine
        position then maps back to the line the compiler's locations count. (U+2028/U+2029
        in string and template text is part of the value: it stays, uncounted by QuickJS.)
        """
        source = self.source
        if not (b"\r" in source or b"\xe2\x80\xa8" in source or b"\xe2\x80\xa9" in source):
            return []
        found = uncounted_break_holders(self.root)
        breaks: list[int] = []
        for node in found.get("comment", ()):
            start, end = node.start_byte, node.end_byte
            if self._erased(start):
                continue  # blanked: its line terminators stand between tokens
            if source.startswith(b"/*", start):
                breaks += (m.start() for m in _UNCOUNTED_IN_BLOCK.finditer(source, start, end))
            elif source.startswith(_SEPARATORS, end) and not self._erased(end):
                breaks.append(end)
        for node in found.get("escape", ()):
            if not self._erased(node.start_byte) and source.startswith(
                _SEPARATORS, node.start_byte + 1
            ):
                breaks.append(node.start_byte + 1)
        return sorted(breaks)

    # --- result --------------------------------------------------------------------------

    def _first_rejection(self) -> Rejection | None:
        live = [r for r in self.rejections if not (r.ambient and self._erased(r.offset))]
        return min(live, key=lambda r: r.offset) if live else None

    def _excerpt(self, node: ts.Node) -> str:
        text = self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")
        text = " ".join(text.split())
        return text if len(text) <= 40 else text[:37] + "..."


def _content_end(node: ts.Node) -> int:
    """End of ``node`` without trailing comments (tree-sitter attaches them as children)."""
    end = node.end_byte
    for i in range(node.child_count - 1, -1, -1):
        child = node.child(i)
        if child.type != "comment":
            return child.end_byte if child.end_byte < end else end
    return end


def plan_erasure(source: bytes, root: ts.Node) -> Plan:
    return _Planner(source, root).plan()


def _blank(chunk: bytes) -> bytes:
    if chunk.isascii():
        return chunk.translate(_ASCII_BLANK)
    return _BLANKABLE.sub(" ", chunk.decode("utf-8")).encode("utf-8")


def render(source: bytes, plan: Plan) -> str:
    """The source with every planned range blanked and every planned break written as LF;
    character indices unchanged."""
    if not plan.ranges and not plan.breaks:
        return source.decode("utf-8")
    edits = [(start, end, False) for start, end in plan.ranges]
    if plan.breaks:  # never inside a range
        edits += [(at, at + _char_width(source[at]), True) for at in plan.breaks]
        edits.sort()
    writes = sorted(plan.writes.items())
    w = 0
    pieces: list[bytes] = []
    position = 0
    for start, end, is_break in edits:
        pieces.append(source[position:start])
        position = end
        if is_break:
            pieces.append(b"\n")
            continue
        cursor = start
        while w < len(writes) and writes[w][0] < end:
            at, char = writes[w]
            w += 1
            if at < start:
                continue
            pieces.append(_blank(source[cursor:at]))
            pieces.append(char.encode("ascii"))
            cursor = at + _char_width(source[at])
        pieces.append(_blank(source[cursor:end]))
    pieces.append(source[position:])
    return b"".join(pieces).decode("utf-8")


def _char_width(lead: int) -> int:
    """Bytes of the UTF-8 character starting with ``lead``: a write replaces one character."""
    if lead < 0x80:
        return 1
    if lead >= 0xF0:
        return 4
    if lead >= 0xE0:
        return 3
    return 2
