"""Human-readable diagnostics: ``error[CODE]: message`` with the user's line and a caret."""

from __future__ import annotations

from codemodekit.errors import Diagnostic

EXCERPT_WIDTH = 100
"""Characters of the offending line shown; a longer line is cut around the column."""


def source_excerpt(source: str, line: int, column: int) -> str:
    """The offending line of ``source`` with a caret under ``column`` (both 1-based)."""
    # Rows are counted on "\n", as the compiler and the engine count them (str.splitlines
    # also breaks at \f, \x1c-\x1e, \x85, U+2028/9 and a lone \r).
    lines = source.split("\n")
    if not 1 <= line <= len(lines):
        return ""
    text = lines[line - 1].rstrip("\r").expandtabs(1)  # one column per tab keeps columns aligned
    offset = max(column, 1) - 1
    if len(text) > EXCERPT_WIDTH:
        # Minified or generated code can put thousands of characters on one line.
        start = max(0, min(offset - EXCERPT_WIDTH // 3, len(text) - EXCERPT_WIDTH))
        end = start + EXCERPT_WIDTH
        prefix = "…" if start > 0 else ""
        text = prefix + text[start:end] + ("…" if end < len(text) else "")
        offset = offset - start + len(prefix)
    width = len(str(line))
    caret = " " * offset + "^"
    return f"{line:>{width}} | {text}\n{'':>{width}} | {caret}"


def render_diagnostic(diagnostic: Diagnostic, source: str = "", filename: str = "<code>") -> str:
    """Concise text a person or a model can act on."""
    head = f"error[{diagnostic.code}]: {diagnostic.message}"
    parts = [head]
    if diagnostic.location is not None:
        loc = diagnostic.location
        parts.append(f"  --> {filename}:{loc.line}:{loc.column}")
        excerpt = source_excerpt(source, loc.line, loc.column)
        if excerpt:
            parts.append(excerpt)
    if diagnostic.tool:
        parts.append(f"  tool: {diagnostic.tool}")
    if diagnostic.correlation_id:
        parts.append(f"  correlation id: {diagnostic.correlation_id}")
    return "\n".join(parts)
