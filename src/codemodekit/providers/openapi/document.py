"""Reading an OpenAPI document: JSON or YAML, checked, with local and sibling-file ``$ref``s.

Remote references are never fetched: the document is part of the repository and what it
describes must not change behind the user's back. A reference to another file is allowed
only when that file lies inside the document's own folder (or below it).
"""

from __future__ import annotations

import datetime
import itertools
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urlparse

import yaml

from codemodekit.bounded_read import UnreadableFile, read_bounded
from codemodekit.errors import SourceUnavailable
from codemodekit.providers.openapi.yaml_load import YamlBudgetExceeded, load_yaml

log = logging.getLogger(__name__)

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""Larger documents are refused instead of exhausting memory (GitHub's is 13 MB)."""

_MAX_REF_HOPS = 64


class UnresolvedRef(Exception):
    """A ``$ref`` that cannot be followed; ``reason`` is safe to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _jsonify(value: Any) -> Any:
    """Make YAML output JSON-shaped: string keys (``200:`` → ``"200"``), no dates or bytes."""
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else _key(k)): _jsonify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonify(v) for v in value]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def parse_text(text: str, *, name: str, deadline: float | None = None) -> Any:
    """JSON when it parses as JSON, YAML otherwise (YAML 1.1 is a superset in practice).

    YAML is loaded within budgets (aliases, depth, ``deadline``: see ``yaml_load``).
    """
    stripped = text.lstrip()
    try:
        if stripped.startswith(("{", "[")):
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                pass  # YAML flow style also starts with "{"
        return _jsonify(load_yaml(text, deadline=deadline))
    except YamlBudgetExceeded as exc:
        raise SourceUnavailable(f"{name}: {exc}") from None
    except RecursionError:
        raise SourceUnavailable(f"{name}: the document nests too deeply to be read") from None
    except TimeoutError:
        raise SourceUnavailable(
            f"{name}: reading the document took longer than the source's timeout_ms"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise SourceUnavailable(f"{name}{where}: cannot parse the document: {problem}") from None


def read_file(path: Path, deadline: float | None = None) -> Any:
    try:
        raw = read_bounded(path, MAX_DOCUMENT_BYTES)
    except UnreadableFile as exc:
        raise SourceUnavailable(
            f"{path}: cannot read the OpenAPI document: it {exc.reason}"
        ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SourceUnavailable(f"{path}: the document is not UTF-8 text") from None
    return parse_text(text, name=str(path), deadline=deadline)


def escape_pointer_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _pointer_tokens(pointer: str) -> list[str]:
    if pointer in ("", "/"):
        return [] if pointer == "" else [""]
    if not pointer.startswith("/"):
        raise UnresolvedRef(f"JSON pointer {pointer!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def walk_pointer(root: Any, pointer: str) -> Any:
    node = root
    for token in _pointer_tokens(pointer):
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise UnresolvedRef(f"'#{pointer}' does not exist")
    return node


RefKey = tuple[Path, str]
"""(file, JSON pointer): where a referenced value lives."""


@dataclass
class OpenApiDocument:
    """A loaded document plus the sibling files its references reached."""

    path: Path
    root: dict[str, Any]
    version: str
    """``"3.0"``, ``"3.1"`` or ``"3.2"``."""
    warnings: list[str] = field(default_factory=list)
    _files: dict[Path, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path = self.path.resolve()
        self._files[self.path] = self.root

    @property
    def is_30(self) -> bool:
        return self.version == "3.0"

    def file(self, path: Path) -> Any:
        path = path.resolve()
        if path not in self._files:
            folder = self.path.parent
            if not path.is_relative_to(folder):
                raise UnresolvedRef(
                    f"reference to {path.name} outside the document's folder is not followed"
                )
            try:
                self._files[path] = read_file(path)
            except SourceUnavailable as exc:
                raise UnresolvedRef(str(exc)) from None
        return self._files[path]

    def ref_key(self, ref: Any, base: Path) -> RefKey:
        """Where ``ref`` (relative to file ``base``) points. Remote URLs are refused."""
        if not isinstance(ref, str):
            raise UnresolvedRef("$ref must be a string")
        address, fragment = urldefrag(ref)
        parsed = urlparse(address)
        if parsed.scheme and parsed.scheme not in ("file",) and len(parsed.scheme) > 1:
            raise UnresolvedRef(f"remote reference {ref!r} is never fetched")
        if parsed.netloc:
            raise UnresolvedRef(f"remote reference {ref!r} is never fetched")
        target = base
        if address:
            target = (base.parent / unquote(parsed.path if parsed.scheme else address)).resolve()
        pointer = unquote(fragment)
        if pointer and not pointer.startswith("/"):
            raise UnresolvedRef(f"anchor reference {ref!r} is not supported")
        return target, pointer

    def lookup(self, key: RefKey) -> Any:
        return walk_pointer(self.file(key[0]), key[1])

    def deref(self, node: Any, base: Path) -> tuple[Any, Path]:
        """Follow ``$ref`` chains of a non-schema object (parameter, response...)."""
        seen: set[RefKey] = set()
        while isinstance(node, Mapping) and "$ref" in node:
            key = self.ref_key(node["$ref"], base)
            if key in seen or len(seen) >= _MAX_REF_HOPS:
                raise UnresolvedRef(f"$ref {node['$ref']!r} is circular")
            seen.add(key)
            node, base = self.lookup(key), key[0]
        return node, base


def detect_version(root: Any, name: str) -> str:
    if not isinstance(root, dict):
        raise SourceUnavailable(f"{name}: an OpenAPI document must be a mapping at the top level")
    if "swagger" in root:
        raise SourceUnavailable(
            f"{name}: Swagger/OpenAPI 2.0 is not supported; convert it to OpenAPI 3 "
            "(for example with swagger2openapi)"
        )
    raw = root.get("openapi")
    if not isinstance(raw, str):
        raise SourceUnavailable(
            f"{name}: missing the 'openapi' version field (e.g. openapi: 3.1.0)"
        )
    for prefix in ("3.0", "3.1", "3.2"):
        if raw == prefix or raw.startswith(prefix + "."):
            return prefix
    raise SourceUnavailable(f"{name}: OpenAPI version {raw!r} is not supported (3.0, 3.1, 3.2)")


def _error_path(path: Iterator[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document root)"


def check_structure(root: dict[str, Any], version: str, name: str) -> None:
    """Validate against the official OpenAPI schema of ``version`` (openapi-spec-validator).

    The fast (Rust) backend screens the document; when it objects, the reference
    ``jsonschema`` implementation confirms and explains (its ``best_match`` names the
    precise place). Only confirmed errors reject the document: the fast backend also
    asserts ECMA-262 ``format: regex``, which refuses patterns OpenAPI 3.0 allows.
    Confirmed errors that all lie inside Schema Objects are logged and tolerated.

    The library's deeper keyword pass (examples and defaults against their schemas,
    parameter bookkeeping) is not run: it takes seconds on large documents and its
    findings either do not affect calls or are re-checked per operation, where they skip
    that operation with a reason instead of rejecting the whole document.
    """
    import jsonschema
    from jsonschema.exceptions import best_match
    from openapi_spec_validator import schemas

    fast = {
        "3.0": schemas.openapi_v30_schema_validator,
        "3.1": schemas.openapi_v31_schema_validator,
        "3.2": schemas.openapi_v32_schema_validator,
    }[version]
    if next(iter(fast.iter_errors(root)), None) is None:
        return
    from openapi_spec_validator.schemas.utils import get_schema_content

    meta_schema = get_schema_content(version)
    reference = jsonschema.validators.validator_for(meta_schema)(meta_schema)
    errors = list(itertools.islice(reference.iter_errors(root), _MAX_CONFIRMED_ERRORS))
    if not errors:
        return
    if len(errors) < _MAX_CONFIRMED_ERRORS and all(_harmless(error) for error in errors):
        # Real descriptions often carry small Schema Object slips (`pattern: 0`, a 3.1
        # `type: 'null'` in a 3.0 document, `required: true` on a property) or an extra
        # top-level field. They do not change how an operation is called: the schema is
        # converted as far as it makes sense (a construct it cannot use is an unknown
        # value, and the catalog quarantines a tool whose schema stays unusable), instead
        # of refusing every operation of the API. Anything else still rejects it.
        first = _example(errors[0])
        log.warning(
            "%s: %d problem(s) inside Schema Objects or in extra top-level fields tolerated, e.g. at %s: %s",
            name,
            len(errors),
            _error_path(iter(first.absolute_path)),
            _short(str(first.message)),
        )
        return
    serious = [error for error in errors if not _harmless(error)] or errors
    best = _leaf(best_match(serious), best_match)
    raise SourceUnavailable(
        f"{name}: invalid OpenAPI {version} document at "
        f"{_error_path(iter(best.absolute_path))}: {_short(str(best.message))}"
    )


_MAX_CONFIRMED_ERRORS = 200


def _leaf(error: Any, best_match: Any) -> Any:
    """oneOf/anyOf: the closest branch's own complaint is the useful one."""
    while error.context:
        deeper = best_match(error.context)
        if deeper is None:
            break
        error = deeper
    return error


