"""What a need's wording says beyond its terms: whether it asks to see or to change
something, and whether it asks for one thing or many. Read from the words alone (and, for
verbs, from what the catalog's own tools declare), so ``rank.py`` can weigh tools by it.
See docs/adr/0034.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from codemodekit.search.lexicon import related, verb_kind
from codemodekit.search.text import (
    ACTION_VERBS,
    COLLECTION_CUES,
    NEGATING_VERBS,
    READ_VERBS,
    STOPWORDS,
    SYNONYMS,
    stem,
)

QUESTION_WORDS = frozenset(
    "what which who whom whose where when how is are was were does do did can has have".split()  # noqa: SIM905
)
"""A need that opens with one of these asks to see something."""
YES_NO_WORDS = frozenset("is are was were does do did can has have".split())  # noqa: SIM905
"""A need that opens with one of these asks a yes/no question: a ``check`` answers it."""
SINGULAR_CUES = frozenset("one single specific particular given certain".split())  # noqa: SIM905
"""A need naming one of something ("details of one runner") does not ask for a listing,
whatever else in it is plural."""
_FILLER = frozenset("please i want need to we us lets".split())  # noqa: SIM905
UNDO_VERBS = tuple(stem(w) for w in ("remove", "disable", "revoke", "delete"))
""""stop sharing X", "stop using X": the need undoes something; tools doing these answer."""

_ARTICLE = True
DETERMINERS = frozenset(
    "a an the my our your his her its their this that these those one all every each some any".split()  # noqa: SIM905
)
"""Words that open a noun phrase: a need that starts with one names a thing to see."""
PARTICLES = frozenset("away off back out up down over".split())  # noqa: SIM905
"""Adverb particles of English phrasal verbs ("throw away", "take off", "bring back")."""
SEPARATING = frozenset(("off", "away"))
"""Particles that, after a verb's object, separate it from something ("take X off")."""

SEE, CHANGE = 1, 2
"""Kinds of need and of tool (0: unknown), as ``index.SearchIndex.reads`` stores them."""


def lead_position(raw: list[str]) -> int | None:
    """Where the need's leading word is: its first word that is not a question word or
    filler ("please", "I want to")."""
    return next(
        (i for i, w in enumerate(raw) if w not in _FILLER and w not in QUESTION_WORDS), None
    )


def lexicon_kind(raw: list[str], vocabulary: Container[str] = ()) -> str:
    """The lexicon's kind ("r" sees, "w" changes; see ``lexicon.verb_kind``) of the need's
    leading word when that reads as an imperative verb the catalog's verbs do not name: not
    a catalog verb or synonym of one, not plural, and either followed by a function word or
    the end ("save a secret", "wipe all patterns") or a word the catalog (``vocabulary``)
    never uses ("append pull requests"); a catalog word before a noun may be a noun itself
    ("commit history")."""
    at = lead_position(raw)
    if at is None:
        return ""
    word = raw[at]
    term = stem(word)
    if term in ACTION_VERBS or any(s in ACTION_VERBS for s in SYNONYMS.get(term, ())):
        return ""
    if word.endswith("s") and term != word:
        return ""
    if (
        at + 1 < len(raw)
        and raw[at + 1] not in STOPWORDS
        and raw[at + 1] not in SINGULAR_CUES
        and term in vocabulary
    ):
        return ""
    return verb_kind(term)


def need_kind(
    raw: list[str], verb_reads: Mapping[str, bool], vocabulary: Container[str] = ()
) -> int:
    """Whether the need asks to see (``SEE``) or to change (``CHANGE``) something, or does
    not say (0). From its first word: a question word sees; a verb sees or changes as the
    catalog's tools performing it (or a synonym of it) declare (``verb_reads``); any other
    verb as the lexicon classes it; a need that names only a thing (``names_a_thing``)
    sees; a word the lexicon does not class, followed by a determiner ("close an issue",
    "store the key"), stands as a verb and changes something unless it is a read verb;
    followed by another word ("maximum cache size", "title and body of an issue"), it is
    no verb (neither a catalog action nor a verb of the lexicon): the need names a thing
    to see."""
    first = next((w for w in raw if w not in _FILLER), None)
    if first is None:
        return 0
    if first in QUESTION_WORDS or names_a_thing(raw):
        return SEE
    term = stem(first)
    kinds = {verb_reads[v] for v in (term, *SYNONYMS.get(term, ())) if v in verb_reads}
    if kinds:
        return 0 if len(kinds) > 1 else SEE if kinds.pop() else CHANGE
    kind = lexicon_kind(raw, vocabulary)
    if kind:
        return SEE if kind == "r" else CHANGE if kind == "w" else 0
    at = raw.index(first)
    if (
        at + 1 < len(raw)
        and raw[at + 1] in DETERMINERS
        and not {term, *SYNONYMS.get(term, ())} & READ_VERBS
    ):
        return CHANGE
    if (
        not {term, *SYNONYMS.get(term, ())} & ACTION_VERBS
        and not verb_kind(term)
        and (at + 1 >= len(raw) or raw[at + 1] not in STOPWORDS | PARTICLES)
    ):
        return SEE
    return 0


