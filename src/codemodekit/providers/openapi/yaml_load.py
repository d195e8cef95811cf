"""Loading a YAML document with bounded work: no alias bomb, no cycle, no runaway depth.

YAML aliases let a 1 KB document stand for billions of nodes ("billion laughs"); building
it exhausts memory long before any size check sees it. So the document is first composed
into its node graph (where an alias is one shared node, not a copy), the graph is measured
as it would be once expanded, and only a document within budget is constructed:

- at most ``MAX_ALIASES`` alias references, adding at most ``MAX_ALIAS_EXPANSION`` nodes
  to those written out (so memory stays proportional to the document's own size);
- no alias cycle (JSON cannot represent one);
- nesting at most ``MAX_YAML_DEPTH`` levels;
- an optional ``deadline`` (``time.monotonic()`` value) checked while measuring and
  constructing, so a source's ``timeout_ms`` bounds the whole load.

The C parser (``yaml.CSafeLoader``, libyaml) is used when PyYAML was built with it: about
three times faster on large documents. Timestamps stay strings with either parser.
"""

from __future__ import annotations

import time
from typing import Any

import yaml

MAX_ALIASES = 10_000
MAX_ALIAS_EXPANSION = 1_000_000
MAX_YAML_DEPTH = 512
_CHECK_EVERY = 4096


class YamlBudgetExceeded(ValueError):
    """The document is over a budget; the message says which and is safe to show."""


def _without_timestamps(base: type[Any]) -> type[Any]:
    class Loader(base):  # type: ignore[misc]
        """Safe YAML without implicit timestamps: a date-looking example stays a string."""

    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }
    Loader.__name__ = f"Bounded{base.__name__}"
    return Loader


PY_LOADER: type[Any] = _without_timestamps(yaml.SafeLoader)
C_LOADER: type[Any] | None = (
    _without_timestamps(yaml.CSafeLoader) if hasattr(yaml, "CSafeLoader") else None
)


def _deadline_check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError("loading the document took longer than the source's timeout")


def measure(root: yaml.Node, deadline: float | None = None) -> int:
    """Nodes of ``root`` once every alias is expanded; raises past a budget or on a cycle."""
    expanded: dict[int, int] = {}  # node id -> expanded size, once finished
    on_path: set[int] = set()
    aliases = 0
    visited = 0
    # Iterative post-order walk: (node, depth, children done?)
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            # Python integers: even an astronomically large expansion costs nothing here.
            expanded[key] = 1 + sum(expanded[id(child)] for child in _children(node))
            continue
        if key in expanded:
            aliases += 1  # a node reached again: an alias reference
            if aliases > MAX_ALIASES:
                raise YamlBudgetExceeded(
                    f"the document uses more than {MAX_ALIASES} YAML alias references"
                )
            continue
        if key in on_path:
            raise YamlBudgetExceeded("the document has a recursive YAML alias (a cycle)")
        if depth > MAX_YAML_DEPTH:
            raise YamlBudgetExceeded(f"the document nests deeper than {MAX_YAML_DEPTH} levels")
        visited += 1
        if visited % _CHECK_EVERY == 0:
            _deadline_check(deadline)
        on_path.add(key)
        stack.append((node, depth, True))
        children = _children(node)
        for child in reversed(children):
            if id(child) in on_path:
                raise YamlBudgetExceeded("the document has a recursive YAML alias (a cycle)")
            stack.append((child, depth + 1, False))
    total = expanded[id(root)]
    if total - visited > MAX_ALIAS_EXPANSION:
        raise YamlBudgetExceeded(
            f"YAML aliases would add {total - visited} nodes to the {visited} written out "
            f"(at most {MAX_ALIAS_EXPANSION}); refusing to build it (an alias bomb?)"
        )
    return total


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def load_yaml(text: str, *, deadline: float | None = None, use_c: bool = True) -> Any:
    """The document of ``text`` (``None`` if empty), within the budgets above.

    Raises ``yaml.YAMLError`` for invalid YAML, ``YamlBudgetExceeded`` past a budget and
    ``TimeoutError`` past ``deadline``.
    """
    loader_class = C_LOADER if use_c and C_LOADER is not None else PY_LOADER
    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        measure(root, deadline)
        calls = 0
        original = loader.construct_object

        def construct_object(node: yaml.Node, deep: bool = False) -> Any:
            nonlocal calls
            calls += 1
            if calls % _CHECK_EVERY == 0:
                _deadline_check(deadline)
            return original(node, deep)

        loader.construct_object = construct_object
        return loader.construct_document(root)
    finally:
        loader.dispose()


__all__ = [
    "MAX_ALIASES",
    "MAX_ALIAS_EXPANSION",
    "MAX_YAML_DEPTH",
    "YamlBudgetExceeded",
    "load_yaml",
    "measure",
]
