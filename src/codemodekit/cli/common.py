"""Helpers shared by subcommands: finding and loading codemode.toml without tracebacks."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemodekit.bounded_read import UnreadableFile, read_bounded
from codemodekit.errors import CodeModeError
from codemodekit.providers.base import HealthStatus, SourceHealth
from codemodekit.spec.model import Spec

if TYPE_CHECKING:
    from codemodekit.catalog.catalog import Catalog

DEFAULT_CONFIG = "codemode.toml"
VERBOSE = False
"""Set by ``--verbose``: library errors print their traceback."""
CONFIG_ENV = "CODEMODE_CONFIG"


class CliExit(Exception):
    """Stop a command with ``code`` after printing ``message`` to stderr."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def add_config_argument(parser: Any) -> None:
    # SUPPRESS keeps a `-c` given before the subcommand (on the top-level parser) from being
    # overwritten by this parser's default.
    parser.add_argument(
        "-c",
        "--config",
        default=argparse.SUPPRESS,
        metavar="PATH",
        help="the codemode.toml to use, or its folder (default: $CODEMODE_CONFIG, else the "
        "nearest codemode.toml in this folder or a parent)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the traceback of an unexpected error (normally one line with its id)",
    )


def find_config(start: Path | None = None) -> Path | None:
    """The nearest ``codemode.toml`` in ``start`` (default: the CWD) or one of its parents."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / DEFAULT_CONFIG
        if path.is_file():
            return path
    return None


def config_path(args: argparse.Namespace) -> Path:
    """Which spec a command uses, found the way ruff and uv find their configuration.

    ``-c PATH`` (before or after the subcommand), else ``$CODEMODE_CONFIG``, else the
    nearest ``codemode.toml`` from the current folder upward, else ``./codemode.toml`` (which
    then does not exist, and the command says so). A folder means the ``codemode.toml`` in it.
    ``args.config`` is updated to the chosen path, as shown in messages.
    """
    chosen = getattr(args, "config", None) or os.environ.get(CONFIG_ENV) or None
    if chosen is not None:
        path = Path(chosen)
        if path.is_dir():
            path = path / DEFAULT_CONFIG
    else:
        found = find_config()
        path = Path(DEFAULT_CONFIG) if found is None else _shown(found)
    args.config = str(path)
    return path


def _shown(path: Path) -> Path:
    """``path`` relative to the CWD when that is shorter (``../codemode.toml``)."""
    try:
        relative = Path(os.path.relpath(path))
    except ValueError:  # another drive on Windows
        return path
    return relative if len(str(relative)) < len(str(path)) else path


def load_config(args: argparse.Namespace) -> Spec:
    from codemodekit.spec import load_spec

    path = config_path(args)
    if not path.exists():
        raise CliExit(
            2,
            f"codemode: {path} does not exist. Create one with `codemode init`, "
            "or point at one with -c PATH or $CODEMODE_CONFIG.",
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
        handler.setFormatter(_OneLine("codemode: %(levelname)s %(message)s"))
        handler.setLevel(logging.ERROR)
        logger.addHandler(handler)
        logger.propagate = False


class _OneLine(logging.Formatter):
    """A log record as one line; the traceback only with ``--verbose`` (the message already
    carries a correlation id that finds it in a host log)."""

    def format(self, record: logging.LogRecord) -> str:
        if VERBOSE or not record.exc_info:
            return super().format(record)
        saved = record.exc_info, record.exc_text
        record.exc_info, record.exc_text = None, None
        try:
            return super().format(record) + " (run with --verbose for the traceback)"
        finally:
            record.exc_info, record.exc_text = saved


_BACKGROUND = re.compile(
    r"; (?:reconnecting in the background|reconnect attempt \d+ failed, retrying)"
    r"|; the server wrote to stderr \(in the host log, correlation [0-9a-f]+\)"
)


def one_shot_text(message: str) -> str:
    """A library message as a command that is about to exit shows it: no background
    reconnect (it would die with the process) and no host log to look in (the command
    prints the server's stderr itself, ``stderr_lines``)."""
    return _BACKGROUND.sub("", message)


def health_message(health: SourceHealth) -> str:
    return one_shot_text(health.message)


def stderr_lines(health: SourceHealth) -> list[str]:
    """The last lines a dead stdio server wrote to stderr (scrubbed and bounded by the
    provider), indented under its warning: in the CLI the user is the operator."""
    if not health.detail:
        return []
    return ["  its last stderr lines:", *(f"  | {line}" for line in health.detail.split(" | "))]


def warn_inert_rules(
    spec: Spec,
    catalog: Catalog,
    health: Iterable[SourceHealth],
    shown_path: str | None = None,
) -> None:
    """One stderr line per ``read_only = true`` rule that can match none of the tools of
    the sources; said only when every source of the spec is up (another may match)."""
    from codemodekit.spec.checks import inert_read_only_rules, locate

    up = {h.source for h in health if h.status == HealthStatus.OK}
    if up != set(spec.sources):
        return
    tools = [(t.source, t.key, t.annotations) for t in catalog.tools]
    shown = shown_path or str(spec.path or "codemode.toml")
    for issue in locate(spec, inert_read_only_rules(spec, tools)):
        print("warning: " + issue.render(shown), file=sys.stderr)


def warn_unhealthy(health: Iterable[SourceHealth]) -> None:
    """One stderr line per source that is not fully up (the run goes on without it)."""
    for h in health:
        if h.status != HealthStatus.OK:
            print(
                f"warning: source {h.source!r} is {h.status}: {health_message(h)}",
                *stderr_lines(h),
                sep="\n",
                file=sys.stderr,
            )


MAX_SCRIPT_FILE_BYTES = 16 * 1024 * 1024
"""Most bytes read from a script file or stdin; the spec's ``limits.source_bytes`` (128 KiB
by default) then applies to the text as to any run (SOURCE_TOO_LARGE)."""


def read_script(name: str, *, command: str = "run") -> tuple[str, str]:
    """``(code, filename)``; a script that is missing, not a regular file, too large or not
    UTF-8 is one clear line (never a hang on a FIFO or a read of ``/dev/zero``)."""
    limit = MAX_SCRIPT_FILE_BYTES
    if name == "-":
        data, filename = sys.stdin.buffer.read(limit + 1), "<stdin>"
        if len(data) > limit:
            raise CliExit(2, f"codemode {command}: standard input is over {limit} bytes")
    else:
        filename = name
        try:
            data = read_bounded(name, limit)
        except UnreadableFile as exc:
            raise CliExit(2, f"codemode {command}: script {name} {exc.reason}") from None
    try:
        return data.decode("utf-8-sig"), filename
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CliExit(
            2,
            f"codemode {command}: {filename}:{line}: not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start}); save the script as UTF-8",
        ) from None