def names_a_thing(raw: list[str]) -> bool:
    """Whether the need is a noun phrase, not a command: it opens with a determiner or a
    possessive ("a user's space", "my purchases", "all forks") or with a plural noun
    ("teams in our enterprise": an imperative verb is never in its -s form). Such a need
    asks to see the thing it names."""
    first = next((w for w in raw if w not in _FILLER), None)
    if first is None:
        return False
    if first in DETERMINERS:
        return True
    return len(first) > 3 and first.endswith("s") and stem(first) != first


def names_change(raw: list[str], vocabulary: Container[str] = ()) -> bool:
    """Whether the need's leading verb changes something ("delete all", "save a")."""
    at = lead_position(raw)
    if at is None:
        return False
    term = stem(raw[at])
    verbs = {term, *SYNONYMS.get(term, ())} & ACTION_VERBS
    if not verbs:
        return lexicon_kind(raw, vocabulary) == "w"
    return not verbs & READ_VERBS


def asks_for_many(raw: list[str]) -> bool:
    """Whether the need names a plural thing or all of something ("comments", "all repos"),
    and no single one of it."""
    if any(w in SINGULAR_CUES for w in raw):
        return False
    if raw and raw[0] in YES_NO_WORDS and raw[1:2] != ["there"]:
        return False  # "are alerts enabled for this repo": a yes or a no, not a listing
    at = lead_position(raw)
    if (
        _ARTICLE
        and at is not None
        and (raw[at] in ("a", "an") or (at + 1 < len(raw) and raw[at + 1] in ("a", "an")))
    ):
        return False  # "store a secret", "an older version": one thing
    for w in raw:
        if w in COLLECTION_CUES:
            return True
        if w not in STOPWORDS and len(w) > 3 and w.endswith("s") and stem(w) != w:
            return True
    return False


def undoes(raw: list[str], at: int) -> bool:
    """Whether ``raw[at]`` negates the gerund after it ("stop sharing", "stop using") or
    after "from" further on ("stop some teams from using X")."""
    if raw[at] not in NEGATING_VERBS or at + 1 >= len(raw):
        return False
    if raw[at + 1].endswith("ing"):
        return True
    return any(
        w == "from" and raw[i + 1].endswith("ing")
        for i, w in enumerate(raw[at + 2 : -1], start=at + 2)
    )


def separates(raw: list[str]) -> bool:
    """Whether the need's leading verb has "off" or "away" after its object ("take a label
    off a runner", "kick a collaborator off the repository", "take Copilot away from
    users"): in English that verb separates something from something else. Next to the
    verb the particle can mean something else ("kick off a build"), so only the separated
    form counts; after a read verb it belongs to something else ("list runners switched
    off")."""
    at = lead_position(raw)
    if at is None:
        return False
    term = stem(raw[at])
    if {term, *SYNONYMS.get(term, ())} & READ_VERBS:
        return False
    return any(w in SEPARATING for w in raw[at + 2 :])


def phrasal_actions(raw: list[str], actions: frozenset[str]) -> set[str]:
    """The catalog actions (``actions``) a leading phrasal verb stands for in the lexicon:
    "throw away" -> remove, "take away" -> remove. Empty for other needs."""
    at = lead_position(raw)
    if at is None:
        return set()
    if at + 1 >= len(raw) or raw[at + 1] not in PARTICLES:
        return set()
    for words in related(f"{raw[at]}_{raw[at + 1]}"):
        found = set(words) & actions
        if found:
            return found
    return set()
