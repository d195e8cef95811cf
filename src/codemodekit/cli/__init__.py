"""``codemode``: a thin command line over the library.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module sets
``func`` on its parser, and ``func(args) -> int`` returns the exit code
(0 success, 1 a failed check or run, 2 a usage or spec error).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from codemodekit import __version__
from codemodekit.cli import (
    cmd_check,
    cmd_generate,
    cmd_init,
    cmd_run,
    cmd_schema,
    cmd_search,
    cmd_serve,
)

_COMMANDS = (cmd_init, cmd_check, cmd_run, cmd_search, cmd_generate, cmd_serve, cmd_schema)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codemode",
        description="Give an agent a large tool catalog through sandboxed TypeScript.",
    )
    parser.add_argument("--version", action="version", version=f"codemode {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
