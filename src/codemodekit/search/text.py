"""The words of search: tokenizing, light stemming and the small generic vocabulary.

Kept apart from the ranking in ``search.py`` so the index and the queries share exactly one
notion of a term. See docs/adr/0012.
"""

from __future__ import annotations

import functools
import re

# Acronym before a capitalized word | optional capital + lower-case run (any script) |
# acronym | digits. `[^\W\dA-Z_]` is a letter that is not an ASCII capital.
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^\W\dA-Z_]+|[A-Z]+|[0-9]+")
_ALNUM = re.compile(r"[^a-z0-9]+")

STOPWORDS = frozenset(
    """a an the of for to in on at by with from and or is are be been it its this that these
    those my me i we our us you your all some any as into via please how do does can which
    what who whom am there their them they so if then than also just only not no""".split()  # noqa: SIM905
)

# Generic developer vocabulary, applied to query terms only (weighted by the search module): common
# abbreviations and verbs an agent uses for the same operation. Keys and values are stemmed
# at import. Deliberately small and domain-neutral; see docs/adr/0012.
_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("repo", "repository"),
    ("org", "organization"),
    ("config", "configuration", "settings"),
    ("auth", "authentication", "authorization"),
    ("info", "information", "details"),
    ("dir", "directory", "folder"),
    ("env", "environment"),
    ("msg", "message"),
    ("doc", "document", "documentation"),
    ("pkg", "package"),
    ("db", "database"),
    ("app", "application"),
    ("admin", "administrator"),
    ("user", "account"),
    ("get", "fetch", "retrieve", "read", "show", "view", "describe", "lookup", "find"),
    ("create", "add", "new", "make", "open", "insert"),
    ("delete", "remove", "destroy", "drop", "erase"),
    ("update", "edit", "modify", "change", "set", "patch"),
    ("search", "find", "query", "lookup"),
    ("list", "enumerate", "browse"),
    ("run", "execute", "trigger", "launch", "dispatch", "start"),
    ("cancel", "stop", "abort", "halt", "terminate"),
    ("upload", "attach"),
    ("download", "export"),
    ("send", "post", "publish"),
    ("star", "favorite"),
    ("secret", "credential"),
    ("file", "content"),
    ("log", "logs"),
)
# First-person words in a need ("my repositories", "assigned to me") mean the caller:
# APIs say "authenticated user", "current user" or "me".
FIRST_PERSON = frozenset({"i", "my", "me", "mine", "myself"})
# A need for a collection ("all repositories of an org", "what webhooks are configured",
# "who starred", "commit history") asks for a listing even when it names no verb (or says
# "get"): a weak "list" unit is added and listing counts as the action it names.
COLLECTION_CUES = frozenset({"all", "every", "who", "history"})
# "stop following" is how people say ``unfollow``; "un" + the next word, when the catalog
# has it, stands in as one more unit.
NEGATING_VERBS = frozenset({"stop", "undo", "cease"})
# "how many stars", "how much space": the need is a count, which APIs name these ways.
QUANTITY_CUES = frozenset({("how", "many"), ("how", "much"), ("number", "of")})
QUANTITY_TERMS = ("count", "number", "total", "quantity", "quantiti")
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "pr": ("pull", "request"),
    "prs": ("pull", "request"),
    "mr": ("merge", "request"),
}


# Abbreviations that mean exactly their long form: both spellings become one term (in the
# index and in queries), so ``repos_list_for_org`` matches "organization repositories" as
# fully as its own words.
_SAME_TERM = (
    ("repo", "repository"),
    ("org", "organization"),
    ("config", "configuration"),
    ("info", "information"),
    ("dir", "directory"),
    ("env", "environment"),
    ("msg", "message"),
    ("pkg", "package"),
    ("db", "database"),
    ("app", "application"),
    ("admin", "administrator"),
)


@functools.lru_cache(maxsize=1 << 16)
def stem(token: str) -> str:
    """Light suffix folding so ``repositories``/``repository`` and ``creating``/``create``
    meet; an abbreviation and its long form (``repo``/``repository``) give one term."""
    folded = _fold(token)
    return _CANONICAL.get(folded, folded)


