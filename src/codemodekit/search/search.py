"""Deterministic lexical search over the model-visible catalog (``search_tools``).

Only ``catalog.model_tools`` are indexed: quarantined and app-only tools are never found. Ranking is
BM25F-like over the tool name, source name, description (its first sentence counted twice)
and schema property names, with tokens split on camelCase, snake_case, kebab-case and digit
boundaries and lightly stemmed. Exact tool names, keys (``source.name``) and addresses rank first, then tools whose
name starts with the query, then the lexical score; ties break by address. The same catalog
and query always give the same response.

The index is built once per catalog revision and cached (two revisions), so a query costs a
posting-list walk, not a pass over the catalog. See docs/adr/0012.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable, Iterable, Mapping

from codemodekit.catalog.catalog import Catalog, ToolDefinition
from codemodekit.search.index import index_for
from codemodekit.search.rank import score, word_coverage
from codemodekit.search.rank import top as top_documents
from codemodekit.search.response import (
    Detail,
    SearchHit,
    SearchResponse,
    cut_output,
    json_size,
    output_marker,
)
from codemodekit.search.text import (
    stem,
    tokenize,
)

DEFAULT_LIMIT = 8
MAX_LIMIT = 50
MAX_QUERY_CHARS = 512
DESCRIPTION_CHARS = 240
DEFAULT_MAX_BYTES = 32 * 1024
"""Cap on a response's JSON size; hits past it are dropped (and counted), never cut."""


class SearchError(ValueError):
    """Invalid search input (empty or over-long query, bad limit or detail)."""


def _close_sources(source: str, sources: Iterable[str]) -> str:
    known = sorted(sources)
    close = difflib.get_close_matches(source, known, n=5, cutoff=0.5)
    if close:
        return f"no source named {source!r}; did you mean {', '.join(close)}?"
    shown = ", ".join(known[:20]) + (f" (and {len(known) - 20} more)" if len(known) > 20 else "")
    return f"no source named {source!r}; sources: {shown or 'none'}"


