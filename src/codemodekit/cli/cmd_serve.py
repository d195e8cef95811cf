"""``codemode serve``: the configured tools as a two-tool MCP server (stdio or HTTP)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
from collections.abc import Sequence
from typing import Any

from codemodekit.cli import serve_ops
from codemodekit.cli.common import (
    CliExit,
    add_config_argument,
    load_config,
    warn_inert_rules,
    warn_unhealthy,
)
from codemodekit.errors import CodeModeError
from codemodekit.providers.base import HealthStatus, SourceHealth
from codemodekit.run import SERVE_START_GRACE_S, CodeMode
from codemodekit.sandbox.zygote import describe
from codemodekit.search.search import index_for
from codemodekit.server.hosting import (
    StdioWire,
    create_server,
    is_loopback,
    serve_http,
    serve_stdio,
    stdio_wire,
)
from codemodekit.server.operations import Operations

DEFAULT_PORT = 8000
ANSWER_GRACE_S = 0.5
"""After the drain deadline, how long cancelled runs get to send their CANCELLED answers."""
DRAIN_CANCEL_REASON = (
    "the server is shutting down: the run was cancelled at its drain deadline; retry it"
)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "serve",
        help="serve run_typescript and search_tools over MCP",
        description="Serve the configured sources as an MCP server with two tools, "
        "run_typescript and search_tools. HTTP listens on loopback unless --host says "
        "otherwise; a non-loopback host needs --auth-token-env. SIGINT/SIGTERM stop the "
        "server (HTTP: after draining, see --drain-timeout) and close every source. "
        "Exit codes: 0 stopped cleanly, 2 usage or spec error.",
    )
    add_config_argument(parser)
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default) or Streamable HTTP",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"HTTP port (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument(
        "--auth-token-env",
        metavar="VAR",
        help="require `Authorization: Bearer <token>` on every HTTP request, the token "
        "being read from environment variable VAR",
    )
    parser.add_argument(
        "--no-search", action="store_true", help="do not offer the search_tools tool"
    )
    serve_ops.add_arguments(parser)
    parser.set_defaults(func=_run)


def _token(args: argparse.Namespace) -> str | None:
    if args.auth_token_env is None:
        return None
    if args.transport != "http":
        raise CliExit(2, "codemode serve: --auth-token-env applies to --transport http only")
    token = os.environ.get(args.auth_token_env, "")
    if not token.strip():
        raise CliExit(
            2,
            f"codemode serve: environment variable {args.auth_token_env} is unset or empty; "
            "set it to the bearer token clients must send",
        )
    return token


def _stdin_is_a_device() -> bool:
    """True for ``< /dev/null`` and similar: a character device that is not a terminal, which
    asyncio cannot watch (the server would wait forever for a client that is not there)."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return True  # no stdin at all
    return stat.S_ISCHR(mode) and not os.isatty(0)


def _run(args: argparse.Namespace) -> int:
    try:
        token = _token(args)
        ops = serve_ops.read(args)
        if args.transport == "http":
            if not 0 <= args.port <= 65535:
                raise CliExit(2, f"codemode serve: --port {args.port} is not a TCP port")
            if not is_loopback(args.host) and token is None:
                raise CliExit(
                    2,
                    f"codemode serve: refusing to listen on {args.host} without authentication; "
                    "pass --auth-token-env VAR (or bind 127.0.0.1)",
                )
        spec = load_config(args)
        if args.transport == "stdio" and _stdin_is_a_device():
            raise CliExit(
                2,
                "codemode serve: standard input is not connected to an MCP client (it is "
                "/dev/null or another device); a client such as Claude Code starts "
                "`codemode serve` itself, with pipes (see `codemode install`), or use "
                "--transport http",
            )
    except CliExit as stop:
        print(stop.message, file=sys.stderr)
        return stop.code
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    try:
        asyncio.run(_serve(spec, args, token, ops))
    except (OSError, CodeModeError) as exc:  # CodeModeError: the sandbox refused to start
        print(f"codemode serve: {exc}", file=sys.stderr)
        return 2
    finally:
        for close in ops.closers:
            close()
    return 0


