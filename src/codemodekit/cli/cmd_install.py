"""``codemode install CLIENT``: register ``codemode serve`` with an MCP client.

    codemode install claude-code|claude-desktop|cursor|json [-c codemode.toml] [--name NAME]
                     [--print] [--copy-env]

The entry runs this Python's ``codemode`` with absolute paths (``serve -c /abs/codemode.toml``),
so it works whatever the client's working directory. Every ``${VAR}`` the spec uses (in
``env``, ``headers``, ``auth``) is passed on: Claude Code (``.mcp.json`` in the project) and
Cursor (``.cursor/mcp.json``) expand ``${VAR}`` / ``${env:VAR}`` from the environment they
run in; Claude Desktop does not, so its values are copied from this shell only with
``--copy-env`` (they are then stored in its config file). ``json`` prints the entry.
``--print`` prints instead of writing. An existing file keeps its other servers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from codemodekit.bounded_read import UnreadableFile, read_bounded
from codemodekit.cli.common import CliExit, add_config_argument, config_path, load_config
from codemodekit.safe_write import UnsafeTarget, check_target, write_file

MAX_CLIENT_CONFIG_BYTES = 16 * 1024 * 1024
"""Most bytes read from an agent client's configuration file."""

CLIENTS = ("claude-code", "claude-desktop", "cursor", "json")


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "install",
        help="register `codemode serve` with an MCP client (Claude Code, Claude Desktop, Cursor)",
        description=__doc__.split("\n\n", 1)[1].replace("``", "`") if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("client", choices=CLIENTS, help="which client to configure")
    add_config_argument(parser)
    parser.add_argument("--name", default=None, help="server name (default: the spec's name)")
    parser.add_argument(
        "--print", action="store_true", help="print the configuration instead of writing it"
    )
    parser.add_argument(
        "--copy-env",
        action="store_true",
        help="copy the current values of the spec's ${VAR}s into the entry (Claude Desktop, "
        "json); they are then stored in plain text in the client's config",
    )
    parser.set_defaults(func=run_install)


def spec_variables(spec: Any) -> list[str]:
    """Every ``${VAR}`` the spec's sources read, in file order, once."""
    names: dict[str, None] = {}
    for source in spec.sources.values():
        for table in ("env", "headers", "auth"):
            for template in (getattr(source, table, None) or {}).values():
                names.update(dict.fromkeys(template.variables))
    return list(names)


def serve_command() -> tuple[str, list[str]]:
    """An absolute command that starts this installation's ``codemode``."""
    script = Path(sys.executable).with_name("codemode")
    if script.is_file():
        return str(script), []
    found = shutil.which("codemode")
    if found is not None:
        return str(Path(found).resolve()), []
    return sys.executable, ["-m", "codemodekit"]


def server_entry(
    client: str, config: Path, variables: list[str], *, copy_env: bool
) -> tuple[dict[str, Any], list[str]]:
    """The client's server entry and the warnings to print."""
    command, prefix = serve_command()
    entry: dict[str, Any] = {"command": command, "args": [*prefix, "serve", "-c", str(config)]}
    if client in ("claude-code", "json") and not copy_env:
        entry = {"type": "stdio", **entry}
    warnings: list[str] = []
    env: dict[str, str] = {}
    for name in variables:
        if client == "claude-code" and not copy_env:
            env[name] = "${" + name + "}"
        elif client == "cursor" and not copy_env:
            env[name] = "${env:" + name + "}"
        elif copy_env:
            value = os.environ.get(name)
            if value is None:
                warnings.append(f"{name} is not set in this shell: add it to the entry yourself")
            else:
                env[name] = value
        elif client == "json":
            env[name] = "${" + name + "}"
        else:
            warnings.append(
                f"the spec needs {name}; Claude Desktop does not expand variables: re-run with "
                "--copy-env, or add it to the entry's env yourself"
            )
    if env:
        entry["env"] = env
    if copy_env and env:
        warnings.append("the entry holds the values of " + ", ".join(env) + " in plain text")
    return entry, warnings


def desktop_config_path() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library/Application Support/Claude/claude_desktop_config.json"
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", Path.home())) / "Claude/claude_desktop_config.json"
    return Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / (
        "Claude/claude_desktop_config.json"
    )


def target_file(client: str, config: Path) -> Path | None:
    if client == "claude-code":
        return config.parent / ".mcp.json"
    if client == "cursor":
        return config.parent / ".cursor" / "mcp.json"
    if client == "claude-desktop":
        return desktop_config_path()
    return None


def server_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")
    return cleaned or "codemode"


def run_install(args: argparse.Namespace) -> int:
    try:
        spec = load_config(args)
        config = config_path(args).resolve()
        return _install(args, spec, config)
    except CliExit as stop:
        print(stop.message, file=sys.stderr)
        return stop.code


def _install(args: argparse.Namespace, spec: Any, config: Path) -> int:
    name = server_name(args.name or spec.name)
    entry, warnings = server_entry(
        args.client, config, spec_variables(spec), copy_env=args.copy_env
    )
    target = target_file(args.client, config)
    if target is None or args.print:
        print(json.dumps({"mcpServers": {name: entry}}, indent=2))
    else:
        inside = config.parent if config.parent in target.parents else None
        try:
            check_target(target, inside)  # before reading what a link would point at
        except UnsafeTarget as exc:
            raise CliExit(2, f"codemode install: {exc}") from None
        document = _read_json(target)
        servers = document.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise CliExit(2, f"codemode install: {target}: `mcpServers` is not an object")
        replaced = name in servers
        servers[name] = entry
        # A project's client config lives below the spec's folder: no link on the way
        # there (a committed `.cursor` link), none at the target, none at a temp name.
        try:
            write_file(
                target,
                json.dumps(document, indent=2) + "\n",
                private=args.copy_env,  # it holds secrets: 0600 from its creation
                inside=inside,
                make_parents=True,
            )
        except UnsafeTarget as exc:
            raise CliExit(2, f"codemode install: {exc}") from None
        except OSError as exc:
            raise CliExit(2, f"codemode install: cannot write {target} ({exc})") from None
        print(f"{'updated' if replaced else 'added'} server {name!r} in {target}")
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = read_bounded(path, MAX_CLIENT_CONFIG_BYTES).decode("utf-8")
    except UnreadableFile as exc:
        if exc.missing:
            return {}
        raise CliExit(2, f"codemode install: {path} {exc.reason}") from None
    except UnicodeDecodeError:
        raise CliExit(2, f"codemode install: {path} is not UTF-8 text") from None
    try:
        document = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise CliExit(
            2, f"codemode install: {path} is not valid JSON ({exc}); fix or move it first"
        ) from None
    if not isinstance(document, dict):
        raise CliExit(2, f"codemode install: {path} does not hold a JSON object")
    return document
