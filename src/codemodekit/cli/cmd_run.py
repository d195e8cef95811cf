"""``codemode run script.ts``: run a TypeScript file against the configured sources.

The script is compiled first: one that does not compile starts no source. Then only the
sources it names (``tools.<source>`` / ``tools["<source>"]``, found statically by the
compiler) are started; any other use of ``tools`` starts them all.
``console.*`` lines and progress stream to stderr while the run goes; then the result on
stdout and one timing line on stderr (the same figures are in ``--json``, which prints the
logs in the document instead).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import replace
from typing import Any

from codemodekit.cli.common import (
    CliExit,
    add_config_argument,
    load_config,
    one_shot_text,
    quiet_library_logs,
    read_script,
    stderr_lines,
    warn_inert_rules,
    warn_unhealthy,
)
from codemodekit.cli.terminal import json_text
from codemodekit.errors import ErrorCode
from codemodekit.providers.base import HealthStatus


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "run",
        help="run a TypeScript file in the sandbox",
        description="Run SCRIPT (the body of an async function; `return` gives the result). "
        "Only the sources the script names are started. "
        "Exit codes: 0 success, 1 the run failed, 2 usage or spec error.",
    )
    parser.add_argument("script", help="TypeScript file to run, or - for standard input")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the whole RunResult as JSON")
    parser.add_argument(
        "--typecheck",
        action="store_true",
        help="type-check the script with tsc first (see `codemode typecheck`); "
        "type errors stop the run",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress and no timing line on stderr"
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    try:
        code, filename = read_script(args.script)
        spec = load_config(args)
        if args.typecheck:
            from codemodekit.cli.cmd_typecheck import typecheck_or_exit
            from codemodekit.cli.common import config_path

            if typecheck_or_exit(spec, config_path(args), code, filename, quiet_ok=True):
                return 1
    except CliExit as stop:
        print(stop.message, file=sys.stderr)
        return stop.code
    quiet_library_logs()
    result, names = asyncio.run(
        _execute(spec, code, quiet=args.quiet or args.json, json_output=args.json)
    )
    wall_ms = (time.perf_counter() - started) * 1000
    if args.json:
        document = result.to_json()
        document["sources_started"] = list(names)
        document["process_ms"] = round(wall_ms, 3)
        print(json_text(document, indent=2, default=str))
    else:
        _print_human(result, code, filename)
        if not args.quiet:
            print(timing_line(result, names, len(spec.sources), wall_ms), file=sys.stderr)
    return 0 if result.ok else 1


def sources_to_start(spec: Any, code: str) -> list[str]:
    """The spec's sources ``code`` can reach (all of them when that is not static)."""
    from codemodekit.compiler.compile import CodeCompiler

    names = CodeCompiler().referenced_sources(code)
    if names is None or not names <= set(spec.sources):
        # Dynamic access, or a name the spec lacks: start all, so "did you mean" sees all.
        return list(spec.sources)
    return [name for name in spec.sources if name in names]


def compiles(spec: Any, code: str) -> bool:
    """Whether ``code`` compiles: a script that does not starts no source at all (its
    diagnostic then comes from the run itself, in the usual form)."""
    from codemodekit.compiler.compile import CodeCompiler
    from codemodekit.errors import CompileFailure

    try:
        CodeCompiler().compile(code, max_source_bytes=spec.limits.source_bytes)
    except CompileFailure:
        return False
    return True


async def _execute(
    spec: Any, code: str, *, quiet: bool, json_output: bool = False
) -> tuple[Any, list[str]]:
    from codemodekit.providers.factory import build_provider
    from codemodekit.run import CodeMode
    from codemodekit.sandbox.quickjs import QuickJsSandbox

    names = sources_to_start(spec, code) if compiles(spec, code) else []
    providers = [build_provider(spec.sources[n], limits=spec.limits, root=spec.root) for n in names]
    # One run owns the event loop here, so slices run inline (no thread hand-off).
    sandbox = QuickJsSandbox(offload="inline", prewarm=0)
    async with CodeMode.from_spec(spec, sandbox=sandbox, sources=providers) as cm:
        warn_unhealthy(cm.health)
        warn_inert_rules(spec, cm.catalog, cm.health)
        down_at_start = {h.source for h in cm.health if h.status != HealthStatus.OK}
        on_progress = None if quiet else _print_progress
        on_log = None if json_output else _print_log
        result = await cm.run(code, on_progress=on_progress, on_log=on_log)
        diagnostic = result.diagnostic
        if diagnostic is None or diagnostic.code != ErrorCode.SOURCE_UNAVAILABLE:
            return result, names
        # A source that died during the run: show why, as at start.
        for h in cm.health:
            if h.source == diagnostic.source and h.source not in down_at_start:
                print(
                    f"warning: source {h.source!r} stopped during the run",
                    *stderr_lines(h),
                    sep="\n",
                    file=sys.stderr,
                )
        shown = replace(diagnostic, message=one_shot_text(diagnostic.message))
        return replace(result, diagnostic=shown), names


def _print_progress(event: Any) -> None:
    # Progress is bounded in rate: say how many lines the bound left out, where they were.
    if event.dropped:
        many = "s" if event.dropped != 1 else ""
        print(
            f"[progress] ... {event.dropped} progress event{many} dropped (progress is bounded in rate and count)",
            file=sys.stderr,
            flush=True,
        )
    # The run's own start and end add nothing: the timing line closes the run.
    if event.kind not in ("started", "finished"):
        print(f"[progress] {event.message}", file=sys.stderr, flush=True)


def _print_log(entry: Any) -> None:
    print(f"[{entry.level}] {entry.message}", file=sys.stderr, flush=True)


def timing_line(result: Any, names: list[str], total_sources: int, wall_ms: float) -> str:
    calls = result.tool_calls
    return (
        f"codemode run: compile {result.compile_ms:.1f} ms, run {result.compute_ms:.1f} ms, "
        f"tools {result.tool_ms:.1f} ms ({calls} call{'s' if calls != 1 else ''}), "
        f"{len(names)} of {total_sources} source{'s' if total_sources != 1 else ''} started, "
        f"{wall_ms:.0f} ms in all"
    )


def _print_human(result: Any, code: str, filename: str) -> None:
    from codemodekit.render import render_diagnostic

    # The console lines were printed as they came (``_print_log``).
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if result.ok:
        value = result.value
        if isinstance(value, str):
            print(value)
        elif value is not None:
            print(json_text(value, indent=2))
        return
    assert result.diagnostic is not None
    print(render_diagnostic(result.diagnostic, code, filename), file=sys.stderr)
