"""The tree-sitter query that finds type-only syntax and refused constructs, and the
model-visible message for each refusal (what to write instead)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cache

import tree_sitter as ts
import tree_sitter_typescript as tst

LANGUAGE = ts.Language(tst.language_typescript())

# One query, run in C, so Python only touches the nodes that matter (with the groups below,
# run only when a script can contain what they match).
_QUERY_SOURCE = r"""
(type_annotation) @erase
(type_predicate_annotation) @erase
(asserts_annotation) @erase
(omitting_type_annotation) @erase
(adding_type_annotation) @erase
(opting_type_annotation) @erase
(type_arguments) @erase
(type_parameters) @erase
(implements_clause) @erase
(accessibility_modifier) @erase
(override_modifier) @erase
(hash_bang_line) @erase
(method_definition "?" @erase)
(optional_parameter "?" @erase)
(variable_declarator "!" @erase)

; Postfix chains (`x!!!`, `x as T as U`) nest as deep as they are long: a pattern that
; waits for a child token keeps one pending state per level (quadratic). Capture the node
; itself and find the token in Python.
(non_null_expression) @bang
(as_expression) @suffix
(satisfies_expression) @suffix

(formal_parameters (required_parameter pattern: (this)) @this_param)

(interface_declaration) @statement
(type_alias_declaration) @statement
(ambient_declaration) @statement
(function_signature) @statement
(import_statement "type") @statement


