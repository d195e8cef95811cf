"""Reference resolution for the projection: every ``$ref`` of a document → a JSON pointer.

Resolution follows the document's own base URIs (embedded ``$id`` resources, anchors) and
never fetches anything; a reference that leaves the document resolves to ``None``.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

LEGACY_DIALECTS = frozenset(
    {
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-04/schema#",
    }
)


def _decode_pointer(fragment: str) -> list[str] | None:
    if fragment == "":
        return []
    if not fragment.startswith("/"):
        return None
    return [unquote(p).replace("~1", "/").replace("~0", "~") for p in fragment[1:].split("/")]


def split_pointer(pointer: str) -> list[str]:
    """An internal (not URI-encoded) JSON pointer → tokens."""
    if not pointer:
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def resolve(document: Any, tokens: list[str]) -> Any:
    node = document
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list | tuple) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})


def _escape_token(token: str) -> str:
    if "~" in token or "/" in token:
        return token.replace("~", "~0").replace("/", "~1")
    return token


_DOCUMENT_URI = "urn:codemode:document"
_DRAFT4 = "http://json-schema.org/draft-04/schema#"


def _join(base: str, ref: str) -> str:
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if urlsplit(ref).scheme:
        return ref
    return urljoin(base, ref)


@dataclass(frozen=True, slots=True)
class Index:
    refs: list[tuple[str, str | None]]
    """(pointer of the schema holding a ``$ref``, pointer of its target or ``None``), sorted."""
    targets: dict[int, str | None]
    """``id()`` of a schema holding a ``$ref`` → target pointer (``None``: not in the document)."""


def build_index(document: Any, dialect: str | None) -> Index:
    """One walk that resolves every ``$ref`` to a JSON pointer inside the document, honouring
    embedded ``$id`` resources (base URIs) and ``$anchor`` / draft-07 ``"$id": "#name"``."""
    legacy = dialect in LEGACY_DIALECTS
    id_keyword = "id" if dialect == _DRAFT4 else "$id"
    resources: dict[str, str] = {_DOCUMENT_URI: ""}
    anchors: dict[tuple[str, str], str] = {}
    pending: list[tuple[str, int, str]] = []
    stack: list[tuple[Any, str, str]] = [(document, "", _DOCUMENT_URI)]
    while stack:
        node, pointer, base = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            ident = node.get(id_keyword)
            if isinstance(ident, str) and not (legacy and isinstance(ref, str)):
                if ident.startswith("#"):
                    anchors.setdefault((base, ident[1:]), pointer)
                else:
                    uri, fragment = urldefrag(_join(base, ident))
                    base = uri
                    resources.setdefault(uri, pointer)
                    if fragment and not fragment.startswith("/"):
                        anchors.setdefault((uri, fragment), pointer)
            for keyword in ("$anchor", "$dynamicAnchor"):
                anchor = node.get(keyword)
                if isinstance(anchor, str):
                    anchors.setdefault((base, anchor), pointer)
            if isinstance(ref, str):
                pending.append((pointer, id(node), _join(base, ref)))
            for key, value in node.items():
                if isinstance(value, dict | list) and key not in _DATA_KEYWORDS:
                    stack.append((value, pointer + "/" + _escape_token(str(key)), base))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                if isinstance(value, dict | list):
                    stack.append((value, f"{pointer}/{i}", base))
    refs: list[tuple[str, str | None]] = []
    targets: dict[int, str | None] = {}
    for holder, node_id, absolute in pending:
        uri, fragment = urldefrag(absolute)
        target: str | None = None
        resource = resources.get(uri)
        if resource is not None:
            if fragment == "" or fragment.startswith("/"):
                tokens = _decode_pointer(fragment) or []
                candidate = resource + "".join("/" + _escape_token(t) for t in tokens)
                if resolve(document, split_pointer(candidate)) is not None:
                    target = candidate
            else:
                target = anchors.get((uri, fragment))
        refs.append((holder, target))
        targets[node_id] = target
    refs.sort(key=lambda r: (r[0], r[1] or ""))
    return Index(refs, targets)


class AnalyzedSchema:
    """A plain-JSON schema document with every ``$ref`` resolved, independent of naming,
    so one analysis serves every file that declares the same tool."""

    __slots__ = (
        "_components",
        "_holders",
        "_successors",
        "dialect",
        "document",
        "index",
        "signatures",
    )

    def __init__(self, document: Any) -> None:
        self.document = document
        dialect = document.get("$schema") if isinstance(document, dict) else None
        self.dialect = dialect if isinstance(dialect, str) else None
        self.index = build_index(document, self.dialect)
        self.signatures: dict[str, str | None] = {}
        """Target pointer → digest of its closure (``None``: reaches the root)."""
        self._holders = [holder for holder, _ in self.index.refs]
        self._successors: dict[str, list[str]] = {}
        self._components: dict[str, str | None] = {}
        """Target pointer → digest of its strongly connected component's closure."""

    def signature(self, pointer: str) -> str | None:
        """A digest of ``pointer``'s closure: the target, every target referenced from
        inside it, and so on, each with its pointer and its JSON."""
        if pointer not in self.signatures:
            self._sign_from(pointer)
        return self.signatures[pointer]

    def _successors_of(self, pointer: str) -> list[str]:
        """Targets of the references held at ``pointer`` or anywhere inside it."""
        found = self._successors.get(pointer)
        if found is None:
            refs, holders = self.index.refs, self._holders
            # ``refs`` is sorted by holder: the holders inside ``pointer`` form one run
            # (``0`` follows ``/``), so no lookup scans every reference.
            exact = range(bisect_left(holders, pointer), bisect_right(holders, pointer))
            inside = range(bisect_left(holders, pointer + "/"), bisect_left(holders, pointer + "0"))
            targets = {refs[i][1] for r in (exact, inside) for i in r}
            targets.discard(None)
            found = self._successors[pointer] = sorted(t for t in targets if t is not None)
        return found

    def _sign_from(self, start: str) -> None:
        """Signs every target reachable from ``start`` in one pass over the strongly
        connected components of the reference graph (Tarjan's algorithm, iterative).

        A closure is its component's members plus the closures of the components it
        references, so each component's digest is built from its members' JSON and its
        successors' digests, once: listing each closure whole is quadratic in the
        length of a chain of definitions and cubic with a scan of every reference per
        step (a 78 KB schema took 30 s)."""
        order: dict[str, int] = {}
        low: dict[str, int] = {}
        on_stack: set[str] = set()
        stack: list[str] = []
        frames: list[tuple[str, list[str], list[int]]] = [(start, self._successors_of(start), [0])]
        order[start] = low[start] = 0
        stack.append(start)
        on_stack.add(start)
        while frames:
            node, successors, position = frames[-1]
            if position[0] < len(successors):
                successor = successors[position[0]]
                position[0] += 1
                if successor in self.signatures:
                    continue  # signed by an earlier pass: its component is closed
                if successor not in order:
                    order[successor] = low[successor] = len(order)
                    stack.append(successor)
                    on_stack.add(successor)
                    frames.append((successor, self._successors_of(successor), [0]))
                elif successor in on_stack:
                    low[node] = min(low[node], order[successor])
                continue
            frames.pop()
            if frames:
                parent = frames[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] != order[node]:
                continue
            members: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            self._close(members)

    def _close(self, members: list[str]) -> None:
        """Signs one component; every component it references is signed already."""
        inside = set(members)
        outside: set[str] = set()
        reaches_root = "" in inside
        for member in members:
            for successor in self._successors_of(member):
                if successor not in inside:
                    digest = self._components[successor]
                    if digest is None:
                        reaches_root = True
                    else:
                        outside.add(digest)
        component: str | None = None
        if not reaches_root:
            hasher = hashlib.sha256(b"component")
            for member in sorted(members):
                node = resolve(self.document, split_pointer(member))
                text = json.dumps(node, sort_keys=True, ensure_ascii=False, default=str)
                hasher.update(f"\n{member}\t{text}".encode())
            for digest in sorted(outside):
                hasher.update(f"\n{digest}".encode())
            component = hasher.hexdigest()
        for member in members:
            self._components[member] = component
            self.signatures[member] = (
                None
                if component is None
                else hashlib.sha256(f"{self.dialect}\n{member}\n{component}".encode()).hexdigest()
            )
