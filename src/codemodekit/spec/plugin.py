"""``type = "plugin"`` sources: an installed Agent Plugin's MCP servers (ADR 0032).

The plugin's root holds ``plugin.json`` and ``mcp.json`` (Agent Plugins 1.0). Both are
validated against the official schemas, shipped inside the package; each ``mcpServers``
entry becomes a managed MCP source that keeps the plugin's identity (``PluginOrigin``), so
the catalog, health, search notes and generated files can say where a tool came from.

Values in ``mcp.json``: ``${PLUGIN_ROOT}`` is the plugin's root and ``${PLUGIN_DATA}`` its
data folder, anywhere; any other ``${VAR}`` only in ``env`` and ``headers`` values, read
from the host environment when the source connects, exactly as in ``codemode.toml``. A
stdio server starts in the plugin's root unless its ``cwd`` says otherwise (and stays in the
root or the data folder).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from codemodekit.bounded_read import UnreadableFile, read_bounded
from codemodekit.spec.model import (
    McpHttpSource,
    McpStdioSource,
    PluginOrigin,
    SecretTemplate,
)

MAX_PLUGIN_FILE_BYTES = 1024 * 1024
PLUGIN_DATA_FOLDER = ".codemode/plugin-data"
"""Where ``${PLUGIN_DATA}`` points, below the spec's folder (one subfolder per plugin)."""
_ANY = re.compile(r"\$\{([^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HOST = ("PLUGIN_ROOT", "PLUGIN_DATA")


class PluginProblem(Exception):
    """A plugin that cannot be used; the message names the file and the JSON path."""


@cache
def _validator(name: str) -> Any:
    import jsonschema

    text = resources.files("codemodekit.spec").joinpath("agent_plugins", name).read_text("utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))


def _read(root: Path, name: str, shown: str) -> dict[str, Any]:
    path = root / name
    where = f"{shown}/{name}"
    try:
        data = read_bounded(path, MAX_PLUGIN_FILE_BYTES)
    except UnreadableFile as exc:
        if exc.missing:
            raise PluginProblem(f"{where}: not found (is `path` the plugin's root?)") from None
        raise PluginProblem(f"{where}: cannot read: the file {exc.reason}") from None
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PluginProblem(f"{where}: not valid JSON ({exc})") from None
    errors = list(_validator(name.replace(".json", ".schema.json")).iter_errors(document))
    if errors:
        from jsonschema.exceptions import best_match

        first = best_match(errors)  # inside a oneOf: the branch that came closest
        at = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        reason = first.message if len(first.message) <= 200 else first.message[:199] + "…"
        raise PluginProblem(f"{where}: {at}: {reason}{more} (Agent Plugins 1.0 schema)")
    assert isinstance(document, dict)
    return document


def _expand(value: str, where: str, host: Mapping[str, str], *, secret: bool) -> str:
    """``${PLUGIN_ROOT}``/``${PLUGIN_DATA}`` replaced; another ``${VAR}`` is kept for a
    secret-bearing value (resolved at connect time) and refused anywhere else."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in host:
            return host[name]
        if _NAME.fullmatch(name) is None:
            raise PluginProblem(
                f"{where}: malformed variable `{match.group(0)}`: write `${{NAME}}`"
            )
        if not secret:
            raise PluginProblem(
                f"{where}: `{match.group(0)}` is not expanded here: environment variables "
                "are read only in `env` and `headers` values (and ${PLUGIN_ROOT}, "
                "${PLUGIN_DATA} anywhere)"
            )
        return match.group(0)

    return _ANY.sub(substitute, value)


def _inside(path: Path, roots: tuple[Path, ...], where: str) -> Path:
    resolved = Path(os.path.normpath(path))
    if not any(resolved == r or r in resolved.parents for r in roots):
        raise PluginProblem(f"{where}: leaves the plugin's folders")
    return resolved


def plugin_sources(
    key: str,
    path: Path,
    spec_root: Path,
    *,
    timeout_ms: int | None,
    trust_annotations: bool,
) -> dict[str, McpStdioSource | McpHttpSource]:
    """The plugin at ``path`` as ``{source name: MCP source}``; raises ``PluginProblem``.

    One server: the source is named ``key``; several: ``key-server`` each.
    """
    root = Path(os.path.normpath(path))
    try:  # messages name the plugin's folder as the spec's reader sees it
        shown = Path(os.path.relpath(root, spec_root)).as_posix()
    except ValueError:
        shown = str(root)
    manifest = _read(root, "plugin.json", shown)
    servers = _read(root, "mcp.json", shown)["mcpServers"]
    name = str(manifest["name"])
    version = manifest.get("version")
    data = Path(os.path.normpath(spec_root / PLUGIN_DATA_FOLDER / name))
    host = {"PLUGIN_ROOT": str(root), "PLUGIN_DATA": str(data)}
    out: dict[str, McpStdioSource | McpHttpSource] = {}
    for server, entry in servers.items():
        source = key if len(servers) == 1 else f"{key}-{server}"
        if not source or "." in source or any(c.isspace() for c in source):
            raise PluginProblem(
                f"{shown}/mcp.json: server name {server!r} cannot name a source (no `.` or spaces)"
            )
        where = f"{shown}/mcp.json: $.mcpServers.{server}"
        written = {k: v for k, v in entry.items() if k not in ("env", "headers")}
        origin = PluginOrigin(
            source=key,
            name=name,
            version=str(version) if isinstance(version, str) else None,
            root=root,
            data=data,
            server=server,
            entry=json.dumps(written, sort_keys=True),
        )
        if entry["type"] == "stdio":
            out[source] = _stdio(source, entry, where, host, origin, timeout_ms, trust_annotations)
        else:
            headers = {
                k: SecretTemplate(
                    _expand(v, f"{where}.headers.{k}", host, secret=True),
                    key=f"sources.{key}: mcp.json {server}.headers.{k}",
                )
                for k, v in entry.get("headers", {}).items()
            }
            out[source] = McpHttpSource(
                name=source,
                url=_expand(entry["url"], f"{where}.url", host, secret=False),
                transport=entry["type"],
                headers=MappingProxyType(headers),
                timeout_ms=timeout_ms,
                trust_annotations=trust_annotations,
                plugin=origin,
            )
    return out


def _stdio(
    source: str,
    entry: Mapping[str, Any],
    where: str,
    host: Mapping[str, str],
    origin: PluginOrigin,
    timeout_ms: int | None,
    trust_annotations: bool,
) -> McpStdioSource:
    root = origin.root
    command = _expand(entry["command"], f"{where}.command", host, secret=False)
    if command.startswith(("./", "../")):
        command = str(_inside(root / command, (root,), f"{where}.command"))
    args = tuple(
        _expand(a, f"{where}.args[{i}]", host, secret=False)
        for i, a in enumerate(entry.get("args", []))
    )
    cwd = root
    if "cwd" in entry:
        written = _expand(entry["cwd"], f"{where}.cwd", host, secret=False)
        cwd = _inside(root / written, (root, origin.data), f"{where}.cwd")
    env = {
        k: SecretTemplate(
            _expand(v, f"{where}.env.{k}", host, secret=True),
            key=f"sources.{origin.source}: mcp.json {origin.server}.env.{k}",
        )
        for k, v in entry.get("env", {}).items()
    }
    return McpStdioSource(
        name=source,
        command=command,
        args=args,
        env=MappingProxyType(env),
        cwd=cwd,
        timeout_ms=timeout_ms,
        trust_annotations=trust_annotations,
        plugin=origin,
    )


__all__ = ["PLUGIN_DATA_FOLDER", "PluginProblem", "plugin_sources"]