(return_statement) @restricted
(throw_statement) @restricted
(yield_expression) @restricted
(arrow_function type_parameters: (_)) @generic_arrow
(arrow_function) @arrow_function
(accessibility_modifier) @modifier
(override_modifier) @modifier
(ambient_declaration "declare" @modifier)
(type_alias_declaration "type" @modifier)
(interface_declaration "interface" @modifier)
(expression_statement (identifier) @bare_let (#eq? @bare_let "let"))

(enum_declaration) @enum
(internal_module) @namespace
(module) @namespace
(import_alias) @import_alias
(decorator) @decorator
(import_statement) @import
(export_statement) @export
(call_expression function: (identifier) @callee)
(meta_property) @meta_property
(html_comment) @html_comment
(lookup_type "[" @type_continued)
(array_type "[" @type_continued)
(generic_type type_arguments: (type_arguments) @type_continued)
"""


@dataclass
class _LazyGroup:
    """Patterns that can match only where ``tokens`` occur in the source text (a keyword or
    punctuation every match contains) or the core query captured ``captures``: skipped
    otherwise, and compiled on first need. Compiling the whole query took ≈70–100 ms, most
    of a one-off `codemode run`; these patterns were most of it and most scripts need none."""

    source: str
    tokens: tuple[bytes, ...] = ()
    captures: tuple[str, ...] = ()
    _query: ts.Query | None = field(default=None, repr=False)

    def needed(self, data: bytes, found: dict[str, list[ts.Node]]) -> bool:
        return any(t in data for t in self.tokens) or any(c in found for c in self.captures)

    def query(self) -> ts.Query:
        if self._query is None:
            with _COMPILING:
                if self._query is None:
                    self._query = ts.Query(LANGUAGE, self.source)
        return self._query


_COMPILING = threading.Lock()

_LAZY_GROUPS = (
    # Class members: every match is inside a class body or declaration.
    _LazyGroup(
        r"""
(public_field_definition "readonly" @erase)
(public_field_definition "?" @erase)
(public_field_definition "!" @erase)
(abstract_class_declaration "abstract" @erase)
(class_body (method_signature) @statement)
(class_body (abstract_method_signature) @statement)
(class_body (index_signature) @statement)
(class_body (public_field_definition "declare") @statement)
(class_body (public_field_definition "abstract") @statement)
(public_field_definition ["readonly" "declare" "abstract"] @modifier)
(abstract_method_signature "abstract" @modifier)
(abstract_class_declaration "abstract" @modifier)
(public_field_definition "accessor" @accessor)
""",
        tokens=(b"class",),
    ),
    # An `as`/`satisfies` expression (the core query's @suffix) called or indexed.
    _LazyGroup(
        r"""
(call_expression function: [(as_expression) (satisfies_expression)] @asserted_callee)
(subscript_expression object: [(as_expression) (satisfies_expression)] @asserted_callee)
""",
        captures=("suffix",),
    ),
    _LazyGroup(
        r"""
(required_parameter [(accessibility_modifier) (override_modifier) "readonly"]) @parameter_property
(optional_parameter [(accessibility_modifier) (override_modifier) "readonly"]) @parameter_property
""",
        tokens=(b"public", b"private", b"protected", b"override", b"readonly"),
    ),
    _LazyGroup("(call_expression function: (import)) @dynamic_import", tokens=(b"import",)),
    _LazyGroup(
        r"""
(binary_expression
  left: (binary_expression operator: "<" @generic_tag)
  operator: ">"
  right: (template_string))
(binary_expression
  left: (binary_expression operator: "<")
  operator: ">") @generic_call
""",
        tokens=(b"`", b"<"),
    ),
)


# Run only on scripts that contain what they look for, so they are compiled on first need
# and not ahead by a sandbox zygote.
_HTML_TOKENS = r"""
"<" @less
"--" @decrement
(comment) @comment
"""
"""Where `<!--` or `-->` may start, and the comments between tokens."""
_ESCAPE_HOLDERS = r"""
[(string_fragment) (escape_sequence) (regex_pattern) (comment) (html_comment) (hash_bang_line)]
@text
"""
"""Every node whose text may hold a backslash that is not part of a name."""

_UNCOUNTED_BREAK_HOLDERS = r"""
(comment) @comment
(string (escape_sequence) @escape)
"""
"""Where QuickJS does not count a line terminator as a line (see ``erase``)."""


@cache
def _rare_query(source: str) -> ts.Query:
    return ts.Query(LANGUAGE, source)


def html_comment_tokens(root: ts.Node) -> dict[str, list[ts.Node]]:
    """The `<` and `--` tokens (``less``, ``decrement``) and comments of the tree."""
    return ts.QueryCursor(_rare_query(_HTML_TOKENS)).captures(root)


def escape_holders(root: ts.Node) -> list[ts.Node]:
    """Strings, template text, regular expressions and comments: where `\\u` is not a name."""
    return ts.QueryCursor(_rare_query(_ESCAPE_HOLDERS)).captures(root).get("text", [])


def uncounted_break_holders(root: ts.Node) -> dict[str, list[ts.Node]]:
    """The comments (``comment``) and string escapes (``escape``) of the tree."""
    return ts.QueryCursor(_rare_query(_UNCOUNTED_BREAK_HOLDERS)).captures(root)


@cache
def _core_query() -> ts.Query:
    return ts.Query(LANGUAGE, _QUERY_SOURCE)


def compile_core_query() -> None:
    """Compile the query every compile runs (a sandbox zygote does before it serves)."""
    _core_query()


def compile_next_group() -> bool:
    """Compile one lazy group not compiled yet; ``False`` when none is left. A sandbox
    zygote calls it while no worker is wanted, so that the workers it forks later compile
    none themselves (≈55 ms in all, off its start)."""
    for group in _LAZY_GROUPS:
        if group._query is None:
            group.query()
            return True
    return False


def capture(root: ts.Node, data: bytes) -> dict[str, list[ts.Node]]:
    """Every capture of the query in the tree of ``data``, by capture name, in source order."""
    found = ts.QueryCursor(_core_query()).captures(root)
    extra = [
        ts.QueryCursor(group.query()).captures(root)
        for group in _LAZY_GROUPS
        if group.needed(data, found)
    ]
    for captures in extra:
        for name, nodes in captures.items():
            if name in found:
                found[name] = sorted([*found[name], *nodes], key=lambda n: n.start_byte)
            else:
                found[name] = nodes
    return found


# What to write instead, for each refused construct (the message is model-visible).
REJECTIONS: dict[str, str] = {
    "enum": "enums are not supported: use a const object, e.g. "
    "`const Color = { Red: 'red' } as const`",
    "namespace": "namespaces and module declarations are not supported: "
    "use plain functions and objects",
    "import_alias": "`import x = ...` is not supported: use `const x = ...`",
    "decorator": "decorators are not supported: call the function explicitly",
    "import": "imports are not supported: the code runs alone and reaches tools through "
    "`tools.<source>.<tool>(...)`",
    "export": "exports are not supported: the code is the body of a function; "
    "`return` the value instead",
    "dynamic_import": "`import()` is not supported: tools are reached through "
    "`tools.<source>.<tool>(...)`",
    "require": "`require` is not supported: tools are reached through `tools.<source>.<tool>(...)`",
    "meta_property": "`import.meta` is not supported: the code is not a module",
    "parameter_property": "parameter properties are not supported: declare the field in the "
    "class body and assign it in the constructor",
    "generic_tag": "type arguments on a tagged template (tag<T>`...`) are not supported: "
    "write the tag without them",
    "generic_call": "TypeScript reads `f<T>(x)` here as a call with type arguments, but the "
    "parser read comparisons: end the statement with `;`, or write `(a < b) > (c)` if "
    "comparisons are meant",
    "html_comment": "HTML-like comments (`<!--`, `-->`) are not supported: use `//` comments",
    "keyword_break": "a line break inside or right after the type at the start of this "
    "`return`/`throw`/`yield` operand changes its meaning once types are erased: keep the "
    "operand on the keyword's line",
    "accessor": "auto-accessors (`accessor x`) are not supported by the engine: "
    "write a getter and a setter",
    "async_break": "a line break between `async <T>` and the parameters changes the meaning "
    "once types are erased: keep `async <T>(...)` on one line",
    "arrow_break": "a line break inside an arrow function's return type is not supported: "
    "keep `): Type =>` on one line",
}
