"""Ranking for ``search_tools``: a need scored against the catalog's search index
(``index.py``), BM25F-like with the need's wording rules (``need.py``); see ``search.py``
for the contract and docs/adr/0012, 0034, 0038.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
from dataclasses import dataclass

from codemodekit.search.index import SearchIndex
from codemodekit.search.lexicon import derived, related
from codemodekit.search.need import (
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
_PREFIX_EXPANSIONS = 24
_EXACT_BONUS = 1_000_000.0
_PREFIX_BONUS = 1_000.0
# (weight, length normalization b) per field: the name says most about what a tool does.
_SYNONYM_WEIGHT = 0.8
_PREFIX_WEIGHT = 0.72
_ROOT_WEIGHT = 0.27
"""A word of the same family (``invitation`` for "invite"): see ``search.text.root``."""
_VERB_SHARE = 0.5
"""What a generic verb counts for in ``word_coverage`` (a topic word counts 1)."""

_PHRASE_BONUS = 0.5
"""Per pair of the need's adjacent words found adjacent in a matched tool's name."""
_ACTION_BONUS = 1.22
"""Added to a matched tool whose name performs the action the need names."""
_DESTRUCTIVE_FACTOR = 0.7
"""A matched tool that deletes or removes, for a need that names no such action."""

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


def _variants(index: SearchIndex, term: str, lexicon: bool = True) -> list[tuple[str, float]]:
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


def _query_units(index: SearchIndex, query: str) -> list[list[tuple[str, float]]]:
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


def _unit_scores(index: SearchIndex, variants: list[tuple[str, float]]) -> dict[int, float]:
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


def score(index: SearchIndex, query: str, docs: range, limit: int) -> tuple[dict[int, float], int]:
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

    index: SearchIndex
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


def _intent(index: SearchIndex, query: str) -> _Intent:
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


def _has(index: SearchIndex, term: str, doc: int) -> bool:
    docs = index.postings[term][0]
    at = bisect.bisect_left(docs, doc)
    return at < len(docs) and docs[at] == doc


_NOT_TOPIC = frozenset(w for pair in QUANTITY_CUES for w in pair if w != "number")


def word_coverage(index: SearchIndex, query: str, doc: int) -> tuple[float, float]:
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
