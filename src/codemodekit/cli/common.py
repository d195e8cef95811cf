"""Helpers shared by subcommands: finding and loading codemode.toml without tracebacks."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from codemodekit.errors import CodeModeError
from codemodekit.providers.base import HealthStatus, SourceHealth
from codemodekit.spec.model import Spec

DEFAULT_CONFIG = "codemode.toml"


class CliExit(Exception):
    """Stop a command with ``code`` after printing ``message`` to stderr."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def add_config_argument(parser: Any) -> None:
    parser.add_argument(
        "-c",
        "--config",
        default=DEFAULT_CONFIG,
        metavar="PATH",
        help="the codemode.toml to use, or its folder (default: ./codemode.toml)",
    )


def config_path(args: argparse.Namespace) -> Path:
    """``-c PATH``; a folder means the ``codemode.toml`` inside it."""
    path = Path(args.config)
    if path.is_dir():
        path = path / DEFAULT_CONFIG
        args.config = str(path)
    return path


def load_config(args: argparse.Namespace) -> Spec:
    from codemodekit.spec import load_spec

    path = config_path(args)
    if not path.exists():
        raise CliExit(
            2,
            f"codemode: {path} does not exist. Create one with `codemode init`, "
            "or point at one with -c PATH.",
        )
    try:
        return load_spec(path)
    except CodeModeError as exc:
        raise CliExit(2, str(exc)) from None


def quiet_library_logs() -> None:
    """Let only unexpected failures (with their correlation id) reach stderr as log lines.

    Expected conditions, such as a source that is down, are reported by the command itself
    (``warn_unhealthy``); without a handler Python's last-resort handler would print the
    library's warnings a second time, unformatted.
    """
    logger = logging.getLogger("codemodekit")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("codemode: %(levelname)s %(message)s"))
        handler.setLevel(logging.ERROR)
        logger.addHandler(handler)
        logger.propagate = False


def warn_unhealthy(health: Iterable[SourceHealth]) -> None:
    """One stderr line per source that is not fully up (the run goes on without it)."""
    for h in health:
        if h.status != HealthStatus.OK:
            print(f"warning: source {h.source!r} is {h.status}: {h.message}", file=sys.stderr)
