"""The search index of ``search_tools``: per catalog revision, the model-visible tools'
words by field, weighted BM25F-like into posting lists, with what ranking needs besides
(names, actions, adjacent name words, read/change hints). Built once per revision and
cached; ``rank.py`` scores needs against it (docs/adr/0012, 0034, 0038).
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codemodekit.catalog.catalog import Catalog, ToolDefinition
from codemodekit.search.lexicon import warm
from codemodekit.search.need import CHANGE, SEE
from codemodekit.search.text import ACTION_VERBS, normalized, root, stem, tokenize, words

_CACHE_SIZE = 2
_K1 = 1.2
_FIELDS: dict[str, tuple[float, float]] = {
    "name": (1.19, 0.5),
    "source": (1.0, 0.0),
    "lead": (2.0, 0.5),
    "description": (0.49, 0.75),
    "properties": (1.0, 0.5),
    "parameters": (0.3, 0.75),
    "path": (0.5, 0.5),
}
"""``lead`` is the tool's title and the description's first sentence (usually the summary):
their words count twice. ``parameters``: the descriptions of the top-level properties."""
_COVERAGE_BONUS = 0.7
"""Added per query term a tool matches, so tools matching more of the need rank higher."""
_NAME_BONUS = 7.0
"""Times the share of the tool name's words the query covers."""
_DEPRECATED_FACTOR = 0.85
"""Deprecated tools stay findable but rank below an otherwise equal current one."""
_LEAD_BONUS = 2.4
"""Times the share of the summary's words a matched term covers."""
_PARAMETER_CHARS = 300
"""Of each property's description, the first characters are indexed."""
_ENUM_VALUES = 16
"""At most this many allowed values of a property are indexed (long enums are data)."""
_LEAD = re.compile(r"(?<=[.!?])\s|\n")


@dataclass(slots=True)
class SearchIndex:
    tools: tuple[ToolDefinition, ...]
    """Available tools in address order: a document id is a position here."""
    postings: dict[str, tuple[array[int], array[float]]]
    """term -> (document ids, precomputed contributions); arrays keep 47,000 tools compact."""
    vocabulary: list[str]
    """Sorted terms, for prefix expansion."""
    exact: dict[str, tuple[int, ...]]
    """Normalized name / key / address -> documents."""
    names: list[tuple[str, int]]
    """Sorted (normalized name or key, document), for name-prefix matches."""
    source_ranges: dict[str, tuple[int, int]]
    actions: list[str | None]
    """Per tool, the action its name performs: the first of its words that is a verb."""
    alternatives: dict[int, str]
    """Tools whose name offers a second action after "or" (``create_or_update_secret``):
    that action."""
    pairs: dict[tuple[str, str], array[int]]
    """Two terms adjacent in a tool's name -> those tools (``remove_label``: remove, label)."""
    family: dict[str, tuple[str, ...]]
    """A root -> the index terms derived from it (``invit``: invitation, invit)."""
    reads: bytes
    """Per tool: 1 when it declares it only reads (``readOnlyHint``), 2 when it declares it
    changes something, 0 when it says neither."""
    verb_reads: dict[str, bool]
    """An action verb -> whether the catalog's tools performing it read (True) or change
    (False), learned from their hints; verbs the hints do not settle are absent."""


_cache: OrderedDict[str, SearchIndex] = OrderedDict()
_cache_lock = threading.Lock()


def index_for(catalog: Catalog) -> SearchIndex:
    """The catalog's search index, built on first use per revision and cached."""
    with _cache_lock:
        index = _cache.get(catalog.revision)
        if index is not None:
            _cache.move_to_end(catalog.revision)
            return index
    index = _build(catalog.model_tools)
    with _cache_lock:
        _cache[catalog.revision] = index
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return index


def _property_names(schema: Mapping[str, Any]) -> Iterable[str]:
    # Top-level properties and one level of nesting: deeper names are rarely what a need
    # names. The string values a top-level property allows name states a need may ask for
    # ("pets that are available" -> ``status: "available" | "pending" | "sold"``).
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return
    for name, sub in props.items():
        yield name
        if not isinstance(sub, Mapping):
            continue
        if isinstance(sub.get("properties"), Mapping):
            yield from sub["properties"]
        values = sub.get("enum")
        items = sub.get("items")
        if values is None and isinstance(items, Mapping):
            values = items.get("enum")
        if isinstance(values, list | tuple):
            yield from (v for v in values[:_ENUM_VALUES] if isinstance(v, str))


def _parameter_text(schema: Mapping[str, Any]) -> str:
    """The descriptions of the top-level properties ("Filter by state: open or closed")."""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return ""
    texts = (sub.get("description") for sub in props.values() if isinstance(sub, Mapping))
    return " ".join(t[:_PARAMETER_CHARS] for t in texts if isinstance(t, str))


def _lead(tool: ToolDefinition) -> str:
    """The description's first sentence, after the tool's title when that says more."""
    lead = _LEAD.split(tool.description, 1)[0]
    title = tool.annotations.get("title")
    if isinstance(title, str) and title.strip() and not tool.description.startswith(title.strip()):
        return f"{title.strip()}. {lead}"
    return lead


def _path_text(tool: ToolDefinition) -> str:
    """The literal segments of an HTTP operation's path (``GET /repos/{owner}/{repo}/
    issues`` -> "repos issues"): the resource a tool acts on and its scope."""
    operation = tool.provenance.get("operation")
    if not isinstance(operation, str) or " " not in operation:
        return ""
    path = operation.split(" ", 1)[1]
    return " ".join(s for s in path.split("/") if s and not s.startswith("{"))


