"""``codemode search QUERY``: rank the configured tools for a need, as search_tools does.

MCP sources are answered from ``codemode.lock.json`` beside the config when their entry is
current (offline, as ``generate`` does); only the sources the lock cannot stand in for are
started, and with ``--source`` only that one. ``codemode search --source NAME`` (no query)
lists that source's tools.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import Any

from codemodekit.catalog.catalog import Catalog
from codemodekit.cli.common import (
    CliExit,
    add_config_argument,
    config_path,
    load_config,
    one_shot_text,
)
from codemodekit.cli.terminal import json_text
from codemodekit.search.search import DEFAULT_LIMIT, MAX_LIMIT, SearchError, SearchResponse


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "search",
        help="search the configured tools",
        description="Rank the model-visible tools of the configured sources for QUERY (words, "
        "a tool name or source.tool), exactly as the search_tools MCP tool does. MCP sources "
        "come from codemode.lock.json when it is current; only the others are started. "
        "Without QUERY, --source NAME lists that source's tools. "
        "Exit codes: 0 at least one tool found, 1 none found, 2 usage or spec error.",
    )
    parser.add_argument(
        "query", nargs="?", default="", help="what you need, e.g. 'list open pull requests'"
    )
    add_config_argument(parser)
    parser.add_argument("--source", help="only tools of this source (exact name)")
    parser.add_argument(
        "--detail",
        choices=("summary", "typescript"),
        default="summary",
        help="typescript adds declarations and the shared ToolResult contract",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help=f"most tools to show, 1..{MAX_LIMIT} (default {DEFAULT_LIMIT})",
    )
    parser.add_argument("--json", action="store_true", help="print the response as JSON")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        spec = load_config(args)
        listing = not args.query.strip() and args.source is not None
        if not listing:
            _validate(args)  # before any source starts
        elif args.source not in spec.sources:
            raise CliExit(2, f"codemode search: the spec has no source {args.source!r}")
    except CliExit as stop:
        print(stop.message, file=sys.stderr)
        return stop.code
    # Whatever sources print while starting goes to stderr: stdout is the answer.
    with contextlib.redirect_stdout(sys.stderr):
        catalog, down = asyncio.run(_catalog(spec, args))
    if listing:
        return _list(catalog, args)
    response = _search(catalog, down, args)
    if args.json:
        print(json_text(response.to_json(), indent=2))
    else:
        print(response.to_text())
    return 0 if response.hits else 1


def _validate(args: argparse.Namespace) -> None:
    try:
        _search(Catalog.build({}), {}, args)
    except SearchError as exc:
        hint = ""
        if not args.query.strip():
            hint = "; to list one source's tools: codemode search --source NAME"
        raise CliExit(2, f"codemode search: {exc}{hint}") from None


def _search(catalog: Catalog, down: dict[str, str], args: argparse.Namespace) -> SearchResponse:
    from codemodekit.search.search import search_catalog

    return search_catalog(
        catalog,
        args.query,
        source=args.source,
        detail=args.detail,
        limit=args.limit,
        unavailable=down,
    )


async def _catalog(spec: Any, args: argparse.Namespace) -> tuple[Catalog, dict[str, str]]:
    """The catalog of the sources the search covers: current lock entries for MCP sources,
    the others started (and closed) here."""
    from codemodekit.catalog.lock import LockError, discover, is_remote, lock_path, read_lock, stale

    names = [args.source] if args.source in spec.sources else list(spec.sources)
    try:
        locked = read_lock(lock_path(config_path(args))) or {}
    except LockError as exc:
        print(f"warning: {exc}", file=sys.stderr)
        locked = {}
    remote = [n for n in names if is_remote(spec.sources[n])]
    why_stale = stale(spec, locked, remote)
    from_lock = {n: locked[n].discovery for n in remote if n not in why_stale}
    live = [n for n in names if n not in from_lock]
    found, errors = await discover(spec, live) if live else ({}, {})
    for name, why in errors.items():
        print(f"warning: source {name!r} is unavailable: {one_shot_text(why)}", file=sys.stderr)
    if from_lock:
        print(
            f"codemode search: {', '.join(sorted(from_lock))} from codemode.lock.json "
            "(`codemode lock` refreshes it)",
            file=sys.stderr,
        )
    catalog = Catalog.build({**from_lock, **found}, sources=names)
    return catalog, {name: "unavailable" for name in errors}


def _list(catalog: Catalog, args: argparse.Namespace) -> int:
    from codemodekit.catalog.catalog import tool_address

    tools = [t for t in catalog.model_tools if t.source == args.source]
    if args.json:
        listed = [
            {"address": tool_address(t.source, t.name), "description": t.description} for t in tools
        ]
        print(json_text({"source": args.source, "tools": listed}, indent=2))
    else:
        for t in tools:
            summary = " ".join(t.description.split())
            if len(summary) > 100:
                summary = summary[:99].rstrip() + "…"
            print(f"{tool_address(t.source, t.name)}" + (f"  {summary}" if summary else ""))
    if not tools:
        print(f"codemode search: source {args.source!r} has no callable tools", file=sys.stderr)
    return 0 if tools else 1
