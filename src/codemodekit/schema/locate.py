"""Where an invalid instance fails, found without asking ``jsonschema-rs`` for error trees.

``jsonschema-rs`` builds every error beneath the one it reports: an ``anyOf`` error
carries the errors of every branch (each holding a copy of its instance) and ``allOf``
collects all its branches' errors before the first is returned. Nested, that is
exponential in the schema (a 1.3 KB chain of ``anyOf``) or costs the instance size times
its depth in copies (1.3 MB of arguments took 4 GB, then aborted the process).

So a report is found by a walk of our own over locations known to be invalid, using only
``is_valid`` (which short-circuits and builds no error) on subschemas compiled against the
same document: at each location, the node's own assertions (a copy of the node whose
subschemas are all ``true``, so its errors cannot nest), then the members and in-place
subschemas (``$ref``, ``allOf``, ``if``/``then``/``else``...) that are invalid, in about
the validator's order, each walked in turn. A location where none fails is worded the
way ``jsonschema-rs`` words its ``anyOf`` / ``oneOf`` / ``not`` errors. Every check spends
one unit of a fixed budget; past it, the deepest location known to be invalid is
reported as not matching the schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, unquote

import jsonschema_rs

from codemodekit.schema.normalize import DRAFT4, DRAFT6, DRAFT7

MAX_CHECKS = 512
"""Validity checks one report may spend (each costs at most one ``is_valid`` of the
instance); a report past it names the deepest invalid location found."""

NOT_MATCHING = "does not match the schema"

Part = str | int
Pointer = tuple[str, ...]
Found = tuple[tuple[Part, ...], str, str]
"""(instance path parts, message, keyword)."""
Candidate = tuple[Pointer, Any, tuple[Part, ...]]
"""(subschema pointer, the instance it applies to, that instance's path)."""

_URI = "urn:codemodekit:report"
_LEGACY_REF = frozenset({DRAFT7, DRAFT6, DRAFT4})
_NO_IF = frozenset({DRAFT6, DRAFT4})
_ARRAY_ITEMS = frozenset({DRAFT7, DRAFT6, DRAFT4, "https://json-schema.org/draft/2019-09/schema"})
# Keywords that can fail without being an own assertion or a candidate of the walk.
_UNMODELED = frozenset(
    {"anyOf", "oneOf", "not", "contains", "unevaluatedProperties", "unevaluatedItems"}
    | {"$dynamicRef", "$recursiveRef", "dependencies"}
)
_UNMODELED_LEGACY = (_UNMODELED - {"dependencies"}) | {"dependentSchemas"}
# Own assertions the validator reports after the members' errors.
_CLOSING = frozenset({"additionalProperties", "additionalItems", "items"})
_IDENTIFIERS = ('"$id":', '"$anchor":', '"$dynamicAnchor":', '"$recursiveAnchor":')
# Keywords that assert on the node itself and hold no subschema.
_ASSERTIONS = frozenset(
    {"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum"}
    | {"exclusiveMinimum", "maxLength", "minLength", "pattern", "format", "maxItems"}
    | {"minItems", "uniqueItems", "maxProperties", "minProperties", "required"}
    | {"dependentRequired"}
)


_MISSING: Any = object()


class _OutOfBudget(Exception):
    pass


class _Run:
    """Many members that one subschema applies to: array items or object values."""

    __slots__ = ("keys", "pointer", "values")

    def __init__(
        self, pointer: Pointer, values: list[Any], keys: list[tuple[Part, ...]] | int
    ) -> None:
        self.pointer = pointer
        self.values = values
        self.keys = keys
        """Each value's path below the instance, or the index of the first item."""

    def rel(self, index: int) -> tuple[Part, ...]:
        return (self.keys + index,) if isinstance(self.keys, int) else self.keys[index]


def _fragment(pointer: Pointer) -> str:
    return "".join("/" + quote(t.replace("~", "~0").replace("/", "~1"), safe="") for t in pointer)


def _refuse(uri: str) -> Any:
    raise LookupError(f"remote $ref {uri} is not fetched")


_PREVIEW = 100
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _dump(value: Any) -> str:
    """The instance as ``jsonschema-rs`` prints it in messages (compact, sorted keys), cut
    short: the encoder is lazy, so a large instance is not encoded whole."""
    out: list[str] = []
    size = 0
    for chunk in _ENCODER.iterencode(value):
        out.append(chunk)
        size += len(chunk)
        if size > _PREVIEW:
            return "".join(out)[:_PREVIEW] + "…"
    return "".join(out)


class Locator:
    """Walks one normalized schema document; build once per validator, on first error."""

    __slots__ = (
        "_dialect",
        "_document",
        "_follow_refs",
        "_options",
        "_patterns",
        "_registry",
        "_shallow",
        "_sub",
    )

    def __init__(
        self, document: Mapping[str, Any], text: str, dialect: str, pattern_options: Any
    ) -> None:
        self._document = document
        self._dialect = dialect
        self._options = pattern_options  # the validator's regular expression engine
        # With embedded resources or anchors a pointer is no longer relative to the root:
        # references are then not followed (the walk still covers the rest).
        root_id = 1 if '"$id":' in text and "$id" in document else 0
        self._follow_refs = sum(text.count(marker) for marker in _IDENTIFIERS) <= root_id and not (
            dialect == DRAFT4 and '"id":' in text
        )
        self._registry: jsonschema_rs.Registry | None = None
        self._sub: dict[tuple[Pointer, bool], jsonschema_rs.Validator | None] = {}
        """Compiled subschemas; read and filled without a lock (a race compiles twice)."""
        self._shallow: dict[Pointer, jsonschema_rs.Validator | bool | None] = {}
        self._patterns: dict[str, jsonschema_rs.Validator] = {}

    # -- checks -------------------------------------------------------------------------

    @staticmethod
    def _spend(budget: list[int]) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise _OutOfBudget

    def _valid(
        self, budget: list[int], pointer: Pointer, instance: Any, *, each: bool = False
    ) -> bool:
        """Whether ``instance`` is valid against the subschema at ``pointer`` (with
        ``each``: whether every value of the list ``instance`` is)."""
        self._spend(budget)
        key = (pointer, each)
        validator = self._sub.get(key, _MISSING)
        if validator is _MISSING:
            if len(self._sub) > 4 * MAX_CHECKS:
                self._sub.clear()
            try:
                if self._registry is None:
                    self._registry = jsonschema_rs.Registry([(_URI, dict(self._document))])
                target = {"$ref": _URI + "#" + _fragment(pointer)}
                wrapper = (
                    {"$schema": self._dialect, "type": "array", "items": target}
                    if each
                    else {"$schema": self._dialect, **target}
                )
                validator = jsonschema_rs.validator_for(
                    wrapper,
                    registry=self._registry,
                    retriever=_refuse,
                    pattern_options=self._options,
                )
            except Exception:  # unresolvable here: the walk stops at this location
                validator = None
            self._sub[key] = validator
        if validator is None:
            raise _OutOfBudget
        return bool(validator.is_valid(instance))

    def _own_errors(
        self,
        budget: list[int],
        pointer: Pointer,
        node: Mapping[str, Any],
        instance: Any,
        limit: int,
    ) -> list[tuple[str, Found]] | None:
        """Up to ``limit`` errors of the node's own assertions, each with its keyword;
        ``None`` when they could not be checked."""
        if pointer not in self._shallow:
            shallow = _shallow(node, self._dialect)
            compiled: jsonschema_rs.Validator | bool | None = False  # nothing to check
            if len(shallow) > 1:
                try:
                    compiled = jsonschema_rs.validator_for(
                        shallow, retriever=_refuse, pattern_options=self._options
                    )
                except Exception:
                    compiled = None
            self._shallow[pointer] = compiled
        validator = self._shallow[pointer]
        if validator is None or validator is False or validator is True:
            return None if validator is None else []
        self._spend(budget)
        out: list[tuple[str, Found]] = []
        for error in validator.iter_errors(instance):
            keyword = str(error.schema_path[0]) if error.schema_path else ""
            out.append((keyword, (tuple(error.instance_path), str(error.message), _kind(error))))
            if len(out) >= limit:
                break
        return out

    def _matches(self, budget: list[int], pattern: str, key: str) -> bool:
        """Whether ``key`` matches a ``patternProperties`` expression, as the validator
        matches it (ECMA 262 syntax on the validator's engine)."""
        self._spend(budget)
        validator = self._patterns.get(pattern)
        if validator is None:
            try:
                validator = jsonschema_rs.validator_for(
                    {"$schema": self._dialect, "pattern": pattern}, pattern_options=self._options
                )
            except Exception:  # the schema compiled, so it does; if not, stop here
                raise _OutOfBudget from None
            self._patterns[pattern] = validator
        return bool(validator.is_valid(key))

    # -- the walk -----------------------------------------------------------------------

    def _node(self, pointer: Pointer) -> Any:
        node: Any = self._document
        for token in pointer:
            node = node[int(token)] if isinstance(node, list) else node[token]
        return node

    def _target(self, ref: Any) -> Pointer | None:
        if not self._follow_refs or not isinstance(ref, str) or not ref.startswith("#"):
            return None
        if ref == "#":
            return ()
        if not ref.startswith("#/"):
            return None
        pointer = tuple(
            unquote(t).replace("~1", "/").replace("~0", "~") for t in ref[2:].split("/")
        )
        try:
            self._node(pointer)
        except (KeyError, IndexError, ValueError, TypeError):
            return None
        return pointer

    def _members(
        self, budget: list[int], pointer: Pointer, node: Mapping[str, Any], instance: Any
    ) -> list[Candidate | _Run]:
        """Subschemas that apply to members of ``instance``, in the validator's order;
        many members of one subschema (items, additional properties) as one run."""
        out: list[Candidate | _Run] = []
        if isinstance(instance, dict):
            properties = node.get("properties")
            named = properties if isinstance(properties, dict) else {}
            patterns = node.get("patternProperties")
            patterns = patterns if isinstance(patterns, dict) else {}
            extra = node.get("additionalProperties")
            if patterns:
                for key, value in instance.items():
                    matched = key in named
                    if matched:
                        out.append(((*pointer, "properties", key), value, (key,)))
                    for pattern in patterns:
                        if self._matches(budget, pattern, key):
                            matched = True
                            out.append(((*pointer, "patternProperties", pattern), value, (key,)))
                    if not matched and isinstance(extra, dict):
                        out.append(((*pointer, "additionalProperties"), value, (key,)))
                return out
            if not isinstance(extra, dict):
                return [
                    ((*pointer, "properties", k), v, (k,))
                    for k, v in instance.items()
                    if k in named
                ]
            if len(instance) <= _FEW:
                return [
                    (
                        (*pointer, "properties", k)
                        if k in named
                        else (*pointer, "additionalProperties"),
                        v,
                        (k,),
                    )
                    for k, v in instance.items()
                ]
            out = [
                ((*pointer, "properties", k), v, (k,)) for k, v in instance.items() if k in named
            ]
            keys = [k for k in instance if k not in named]
            values = [instance[k] for k in keys]
            out.append(_Run((*pointer, "additionalProperties"), values, [(k,) for k in keys]))
        elif isinstance(instance, list):
            items = node.get("items")
            if self._dialect not in _ARRAY_ITEMS:
                prefix, prefix_key = node.get("prefixItems"), "prefixItems"
                rest, rest_key = items, "items"
            elif isinstance(items, list):
                prefix, prefix_key = items, "items"
                rest, rest_key = node.get("additionalItems"), "additionalItems"
            else:
                prefix, prefix_key, rest, rest_key = None, "", items, "items"
            count = min(len(prefix), len(instance)) if isinstance(prefix, list) else 0
            out = [((*pointer, prefix_key, str(i)), instance[i], (i,)) for i in range(count)]
            if isinstance(rest, dict) and len(instance) > count:
                if len(instance) - count <= _FEW:
                    out.extend(
                        ((*pointer, rest_key), instance[i], (i,))
                        for i in range(count, len(instance))
                    )
                else:
                    out.append(_Run((*pointer, rest_key), instance[count:], count))
        return out

    def _in_place(
        self,
        budget: list[int],
        pointer: Pointer,
        node: Mapping[str, Any],
        instance: Any,
        only_ref: bool,
    ) -> Iterator[Pointer]:
        """Subschemas that apply to the instance itself and that the walk can enter."""
        if "$ref" in node:
            target = self._target(node["$ref"])
            if target is not None:
                yield target
        if only_ref:
            return
        all_of = node.get("allOf")
        if isinstance(all_of, list):
            for index in range(len(all_of)):
                yield (*pointer, "allOf", str(index))
        if "if" in node and ("then" in node or "else" in node) and self._dialect not in _NO_IF:
            branch = "then" if self._valid(budget, (*pointer, "if"), instance) else "else"
            if branch in node:
                yield (*pointer, branch)
        keyword = "dependencies" if self._dialect in _LEGACY_REF else "dependentSchemas"
        schemas = node.get(keyword)
        if isinstance(instance, dict) and isinstance(schemas, dict):
            for key, sub in schemas.items():
                if key in instance and isinstance(sub, dict | bool):
                    yield (*pointer, keyword, key)

    def _visit(
        self, budget: list[int], pointer: Pointer, instance: Any, path: tuple[Part, ...], limit: int
    ) -> Iterator[tuple[bool, Any]]:
        """Reports at this invalid location, and invalid members or in-place subschemas
        to visit, in about the order ``jsonschema-rs`` reports them."""
        node = self._node(pointer)
        if not isinstance(node, dict):
            yield True, (path, *self._last_word(budget, pointer, node, instance))
            return
        reported = False
        only_ref = "$ref" in node and self._dialect in _LEGACY_REF  # siblings are ignored
        own = [] if only_ref else self._own_errors(budget, pointer, node, instance, limit)
        closing = [found for keyword, found in own or () if keyword in _CLOSING]
        for keyword, (rel, message, kind) in own or ():
            if keyword not in _CLOSING:
                reported = True
                yield True, ((*path, *rel), message, kind)
        members = [] if only_ref else self._members(budget, pointer, node, instance)
        targets = self._in_place(budget, pointer, node, instance, only_ref)
        in_place: list[Candidate | _Run] = [(target, instance, ()) for target in targets]
        entries: list[Candidate | _Run] = [*members, *in_place]
        # The candidates holding nested values (a run of them counts as too many).
        nested: list[int] = []
        for index, entry in enumerate(members):
            if isinstance(entry, _Run):
                if not set(map(type, entry.values)) <= _SCALARS:  # the type scan runs in C
                    nested.append(-1)
            elif isinstance(entry[1], dict | list | tuple):
                nested.append(index)
        if in_place:
            nested = [len(members)]  # the instance itself outweighs its members
        # ``additionalProperties: false`` and the like come between these two.
        before, after = members, in_place
        if (
            own == []
            and len(entries) > 1
            and 0 < len(nested) <= _FEW
            and -1 not in nested
            and self._modeled(node, only_ref)
        ):
            # Nothing else here can fail, so when every other candidate is valid the
            # heaviest is invalid without validating it: validating it, then its heaviest
            # member, and so on, is quadratic in the depth of nested values. The others
            # are checked first (disjoint, each lighter than it: linear overall).
            which, small = _heaviest([entries[i][1] for i in nested])  # type: ignore[index]
            heaviest: Candidate = entries[nested[which]]  # type: ignore[assignment]
            others = [e for i, e in enumerate(entries) if i != nested[which]]
            if next(self._failing(budget, others), None) is None:
                before, after = [], []
                sub, value, rel = heaviest
                reported = True
                yield False, (sub, value, (*path, *rel))
            elif not small:
                before, after = others, [heaviest]  # a heavy one is reported last
        for sub, value, rel in self._failing(budget, before):
            reported = True
            yield False, (sub, value, (*path, *rel))
        for rel, message, kind in closing:
            reported = True
            yield True, ((*path, *rel), message, kind)
        for sub, value, rel in self._failing(budget, after):
            reported = True
            yield False, (sub, value, (*path, *rel))
        if not reported:
            yield True, (path, *self._last_word(budget, pointer, node, instance))

    def _failing(self, budget: list[int], entries: list[Candidate | _Run]) -> Iterator[Candidate]:
        """The invalid candidates among ``entries``, in order. Consecutive candidates of
        one subschema, or a run, are checked as one array and bisected when invalid, so a
        long array costs a few checks, not one per item."""
        start = 0
        while start < len(entries):
            entry = entries[start]
            if isinstance(entry, _Run):
                run, start = entry, start + 1
            else:
                end = start + 1
                while (
                    end < len(entries)
                    and not isinstance(entries[end], _Run)
                    and entries[end][0] == entry[0]  # type: ignore[index]
                ):
                    end += 1
                if end - start == 1:
                    start = end
                    if not self._valid(budget, entry[0], entry[1]):
                        yield entry
                    continue
                group: list[Candidate] = entries[start:end]  # type: ignore[assignment]
                run = _Run(entry[0], [c[1] for c in group], [c[2] for c in group])
                start = end
            for index in self._bisect(budget, run):
                yield run.pointer, run.values[index], run.rel(index)

    def _bisect(self, budget: list[int], run: _Run) -> Iterator[int]:
        """Indices of the invalid values of ``run``, in order."""
        values, low = run.values, 0
        while low < len(values) and not self._all_valid(budget, run.pointer, values[low:]):
            high = len(values)  # values[low:high] holds an invalid value: find the first
            while high - low > 1:
                middle = (low + high) // 2
                if self._all_valid(budget, run.pointer, values[low:middle]):
                    low = middle
                else:
                    high = middle
            yield low
            low += 1

    def _all_valid(self, budget: list[int], pointer: Pointer, values: list[Any]) -> bool:
        """Whether every value is valid against the subschema at ``pointer``."""
        return self._valid(budget, pointer, values, each=True)

    def _modeled(self, node: Mapping[str, Any], only_ref: bool) -> bool:
        """Whether every keyword of ``node`` that can fail is an own assertion the shallow
        copy checks or a candidate ``_visit`` enumerates."""
        if "$ref" in node and self._target(node["$ref"]) is None:
            return False
        if only_ref:
            return True
        unmodeled = _UNMODELED_LEGACY if self._dialect in _LEGACY_REF else _UNMODELED
        if any(keyword in node for keyword in unmodeled):
            return False
        names = node.get("propertyNames", {})
        return isinstance(names, dict) and set(names) <= _ASSERTIONS

    def _last_word(
        self, budget: list[int], pointer: Pointer, node: Any, instance: Any
    ) -> tuple[str, str]:
        """The message for a location whose own assertions and subschemas all pass."""
        if node is False:
            return f"False schema does not allow {_dump(instance)}", "falseSchema"
        if not isinstance(node, dict):
            return NOT_MATCHING, ""
        for keyword in ("anyOf", "oneOf"):
            branches = node.get(keyword)
            if not isinstance(branches, list):
                continue
            valid = 0
            for index in range(len(branches)):
                if self._valid(budget, (*pointer, keyword, str(index)), instance):
                    valid += 1
                    if keyword == "anyOf" or valid > 1:
                        break
            if valid == 0:
                return (
                    f"{_dump(instance)} is not valid under any of the schemas listed in the "
                    f"'{keyword}' keyword",
                    keyword,
                )
            if keyword == "oneOf" and valid > 1:
                return (
                    f"{_dump(instance)} is valid under more than one of the schemas listed "
                    "in the 'oneOf' keyword",
                    keyword,
                )
        if "not" in node and self._valid(budget, (*pointer, "not"), instance):
            return f"{_dump(node['not'])} is not allowed for {_dump(instance)}", "not"
        return NOT_MATCHING, ""

    def locate(self, instance: Any, limit: int) -> list[Found]:
        """Up to ``limit`` reports for an ``instance`` the whole schema rejects."""
        budget = [MAX_CHECKS]  # per call: a validator may serve several threads
        found: list[Found] = []
        path: tuple[Part, ...] = ()
        stack = [self._visit(budget, (), instance, path, limit)]
        try:
            while stack and len(found) < limit:
                item = next(stack[-1], None)
                if item is None:
                    stack.pop()
                elif item[0]:  # a report: (path, message, keyword)
                    found.append(item[1])
                else:  # an invalid subschema to visit: (pointer, instance, path)
                    pointer, value, path = item[1]
                    stack.append(self._visit(budget, pointer, value, path, limit - len(found)))
        except _OutOfBudget:
            if not found:
                found.append((path, NOT_MATCHING, ""))
        return found


SMALL = 1000
_FEW = 64
_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Values of at most this many nodes are validated in the validator's report order even
when that costs checking the heaviest of several candidates."""


def _heaviest(values: list[Any]) -> tuple[int, bool]:
    """The index of the value with about the most nodes, and whether it has at most
    ``SMALL`` of them.

    All are walked in rounds of doubling length until one is left, so this costs about
    twice the size of all but the heaviest value (plus ``SMALL``)."""
    stacks: list[list[Any]] = [[value] for value in values]
    counts = [0] * len(values)
    running = list(range(len(values)))
    steps = 1
    while len(running) > 1:
        still = []
        for index in running:
            stack, goal = stacks[index], counts[index] + steps
            while stack and counts[index] < goal:
                counts[index] += _step(stack)
            if stack:
                still.append(index)
        if not still:  # the last ones ended in the same round: the largest wins
            return max(running, key=counts.__getitem__), True
        running, steps = still, steps * 2
    heaviest = running[0]
    stack = stacks[heaviest]
    while stack and counts[heaviest] <= SMALL:
        counts[heaviest] += _step(stack)
    return heaviest, counts[heaviest] <= SMALL


def _step(stack: list[Any]) -> int:
    """Pops one value, pushes its container members; the number of nodes it counted."""
    node = stack.pop()
    if isinstance(node, dict):
        members: Any = node.values()
    elif isinstance(node, list | tuple):
        members = node
    else:
        return 1
    if not set(map(type, members)) <= _SCALARS:  # the type scan runs in C
        stack.extend([m for m in members if isinstance(m, dict | list | tuple)])
    return 1 + len(node)


def _kind(error: jsonschema_rs.ValidationError) -> str:
    try:
        return str(error.kind.name)
    except Exception:  # pragma: no cover - depends on the jsonschema-rs version
        return ""


def _shallow(node: Mapping[str, Any], dialect: str) -> dict[str, Any]:
    """``node``'s own assertions, every subschema replaced by ``true`` or left out."""
    out: dict[str, Any] = {"$schema": dialect}
    for key, value in node.items():
        if key in _ASSERTIONS:
            out[key] = value
        elif key in ("properties", "patternProperties") and isinstance(value, dict):
            out[key] = dict.fromkeys(value, True)
        elif key in ("additionalProperties", "additionalItems", "items"):
            if isinstance(value, bool):
                out[key] = value
            elif key == "items" and isinstance(value, list):
                out[key] = [True] * len(value)
        elif key == "prefixItems" and isinstance(value, list):
            out[key] = [True] * len(value)
        elif key == "dependencies" and isinstance(value, dict):
            kept = {k: v for k, v in value.items() if isinstance(v, list)}
            if kept:
                out[key] = kept
        elif key == "propertyNames" and isinstance(value, dict) and set(value) <= _ASSERTIONS:
            out[key] = value
    return out


__all__ = ["MAX_CHECKS", "NOT_MATCHING", "Locator"]