def _reads(tool: ToolDefinition) -> int:
    hint = tool.annotations.get("readOnlyHint")
    return SEE if hint is True else CHANGE if hint is False else 0


def _build(available: Iterable[ToolDefinition]) -> SearchIndex:
    tools = tuple(sorted(available, key=lambda t: t.address))
    count = len(tools)
    field_terms: dict[str, list[list[str]]] = {f: [] for f in _FIELDS}
    source_terms: dict[str, list[str]] = {}
    for tool in tools:
        field_terms["name"].append(tokenize(tool.name))
        if tool.source not in source_terms:
            source_terms[tool.source] = tokenize(tool.source)
        field_terms["source"].append(source_terms[tool.source])
        field_terms["lead"].append(tokenize(_lead(tool)))
        field_terms["description"].append(tokenize(tool.description))
        field_terms["properties"].append(
            [t for p in _property_names(tool.input_schema) for t in tokenize(p)]
        )
        field_terms["parameters"].append(tokenize(_parameter_text(tool.input_schema)))
        field_terms["path"].append(tokenize(_path_text(tool)))
    averages = {
        f: (sum(map(len, docs)) / count if count else 0.0) or 1.0 for f, docs in field_terms.items()
    }
    # BM25F: per document, add up field-weighted, length-normalized term frequencies, then
    # saturate once; idf is applied when the posting lists are frozen below.
    weighted: dict[str, dict[int, float]] = {}
    for fname, (weight, b) in _FIELDS.items():
        average = averages[fname]
        for doc, terms in enumerate(field_terms[fname]):
            if not terms:
                continue
            norm = weight / (1.0 - b + b * len(terms) / average)
            for term in terms:
                per_doc = weighted.setdefault(term, {})
                per_doc[doc] = per_doc.get(doc, 0.0) + norm
    # A posting's value folds in everything that depends only on (term, tool): the BM25F
    # score, a per-term coverage bonus (tools matching more of the need rank higher) and the
    # term's share of the tool's name (names are short verb-object phrases, so "get a pull
    # request" prefers ``pulls_get`` over ``pulls_get_review``).
    name_sets = [frozenset(terms) for terms in field_terms["name"]]
    lead_sets = [frozenset(terms) for terms in field_terms["lead"]]
    postings: dict[str, tuple[array[int], array[float]]] = {}
    for term, per_doc in weighted.items():
        df = len(per_doc)
        idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
        docs = tuple(sorted(per_doc))
        values = []
        for d in docs:
            value = idf * per_doc[d] / (_K1 + per_doc[d]) + _COVERAGE_BONUS
            if term in name_sets[d]:
                value += _NAME_BONUS / len(name_sets[d])
            if term in lead_sets[d]:
                value += _LEAD_BONUS / len(lead_sets[d])
            if tools[d].deprecated:
                value *= _DEPRECATED_FACTOR
            values.append(value)
        postings[term] = (array("I", docs), array("d", values))
    exact: dict[str, list[int]] = {}
    names: list[tuple[str, int]] = []
    source_ranges: dict[str, tuple[int, int]] = {}
    for doc, tool in enumerate(tools):
        name_key = normalized(tool.name)
        full_key = normalized(tool.source) + name_key
        for key in {name_key, full_key, normalized(tool.address)}:
            if key:
                exact.setdefault(key, []).append(doc)
        names.append((name_key, doc))
        names.append((full_key, doc))
        lo, _ = source_ranges.get(tool.source, (doc, doc))
        source_ranges[tool.source] = (lo, doc + 1)
    names.sort()
    actions = [next((t for t in terms if t in ACTION_VERBS), None) for terms in field_terms["name"]]
    alternatives: dict[int, str] = {}
    pairs: dict[tuple[str, str], list[int]] = {}
    for doc in range(count):
        # Adjacent as written (stopwords kept): ``list_for_release`` does not pair list+release.
        written = [stem(w) for w in words(tools[doc].name)]
        for pair in dict.fromkeys(itertools.pairwise(written)):
            pairs.setdefault(pair, []).append(doc)
        alternative = _alternative_action(written, actions[doc])
        if alternative is not None:
            alternatives[doc] = alternative
    family: dict[str, list[str]] = {}
    for term in postings:
        family.setdefault(root(term), []).append(term)
    reads = bytes(_reads(tool) for tool in tools)
    warm()  # the lexicon loads with the index, not on the first query
    votes: dict[str, list[int]] = {}
    for doc, action in enumerate(actions):
        if action is not None and reads[doc]:
            votes.setdefault(action, [0, 0])[reads[doc] - 1] += 1
    verb_reads = {
        verb: r > w for verb, (r, w) in votes.items() if max(r, w) >= 4 * min(r, w) and r + w >= 2
    }
    return SearchIndex(
        reads=reads,
        verb_reads=verb_reads,
        family={r: tuple(terms) for r, terms in family.items() if len(terms) > 1},
        actions=actions,
        alternatives=alternatives,
        pairs={p: array("I", docs) for p, docs in pairs.items()},
        tools=tools,
        postings=postings,
        vocabulary=sorted(postings),
        exact={k: tuple(v) for k, v in exact.items()},
        names=names,
        source_ranges=source_ranges,
    )


def _alternative_action(terms: list[str], action: str | None) -> str | None:
    """The verb after "or" right after the name's action (``terms``: the name's stemmed
    words as written): ``create_or_update`` -> update."""
    if action is None:
        return None
    for first, middle, last in zip(terms, terms[1:], terms[2:], strict=False):
        if first == action and middle == "or" and last in ACTION_VERBS:
            return last
    return None