def _harmless(error: Any) -> bool:
    """Whether the error lies inside a Schema Object (a ``schema`` or ``components.schemas``),
    or is an unknown field of the document root or its descriptive parts.

    A oneOf/anyOf failure is harmless when one of its branches failed only harmlessly; the
    branch that merely misses ``$ref`` (the object is not a Reference) does not count.
    """
    if error.context:
        branches: dict[Any, list[Any]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        return any(
            all(_harmless(sub) for sub in subs)
            for subs in branches.values()
            if not all(_missing_ref(sub) for sub in subs)
        )
    path = list(error.absolute_path)
    if "schema" in path or (path[:2] == ["components", "schemas"] and len(path) >= 3):
        return True
    return error.validator == "additionalProperties" and (
        not path or path[0] in ("info", "tags", "externalDocs")
    )


def _example(error: Any) -> Any:
    """The innermost tolerated complaint under ``error`` (for the log line)."""
    while error.context:
        inner = [s for s in error.context if _harmless(s) and not _missing_ref(s)]
        if not inner:
            break
        error = inner[0]
    return error


def _missing_ref(error: Any) -> bool:
    return error.validator == "required" and "'$ref'" in error.message


def _short(message: str) -> str:
    return message if len(message) <= 300 else message[:297] + "..."


def load_document(path: Path, *, deadline: float | None = None) -> OpenApiDocument:
    """Read, parse and check ``path``. Raises ``SourceUnavailable`` with a precise reason.

    ``deadline`` (a ``time.monotonic()`` value) bounds the parse of a large document.
    """
    name = path.name
    root = read_file(path, deadline)
    version = detect_version(root, str(path))
    check_structure(root, version, name)
    return OpenApiDocument(path=path, root=root, version=version)
