"""A general English lexicon for search: words related to a query word by meaning.

``lexicon.tsv.gz`` is derived mechanically from Princeton WordNet (``scripts/
build_search_lexicon.py``; licence below): for each common noun or verb (one with sense
counts in WordNet's ``cntlist``), the single-word lemmas sharing one of its first three
senses (synonyms) and, for verbs, those of the senses' direct hypernyms ("strip" ->
remove, "tag" -> label, attach); and for words used mostly as verbs, whether their first
sense sees/knows or changes something. Nothing in it was chosen for a query; see
docs/adr/0034. Search uses the synonyms only for query words the catalog never uses, and
the verb kind only for a need's leading verb the catalog does not name.

Loaded when a search index is built, never at import.

WordNet 3.1 Copyright 2011 by Princeton University. All rights reserved. The licence, with
its disclaimer, is in ``lexicon.LICENSE`` beside the table and applies to the table.
"""

from __future__ import annotations

import functools
import gzip
from importlib import resources

from codemodekit.search.text import stem

_Related = tuple[tuple[str, ...], tuple[str, ...]]


@functools.cache
def _tables() -> tuple[dict[str, _Related], dict[str, str], dict[str, tuple[str, ...]]]:
    raw = resources.files("codemodekit.search").joinpath("lexicon.tsv.gz").read_bytes()
    table: dict[str, _Related] = {}
    kinds: dict[str, str] = {}
    family: dict[str, tuple[str, ...]] = {}
    for line in gzip.decompress(raw).decode("utf-8").splitlines():
        lemma, synonyms, broader, kind, derived = line.split("\t")
        key = stem(lemma) if "_" not in lemma else lemma
        if kind:
            kinds[key] = kind if kinds.get(key, kind) == kind else "?"
        if derived:
            words = (w for w in map(stem, derived.split()) if w != key)
            family[key] = tuple(dict.fromkeys((*family.get(key, ()), *words)))
        if not synonyms and not broader:
            continue
        old = table.get(key, ((), ()))
        table[key] = (
            tuple(dict.fromkeys((*old[0], *map(stem, synonyms.split())))),
            tuple(dict.fromkeys((*old[1], *map(stem, broader.split())))),
        )
    return table, {k: v for k, v in kinds.items() if v != "?"}, family


def related(term: str) -> _Related:
    """(synonyms, broader words) of a stemmed term or of a phrase ``take_off``, stemmed."""
    return _tables()[0].get(term, ((), ()))


def verb_kind(term: str) -> str:
    """For a stemmed word used mostly as a verb: "r" when its first sense perceives or
    knows (see, inspect, choose), "w" when it changes, makes, moves or gives something
    (save, wipe, give); "" otherwise."""
    return _tables()[1].get(term, "")


def derived(term: str) -> tuple[str, ...]:
    """Words of the same family as a stemmed term by WordNet's derivation links (approv ->
    approval, visibility -> visibl, publicly -> public), stemmed."""
    return _tables()[2].get(term, ())


def warm() -> None:
    """Load the lexicon now (with a search index) rather than on the first query."""
    _tables()
