"""``codemode search QUERY``: rank the configured tools for a need, as search_tools does."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any

from codemodekit.cli.common import CliExit, add_config_argument, load_config, warn_unhealthy
from codemodekit.run import CodeMode
from codemodekit.search.search import DEFAULT_LIMIT, MAX_LIMIT, SearchError, SearchResponse


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "search",
        help="search the configured tools",
        description="Rank the model-visible tools of the configured sources for QUERY (words, "
        "a tool name or source.tool), exactly as the search_tools MCP tool does. "
        "Exit codes: 0 at least one tool found, 1 none found, 2 usage or spec error.",
    )
    parser.add_argument("query", help="what you need, e.g. 'list open pull requests'")
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
    except CliExit as stop:
        print(stop.message, file=sys.stderr)
        return stop.code
    try:
        # Whatever sources print while starting goes to stderr: stdout is the answer.
        with contextlib.redirect_stdout(sys.stderr):
            response = asyncio.run(_search(spec, args))
    except SearchError as exc:
        print(f"codemode search: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(response.to_json(), indent=2, ensure_ascii=False))
    else:
        print(response.to_text())
    return 0 if response.hits else 1


async def _search(spec: Any, args: argparse.Namespace) -> SearchResponse:
    from codemodekit.runtime import RuntimeOptions

    # No code runs here: no sandbox worker pool to start.
    async with CodeMode.from_spec(spec, runtime=RuntimeOptions(mode="inline")) as cm:
        warn_unhealthy(cm.health)
        result: SearchResponse = cm.search(
            args.query, source=args.source, detail=args.detail, limit=args.limit
        )
        return result
