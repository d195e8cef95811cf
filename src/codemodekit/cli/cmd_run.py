"""``codemode run script.ts``: run a TypeScript file against the configured sources."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from codemodekit.cli.common import (
    CliExit,
    add_config_argument,
    load_config,
    quiet_library_logs,
    warn_unhealthy,
)
from codemodekit.render import render_diagnostic
from codemodekit.run import CodeMode, RunResult
from codemodekit.sandbox.quickjs import QuickJsSandbox


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "run",
        help="run a TypeScript file in the sandbox",
        description="Run SCRIPT (the body of an async function; `return` gives the result). "
        "Exit codes: 0 success, 1 the run failed, 2 usage or spec error.",
    )
    parser.add_argument("script", help="TypeScript file to run, or - for standard input")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the whole RunResult as JSON")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        if args.script == "-":
            code, filename = sys.stdin.read(), "<stdin>"
        else:
            path = Path(args.script)
            if not path.is_file():
                raise CliExit(2, f"codemode run: {path} is not a file")
            code, filename = path.read_text(encoding="utf-8"), str(path)
        spec = load_config(args)
    except CliExit as stop:
        print(stop.message, file=sys.stderr)
        return stop.code
    quiet_library_logs()
    result = asyncio.run(_execute(spec, code))
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False, default=str))
    else:
        _print_human(result, code, filename)
    return 0 if result.ok else 1


async def _execute(spec: Any, code: str) -> RunResult:
    # One run owns the event loop here, so slices run inline (no thread hand-off).
    sandbox = QuickJsSandbox(offload="inline", prewarm=0)
    async with CodeMode.from_spec(spec, sandbox=sandbox) as cm:
        warn_unhealthy(cm.health)
        return await cm.run(code)


def _print_human(result: RunResult, code: str, filename: str) -> None:
    for entry in result.logs:
        print(f"[{entry.level}] {entry.message}", file=sys.stderr)
    if result.ok:
        value = result.value
        if isinstance(value, str):
            print(value)
        elif value is not None:
            print(json.dumps(value, indent=2, ensure_ascii=False))
        return
    assert result.diagnostic is not None
    print(render_diagnostic(result.diagnostic, code, filename), file=sys.stderr)