def _fold(token: str) -> str:
    if len(token) <= 3 or not token.isalpha():
        return token
    if token.endswith(("ee", "ees")) and len(token) > 6:
        # The one who is acted on: ``assignees`` -> assign, ``employee`` -> employ.
        return token[: -2 if token.endswith("ee") else -3]
    if token.endswith("ies") and len(token) > 4:
        return token[:-3] + "y"
    if token.endswith(("sses", "xes", "ches", "shes", "zes")):
        token = token[:-2]
    elif token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    elif token.endswith("ing") and len(token) > 5:
        token = _undouble(token[:-3])
    elif token.endswith("ed") and len(token) > 4:
        token = _undouble(token[:-2])
    if token.endswith("e") and len(token) > 4:
        token = token[:-1]
    return token


_CANONICAL = {_fold(long): _fold(short) for short, long in _SAME_TERM}


def _undouble(token: str) -> str:
    if len(token) > 2 and token[-1] == token[-2] and token[-1] not in "lsz":
        return token[:-1]
    return token


_DERIVATIONS = (
    ("ations", 4), ("ation", 4), ("itions", 4), ("ition", 4), ("ions", 4), ("ion", 4),
    ("ments", 4), ("ment", 4), ("ators", 4), ("ator", 4), ("ors", 4), ("or", 4),
    ("ers", 4), ("er", 4), ("ance", 4), ("ence", 4), ("ity", 4), ("ive", 4),
    ("able", 4), ("ible", 4), ("ship", 4), ("at", 5),
)  # fmt: skip


@functools.lru_cache(maxsize=1 << 16)
def root(term: str) -> str:
    """A stem without its derivational suffix, so words of one family meet at a lower
    weight: ``invitation``/``invite``, ``collaborator``/``collaborate``, ``deployment``/
    ``deploy``, ``protection``/``protect``. Leaves at least 4 letters (5 before ``-at``)."""
    if not term.isalpha():
        return term
    for suffix, keep in _DERIVATIONS:
        if term.endswith(suffix) and len(term) - len(suffix) >= keep:
            return term[: -len(suffix)]
    return term


def words(text: str) -> list[str]:
    """Lower-case words of ``text``, split on case changes, separators and digits."""
    return [w.lower() for w in _WORD.findall(text)]


def tokenize(text: str) -> list[str]:
    """Stemmed, stopword-free terms of ``text``."""
    return [stem(w) for w in words(text) if w not in STOPWORDS]


def normalized(text: str) -> str:
    return _ALNUM.sub("", text.lower())


def _synonym_table() -> dict[str, tuple[str, ...]]:
    table: dict[str, set[str]] = {}
    for group in _SYNONYM_GROUPS:
        stems = [stem(w) for w in group]
        for s in stems:
            table.setdefault(s, set()).update(x for x in stems if x != s)
    return {k: tuple(sorted(v)) for k, v in table.items()}


SYNONYMS = _synonym_table()


SELF_TERMS = tuple(sorted({stem(w) for w in ("authenticated", "current", "me")}))

# The action a tool performs is the first of its name's words that is one of these verbs
# (``issues_remove_label`` → remove, ``findPetsByStatus`` → find). A need naming an action
# prefers tools performing it; a need naming no destructive action ranks tools that delete
# or remove below the rest. Generic API verbs, stemmed like every term.
ACTION_VERBS = frozenset(
    stem(w)
    for w in """get list delete create set update remove add check disable enable download
    request cancel revoke restore review mark start merge generate redeliver unlock approve
    star unstar rerequest stop dismiss render assign unassign block unblock compare upload
    find reset suspend unsuspend export import publish fork lock pin unpin follow unfollow
    transfer rename sync accept decline watch unwatch search run rerun submit close reopen
    edit replace move convert test place login logout deploy archive unarchive invite
    subscribe unsubscribe""".split()  # noqa: SIM905
)
DESTRUCTIVE_VERBS = frozenset(
    stem(w)
    for w in "delete remove destroy drop erase purge revoke clear wipe".split()  # noqa: SIM905
)
READ_VERBS = frozenset(
    stem(w)
    for w in "get list check search find fetch read show view describe lookup".split()  # noqa: SIM905
)