async def _serve(
    spec: Any, args: argparse.Namespace, token: str | None, config: serve_ops.OpsConfig
) -> None:
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    stopping = False
    serving: list[Operations] = []
    draining: list[asyncio.Task[None]] = []

    async def drain(ops: Operations) -> None:
        finished = await ops.drain(config.drain_timeout_s)
        if not finished:
            print(
                f"codemode serve: drain deadline ({config.drain_timeout_s:g} s) reached; "
                f"cancelling {ops.in_flight} request(s) in flight",
                file=sys.stderr,
                flush=True,
            )
            # Every run in flight ends now with CANCELLED (its worker killed, its tool
            # calls cancelled) and answers its client like any result; then the answers
            # get a moment to leave before the server closes.
            ops.code_mode.cancel_all_runs(DRAIN_CANCEL_REASON)
            await ops.wait_idle(ANSWER_GRACE_S)
        main.cancel()

    def stop() -> None:
        nonlocal stopping
        if stopping or not serving:
            # A second signal (or nothing to drain): stop now.
            stopping = True
            main.cancel()
            return
        stopping = True
        print(
            f"codemode serve: draining ({serving[0].in_flight} request(s) in flight)",
            file=sys.stderr,
            flush=True,
        )
        draining.append(loop.create_task(drain(serving[0])))

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    try:
        if args.transport == "stdio":
            # Divert fd 0/1 before sources start: nothing they print may reach the wire.
            async with stdio_wire() as wire:
                await _serve_spec(spec, args, token, wire, config, serving)
        else:
            await _serve_spec(spec, args, token, None, config, serving)
    except asyncio.CancelledError:
        if not stopping:
            raise
    finally:
        for task in draining:
            task.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
    if stopping:
        print("codemode serve: stopped", file=sys.stderr, flush=True)


async def _serve_spec(
    spec: Any,
    args: argparse.Namespace,
    token: str | None,
    wire: StdioWire | None,
    config: serve_ops.OpsConfig,
    serving: list[Operations],
) -> None:
    observers = serve_ops.observers(config, spec.name)
    # Leaving this block closes every source and child process, on any exit path.
    async with CodeMode.from_spec(
        spec, start_grace_s=SERVE_START_GRACE_S, observers=observers
    ) as cm:
        warn_unhealthy(h for h in cm.health if h.status != HealthStatus.CONNECTING)
        warn_inert_rules(spec, cm.catalog, cm.health)
        server = create_server(cm, search=not args.no_search)
        if not args.no_search:
            index_for(cm.catalog)  # build the search index now, not on the first query
        layers = cm.containment()  # refuses to serve uncontained (ADR 0028)
        contained = f"codemode serve: sandbox {describe(layers)}"
        summary = (
            f"codemode serve: {len(cm.catalog.available_tools)} tools from "
            f"{_sources_serving(cm.health)} (revision {cm.catalog.revision})"
        )
        # Clients get `initialize` at once; sources join the catalog as they come up.
        settling = asyncio.ensure_future(_report_when_settled(cm, spec))
        try:
            await _serve_with(server, cm, args, token, wire, config, serving, summary, contained)
        finally:
            settling.cancel()


async def _report_when_settled(cm: CodeMode, spec: Any) -> None:
    if not any(h.status == HealthStatus.CONNECTING for h in cm.health):
        return
    await cm.wait_for_sources()
    print(
        f"codemode serve: sources settled: {len(cm.catalog.available_tools)} tools from "
        f"{_sources_serving(cm.health)} (revision {cm.catalog.revision})",
        file=sys.stderr,
        flush=True,
    )
    warn_unhealthy(cm.health)
    warn_inert_rules(spec, cm.catalog, cm.health)


async def _serve_with(
    server: Any,
    cm: CodeMode,
    args: argparse.Namespace,
    token: str | None,
    wire: StdioWire | None,
    config: serve_ops.OpsConfig,
    serving: list[Operations],
    summary: str,
    contained: str,
) -> None:
    if wire is not None:
        print(f"{summary} over stdio\n{contained}", file=sys.stderr, flush=True)
        await serve_stdio(server, wire)
        return

    def ready(url: str) -> None:
        print(f"{summary} at {url}\n{contained}", file=sys.stderr, flush=True)

    ops = serve_ops.operations(config, cm)
    serving.append(ops)
    await serve_http(
        server,
        host=args.host,
        port=args.port,
        auth_token=token,
        on_ready=ready,
        stateless=config.stateless,
        ops=ops,
        limits=config.http_limits,
    )


def _sources_serving(health: Sequence[SourceHealth]) -> str:
    """ "3 sources", or "6 of 8 sources (not serving: a unavailable, b connecting)"."""
    down = [h for h in health if h.status not in (HealthStatus.OK, HealthStatus.DEGRADED)]
    total = len(health)
    if not down:
        return f"{total} source{'' if total == 1 else 's'}"
    listed = ", ".join(f"{h.source} {h.status}" for h in down)
    return f"{total - len(down)} of {total} sources (not serving: {listed})"
