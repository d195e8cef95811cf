"""``codemode``: a thin command line over the library.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module sets
``func`` on its parser, and ``func(args) -> int`` returns the exit code
(0 success, 1 a failed check or run, 2 a usage or spec error).

Only the subcommand being run is imported: the others appear in ``--help`` through the
one-line summaries in ``COMMANDS``, so ``codemode --version`` and ``codemode --help`` never
import pydantic, the MCP SDK or tree-sitter.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from codemodekit import __version__

# name -> (module, one-line help). The module's own add_parser(help=...) must match
# (tests/cli/test_lazy_cli.py checks it).
COMMANDS: dict[str, tuple[str, str]] = {
    "init": (
        "codemodekit.cli.cmd_init",
        "write a starter codemode.toml (and hello.ts) using the bundled demo tools",
    ),
    "check": (
        "codemodekit.cli.cmd_check",
        "validate codemode.toml, then connect every source and report its health",
    ),
    "run": ("codemodekit.cli.cmd_run", "run a TypeScript file in the sandbox"),
    "typecheck": (
        "codemodekit.cli.cmd_typecheck",
        "type-check a script against the tools' declarations with tsc",
    ),
    "search": ("codemodekit.cli.cmd_search", "search the configured tools"),
    "generate": (
        "codemodekit.cli.cmd_generate",
        "write tools.d.ts, per-source declarations, a tsconfig.json for editors, catalog.json "
        "(and a skills plugin)",
    ),
    "lock": (
        "codemodekit.cli.cmd_lock",
        "record every source's tools in codemode.lock.json (for offline generate)",
    ),
    "serve": ("codemodekit.cli.cmd_serve", "serve run_typescript and search_tools over MCP"),
    "install": (
        "codemodekit.cli.cmd_install",
        "register `codemode serve` with an MCP client (Claude Code, Claude Desktop, Cursor)",
    ),
    "schema": ("codemodekit.cli.cmd_schema", "print the JSON Schema of codemode.toml"),
}

# Top-level options that take a value, so the command scan below can skip it.
_VALUE_OPTIONS = frozenset({"-c", "--config"})


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line, found without importing any of them."""
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token == "--":
            return None
        if token.startswith("-"):
            skip = token in _VALUE_OPTIONS
            continue
        return token if token in COMMANDS else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The full parser for the subcommand in ``argv`` (all of them when ``argv`` is None)."""
    parser = argparse.ArgumentParser(
        prog="codemode",
        description="Give an agent a large tool catalog through sandboxed TypeScript.",
    )
    parser.add_argument("--version", action="version", version=f"codemode {__version__}")
    parser.add_argument(
        "-c",
        "--config",
        default=None,
        metavar="PATH",
        help="the codemode.toml to use, or its folder (default: $CODEMODE_CONFIG, else the "
        "nearest codemode.toml in this folder or a parent)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print the traceback of an unexpected error (normally one line with its id)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = None if argv is None else _chosen_command(argv)
    for name, (module, summary) in COMMANDS.items():
        if argv is None or name == chosen:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    from codemodekit.cli import common
    from codemodekit.cli.terminal import inert_output

    common.VERBOSE = bool(getattr(args, "verbose", False))
    try:
        with inert_output(stdout=args.command != "serve"):
            return int(args.func(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
