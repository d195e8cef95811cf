"""Ranking for ``search_tools``: the per-revision index of the model-visible tools and the
BM25F-like scoring over it (see ``search.py`` for the contract and docs/adr/0012).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import operator
import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codemodekit.catalog.catalog import Catalog, ToolDefinition
from codemodekit.search.lexicon import derived, related, warm
from codemodekit.search.need import (
    CHANGE,
    SEE,
    UNDO_VERBS,
    YES_NO_WORDS,
    asks_for_many,
    lead_position,
    names_change,
    need_kind,
    phrasal_actions,
    separates,
    undoes,
)
from codemodekit.search.text import (
    ABBREVIATIONS,
    ACTION_VERBS,
    DESTRUCTIVE_VERBS,
    FIRST_PERSON,
    NEGATING_VERBS,
    QUANTITY_CUES,
    QUANTITY_TERMS,
    READ_VERBS,
    SELF_TERMS,
    STOPWORDS,
    SYNONYMS,
    normalized,
    root,
    stem,
    tokenize,
    words,
)

MAX_QUERY_TERMS = 32
_CACHE_SIZE = 2
_PREFIX_EXPANSIONS = 24
_EXACT_BONUS = 1_000_000.0
_PREFIX_BONUS = 1_000.0
_K1 = 1.2
# (weight, length normalization b) per field: the name says most about what a tool does.
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
_SYNONYM_WEIGHT = 0.8
_PREFIX_WEIGHT = 0.72
_ROOT_WEIGHT = 0.27
"""A word of the same family (``invitation`` for "invite"): see ``search.text.root``."""
_VERB_SHARE = 0.5
"""What a generic verb counts for in ``word_coverage`` (a topic word counts 1)."""

_PHRASE_BONUS = 0.5
"""Per pair of the need's adjacent words found adjacent in a matched tool's name."""
_LEAD_BONUS = 2.4
"""Times the share of the summary's words a matched term covers."""
_PARAMETER_CHARS = 300
"""Of each property's description, the first characters are indexed."""
_ENUM_VALUES = 16
"""At most this many allowed values of a property are indexed (long enums are data)."""
_ACTION_BONUS = 1.22
"""Added to a matched tool whose name performs the action the need names."""
_DESTRUCTIVE_FACTOR = 0.7
"""A matched tool that deletes or removes, for a need that names no such action."""

_LEAD = re.compile(r"(?<=[.!?])\s|\n")
_READ_FACTOR = 0.85
"""A tool that changes something, for a need that only asks to see (and the converse):
the tool's ``readOnlyHint`` against ``need.need_kind``."""
_SELF_WEIGHT = 1.0
_VERB_BEFORE = frozenset("and or then to also please i we you they".split())  # noqa: SIM905
"""Words after which an action word stands as a verb ("find and delete", "I watch")."""
_DERIVED_WEIGHT = 0.5
"""The caller's own terms (``authenticated``, ``current``, ``me``) for "my", "I", "me"."""
_LEXICON_SYNONYM_WEIGHT = 0.5
_LEXICON_BROADER_WEIGHT = 0.35
"""A query word the catalog never uses stands for its lexicon synonyms and broader words
(``search.lexicon``) at these weights."""
_COLLECTION_WEIGHT = 0.8
_ENDING = frozenset((stem("cancel"), *SYNONYMS[stem("cancel")]))
"""Actions that end something ("cancel an order"): a tool that deletes it may do that."""


@dataclass(slots=True)
class _Index:
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


_cache: OrderedDict[str, _Index] = OrderedDict()
_cache_lock = threading.Lock()


def index_for(catalog: Catalog) -> _Index:
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


