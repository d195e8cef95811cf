"""Whether a script ends in a bare expression (``x`` as its last line), read from its parse.

The user's code is the body of an async function: only an explicit ``return`` gives the
run a value, so ``const n = 1; n`` returns nothing. The run warns when the code has no
``return`` and ends this way (issue 20).
"""

from __future__ import annotations

import tree_sitter as ts

_SKIPPED = frozenset({"comment", "empty_statement", "hash_bang_line"})


def ends_in_expression(root: ts.Node) -> bool:
    """Whether the last top-level statement of ``root`` is an expression statement."""
    for node in reversed(root.named_children):
        if node.type in _SKIPPED:
            continue
        return node.type == "expression_statement"
    return False