def _bounded(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


def _typescript_renderers() -> tuple[Callable[[ToolDefinition], tuple[str, str]], str]:
    # Imported on use: codegen is a sibling projection and must not be needed for summaries.
    codegen = importlib.import_module("codemodekit.codegen.declarations")
    contract_module = importlib.import_module("codemodekit.codegen.contract")
    render: Callable[[ToolDefinition], tuple[str, str]] = codegen.tool_typescript_parts
    contract: str = contract_module.RESULT_CONTRACT
    return render, contract


def _source_notes(
    scope: Iterable[str], searched: Mapping[str, tuple[int, int]], down: Mapping[str, str]
) -> list[str]:
    """Notes naming the sources in ``scope`` that are down (``down``: source -> status)."""
    notes = []
    for name in sorted(scope):
        if name in down and name not in searched:
            notes.append(f"source {name!r} is {down[name]}: its tools are not listed")
        elif name in down:
            notes.append(f"source {name!r} is {down[name]}: calls to its tools may fail")
    return notes


def search_catalog(
    catalog: Catalog,
    query: str,
    *,
    source: str | None = None,
    detail: Detail = "summary",
    limit: int = DEFAULT_LIMIT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    unavailable: Mapping[str, str] | None = None,
) -> SearchResponse:
    """Rank the catalog's model-visible tools for ``query``. Pure and deterministic.

    ``unavailable`` maps configured sources that are down to their status ("unavailable",
    "connecting", ...): the response's note names those the search would have covered, so
    a model can tell "no such tool" from "its source is down".

    ``detail="typescript"`` gives every returned hit its input declaration and signature
    whole; output declarations fill what the byte cap leaves, in rank order, and are cut
    at a line with a marker saying how to see the rest.

    Raises ``SearchError`` for an empty or over-long query, a limit outside
    ``1..MAX_LIMIT`` or an unknown ``detail``.
    """
    if not isinstance(query, str) or not query.strip():
        raise SearchError("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError(f"query is longer than {MAX_QUERY_CHARS} characters")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise SearchError(f"limit must be an integer from 1 to {MAX_LIMIT}")
    if detail not in ("summary", "typescript"):
        raise SearchError('detail must be "summary" or "typescript"')
    index = index_for(catalog)
    total = len(index.tools)
    down = dict(unavailable or {})
    scope = [source] if source is not None else sorted(set(catalog.sources) | set(down))
    source_notes = _source_notes(
        (s for s in scope if s in catalog.sources or s in down), index.source_ranges, down
    )

    def with_notes(*notes: str | None) -> str | None:
        joined = "; ".join(n for n in (*source_notes, *notes) if n)
        return joined or None

    def empty(note: str | None, *, weak: bool = False) -> SearchResponse:
        return SearchResponse(
            query, detail, source, catalog.revision, (), 0, total, note=with_notes(note), weak=weak
        )

    lo, hi = 0, total
    if source is not None:
        if source not in index.source_ranges:
            if source in down:
                return empty(None)
            if source in catalog.sources:
                return empty(f"source {source!r} has no callable tools right now")
            return empty(_close_sources(source, catalog.sources))
        lo, hi = index.source_ranges[source]
    scores, matched = score(index, query, range(lo, hi), limit)
    if not scores:
        return empty(
            "no tool matched; try fewer or more general words, or another source", weak=True
        )
    top = top_documents(scores, limit)
    weak = False
    if top:
        found, words = word_coverage(index, query, top[0])
        weak = words > 0 and 2 * found < words
    render: Callable[[ToolDefinition], tuple[str, str]] | None = None
    contract: str | None = None
    if detail == "typescript":
        render, contract = _typescript_renderers()
    hits: list[SearchHit] = []
    outputs: list[str] = []
    markers: list[int] = []
    # The envelope (counts, notes, query echoed twice) is bounded by this allowance.
    used = json_size(contract or "") + 1024 + 2 * len(query) + sum(map(len, source_notes))
    omitted = 0
    # Every hit's summary and input declaration first (the first hit's always, even past
    # the cap: without it the answer is useless); later hits that do not fit are dropped.
    # Room for each output's marker is kept until its output is placed.
    for doc in top:
        tool = index.tools[doc]
        head, output = ("", "") if render is None else render(tool)
        hit = SearchHit(
            address=tool.address,
            source=tool.source,
            name=tool.name,
            description=_bounded(tool.description, DESCRIPTION_CHARS),
            deprecated=tool.deprecated,
            read_only=tool.read_only,
            typescript=None if render is None else head,
        )
        marker = json_size(output_marker(tool, 0, len(output))) if output else 0
        size = json_size(hit.to_json()) + marker
        if hits and (omitted or used + size > max_bytes):
            omitted += 1
            continue
        used += size
        hits.append(hit)
        outputs.append(output)
        markers.append(marker)
    # Then output declarations, in rank order, into what the cap leaves; one that does not
    # fit is cut at a line, with a marker saying how to see the rest.
    cut = 0
    for i, output in enumerate(outputs):
        if not output:
            continue
        hit = hits[i]
        assert hit.typescript is not None
        room = max_bytes - used + markers[i]
        if json_size(hit.typescript + output) - json_size(hit.typescript) <= room:
            text = output
        else:
            text = cut_output(index.tools[top[i]], output, room)
            cut += 1
        used += json_size(hit.typescript + text) - json_size(hit.typescript) - markers[i]
        hits[i] = dataclasses.replace(
            hit, typescript=hit.typescript + text, output_cut=text != output
        )
    notes: list[str] = []
    if weak:
        closest = ", ".join(h.address for h in hits[:3])
        notes.append(
            f"no tool matches {_bounded(query, 80)!r} well; closest: {closest}. The catalog may "
            "have no tool for this: try other words, or check the sources"
        )
    if cut:
        notes.append(
            f"{cut} output type(s) cut to stay under {max_bytes} bytes (input types are whole); "
            "search a tool's exact source.name with limit 1 to see more of its output type"
        )
    if omitted:
        notes.append(
            f"{omitted} hit(s) omitted to stay under {max_bytes} bytes; lower limit or narrow "
            "the query"
        )
    return SearchResponse(
        query,
        detail,
        source,
        catalog.revision,
        tuple(hits),
        matched,
        total,
        omitted=omitted,
        weak=weak,
        note=with_notes(*notes),
        result_contract=contract,
    )


__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "SearchError",
    "SearchHit",
    "SearchResponse",
    "index_for",
    "search_catalog",
    "stem",
    "tokenize",
]