def _build(available: Iterable[ToolDefinition]) -> _Index:
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
    return _Index(
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


def _variants(index: _Index, term: str, lexicon: bool = True) -> list[tuple[str, float]]:
    """The index terms a query term stands for, with their weight factor."""
    out: dict[str, float] = {}
    if term in index.postings:
        out[term] = 1.0
    for synonym in SYNONYMS.get(term, ()):
        if synonym in index.postings:
            out.setdefault(synonym, _SYNONYM_WEIGHT)
    for relative in index.family.get(root(term), ()):
        out.setdefault(relative, _ROOT_WEIGHT)
    for relative in derived(term):
        if relative in index.postings and out.get(relative, 0.0) < _DERIVED_WEIGHT:
            out[relative] = _DERIVED_WEIGHT
    if lexicon and term not in index.postings:
        synonyms, broader = related(term)
        for words_, weight in (
            (synonyms, _LEXICON_SYNONYM_WEIGHT),
            (broader, _LEXICON_BROADER_WEIGHT),
        ):
            for word in words_:
                if word in index.postings and out.get(word, 0.0) < weight:
                    out[word] = weight
    if len(term) >= 3 and not term.isdigit():
        start = bisect.bisect_left(index.vocabulary, term)
        added = 0
        for candidate in index.vocabulary[start:]:
            if not candidate.startswith(term) or added >= _PREFIX_EXPANSIONS:
                break
            if candidate not in out:
                out[candidate] = _PREFIX_WEIGHT
                added += 1
    return sorted(out.items())


def _query_units(index: _Index, query: str) -> list[list[tuple[str, float]]]:
    """Each unit of meaning in the query, as the index terms (with weights) that express it.

    A unit is a query word (with its stem, synonyms and prefix expansions), a first-person
    word standing for the current user, or two adjacent words written as one in the index
    ("log in" -> ``login``, "pet store" -> ``petstore``).
    """
    raw = words(query)
    units: list[list[tuple[str, float]]] = []
    seen: set[str] = set()

    def add_word(term: str) -> None:
        if term not in seen:
            seen.add(term)
            units.append(_variants(index, term))

    for at, w in enumerate(raw):
        if undoes(raw, at):
            continue  # "stop sharing": the need is to undo the sharing, not a "stop" tool
        if w in ABBREVIATIONS:
            for term in ABBREVIATIONS[w]:
                add_word(term)
        elif w in FIRST_PERSON:
            if "\0self" not in seen:
                seen.add("\0self")
                units.append([(t, _SELF_WEIGHT) for t in SELF_TERMS if t in index.postings])
        elif w not in STOPWORDS:
            add_word(stem(w))
    for first, second in itertools.pairwise(raw):
        joined = stem(first + second)
        if joined not in seen and joined in index.postings and len(first) + len(second) > 4:
            seen.add(joined)
            units.append([(joined, 1.0)])
        if first in NEGATING_VERBS:
            negated = "un" + stem(second)
            if negated not in seen and negated in index.postings:
                seen.add(negated)
                units.append([(negated, 1.0)])
    if "\0count" not in seen and any(p in QUANTITY_CUES for p in itertools.pairwise(raw)):
        seen.add("\0count")
        counts = sorted({stem(t) for t in QUANTITY_TERMS} & index.postings.keys())
        units.append([(t, _SYNONYM_WEIGHT) for t in counts])
    # "delete all patterns" is one change, not a listing.
    if (
        "list" not in seen
        and "list" in index.postings
        and asks_for_many(raw)
        and not names_change(raw, index.postings)
    ):
        seen.add("list")
        units.append([("list", _COLLECTION_WEIGHT)])
    if not any(units):  # a query made only of stopwords still means something
        for w in raw:
            add_word(stem(w))
    return [unit for unit in units if unit][:MAX_QUERY_TERMS]


def _unit_scores(index: _Index, variants: list[tuple[str, float]]) -> dict[int, float]:
    """Per document, the best score among a query unit's variants (a unit counts once)."""
    # The largest posting list is copied in C; the others are merged in Python.
    ordered = sorted(variants, key=lambda v: (-len(index.postings[v[0]][0]), v[0]))
    term, factor = ordered[0]
    docs, weights = index.postings[term]
    best = dict(zip(docs, weights if factor == 1.0 else map(factor.__mul__, weights), strict=True))
    for term, factor in ordered[1:]:
        docs, weights = index.postings[term]
        for doc, w in zip(docs, weights, strict=True):
            value = factor * w
            if value > best.get(doc, 0.0):
                best[doc] = value
    return best


def score(index: _Index, query: str, docs: range, limit: int) -> tuple[dict[int, float], int]:
    """Scores of the documents in ``docs`` that may rank in the top ``limit``, and how many
    in ``docs`` match at all."""
    units = sorted(
        (_unit_scores(index, variants) for variants in _query_units(index, query)),
        key=len,
        reverse=True,
    )
    scores: dict[int, float] = units[0] if units else {}
    for unit in units[1:]:
        for doc, value in unit.items():
            scores[doc] = scores.get(doc, 0.0) + value
    if len(docs) < len(index.tools):
        scores = {d: v for d, v in scores.items() if d in docs}
    key = normalized(query)
    tiers: dict[int, float] = {}
    if len(key) >= 3:
        start = bisect.bisect_left(index.names, (key, -1))
        for name, doc in index.names[start:]:
            if not name.startswith(key):
                break
            tiers[doc] = tiers.get(doc, 0.0) + _PREFIX_BONUS
    for doc in index.exact.get(key, ()):
        tiers[doc] = tiers.get(doc, 0.0) + _EXACT_BONUS
    tiers = {d: v for d, v in tiers.items() if d in docs}
    matched = len(scores.keys() | tiers.keys())
    adjust = _intent(index, query)
    if len(scores) > 4 * limit:
        # The intent rules only scale down or add at most ``adjust.most``: a tool whose
        # lexical score is that far below the adjusted top ``limit`` cannot reach them, so
        # only the others pay for the rules (the same result, without a pass over all).
        best = dict(heapq.nlargest(limit, scores.items(), key=operator.itemgetter(1)))
        adjust.apply(best)
        bound = heapq.nlargest(limit, best.values())[-1] - adjust.most - 1e-6
        scores = {d: v for d, v in scores.items() if v >= bound or d in tiers}
    adjust.apply(scores)
    for doc, bonus in tiers.items():
        scores[doc] = scores.get(doc, 0.0) + bonus
    return scores, matched


@dataclass(slots=True)
class _Intent:
    """What a need's wording says beyond its terms: per action verb a (factor, bonus), and
    pairs of its words a tool name may have side by side."""

    index: _Index
    weights: dict[str, tuple[float, float]]
    pairs: list[tuple[str, str]]
    reads: int = 0
    """1: the need only asks to see; 2: it asks for a change; 0: it does not say."""

    @property
    def most(self) -> float:
        """The largest amount ``apply`` can add to one score."""
        return max((b for _, b in self.weights.values()), default=0.0) + _PHRASE_BONUS * len(
            self.pairs
        )

    def apply(self, scores: dict[int, float]) -> None:
        actions = self.index.actions
        weights = self.weights
        reads = self.index.reads
        wanted = self.reads
        alternatives = self.index.alternatives
        for doc, score in scores.items():
            weight = weights.get(actions[doc])  # type: ignore[arg-type]
            if doc in alternatives:
                # Either action of a ``create_or_update`` tool may be the one named.
                other = weights.get(alternatives[doc])
                if other is not None and (weight is None or other[1] > weight[1]):
                    weight = other
            if weight is not None:
                score = score * weight[0] + weight[1]
            if wanted and reads[doc] and reads[doc] != wanted:
                score *= _READ_FACTOR
            scores[doc] = score
        for pair in self.pairs:
            for doc in self.index.pairs.get(pair, ()):
                if doc in scores:
                    scores[doc] += _PHRASE_BONUS


def _intent(index: _Index, query: str) -> _Intent:
    """Action intent: prefer tools performing the action the need names; without a
    destructive word in the need, rank tools that delete or remove lower. Name phrases: a
    tool whose name has two of the need's words side by side, in its order ("remove a
    label" -> ``remove_label``, not ``remove_all_labels``), ranks higher."""
    raw = words(query)
    # "who starred", "repositories I watched": a past participle names a state, not the
    # action wanted.
    # An action word counts where a verb stands: leading the need, or after "and", "to",
    # a subject ("I", "we"); not as a noun ("a review", "pull request", "check runs").
    lead = lead_position(raw)
    named = {
        v
        for i, w in enumerate(raw)
        if (v := stem(w)) in ACTION_VERBS
        and not w.endswith("ed")
        and (i == lead or i == 0 or raw[i - 1] in _VERB_BEFORE)
    }
    if raw and raw[0] in YES_NO_WORDS:  # "does a team have access": a check answers
        named.add("check")
    named |= phrasal_actions(raw, ACTION_VERBS)  # "throw away" -> remove
    undo = False
    for at, (first, second) in enumerate(itertools.pairwise(raw)):
        if first in NEGATING_VERBS:  # "stop following": the action is ``unfollow``
            named.discard(stem(second))
            named.add("un" + stem(second))
            if undoes(raw, at):
                # "stop sharing X with Y": undo the sharing (remove, disable, revoke).
                named.discard(stem(first))
                named.difference_update(SYNONYMS.get(stem(first), ()))
                undo = True
    if separates(raw):
        # "take a label off a runner": the need undoes (remove, disable, revoke, delete).
        assert lead is not None
        named.discard(stem(raw[lead]))
        named.difference_update(SYNONYMS.get(stem(raw[lead]), ()))
        undo = True
    if undo:
        named.update(UNDO_VERBS)
        # and "un" + a catalog action (unpin, unlock, unstar) undoes that action.
        named.update(v for v in ACTION_VERBS if v.startswith("un") and v[2:] in ACTION_VERBS)
    if asks_for_many(raw) and not named - READ_VERBS - {"list"}:
        # "get all issues" is a listing: the read verbs stand for "list".
        named = {v for v in named if v != "get" and "get" not in SYNONYMS.get(v, ())}
        named.add("list")
    if any(stem(w) in DESTRUCTIVE_VERBS - ACTION_VERBS for w in raw):
        # "wipe", "purge", "erase": a destructive word no tool is named by stands for the
        # catalog's own destructive actions.
        named.update(DESTRUCTIVE_VERBS & ACTION_VERBS)
    for verb in list(named):
        named.update(s for s in SYNONYMS.get(verb, ()) if s in ACTION_VERBS)
    weights = {verb: (1.0, _ACTION_BONUS) for verb in named}
    if not named & (DESTRUCTIVE_VERBS | _ENDING):
        weights.update((verb, (_DESTRUCTIVE_FACTOR, 0.0)) for verb in DESTRUCTIVE_VERBS)
    pairs = list(dict.fromkeys(itertools.pairwise(tokenize(query))))
    return _Intent(
        index,
        weights,
        [p for p in pairs if p in index.pairs],
        need_kind(raw, index.verb_reads, index.postings),
    )


def _has(index: _Index, term: str, doc: int) -> bool:
    docs = index.postings[term][0]
    at = bisect.bisect_left(docs, doc)
    return at < len(docs) and docs[at] == doc


_NOT_TOPIC = frozenset(w for pair in QUANTITY_CUES for w in pair if w != "number")


def word_coverage(index: _Index, query: str, doc: int) -> tuple[float, float]:
    """How many of the need's words tool ``doc`` matches, of how many: (matched, words).

    A word is each query word that is not a stopword, a number or shorter than 3 letters
    (``v1.2``, ``42`` and "I" carry no topic); it is matched through any of its variants
    (its stem, synonyms, family or a prefix). A best hit matching fewer than half is
    reported as a weak match: the catalog likely has no tool for the need.
    """
    matched = total = 0.0
    for w in words(query):
        if w in _NOT_TOPIC or w in STOPWORDS or w in FIRST_PERSON or w.isdigit() or len(w) < 3:
            continue
        term = stem(w)
        # A generic verb ("show", "get", "list") matches much of any catalog: half a word.
        generic = term in ACTION_VERBS or any(s in ACTION_VERBS for s in SYNONYMS.get(term, ()))
        weight = _VERB_SHARE if generic else 1.0
        total += weight
        # A word met only through the general lexicon is a distant relative: not a match.
        if any(_has(index, v, doc) for v, _ in _variants(index, term, lexicon=False)):
            matched += weight
    return matched, total


def top(scores: dict[int, float], limit: int) -> list[int]:
    """The ``limit`` best documents; ties (up to float noise) break by address = document id."""
    # Select by raw score in C first; only candidates near the cut-off pay for rounding.
    cutoff = heapq.nlargest(limit, scores.values())[-1]
    cutoff -= 1e-9 * max(1.0, abs(cutoff))
    candidates = [(d, s) for d, s in scores.items() if s >= cutoff]
    candidates.sort(key=lambda item: (-round(item[1], 9), item[0]))
    return [doc for doc, _ in candidates[:limit]]
