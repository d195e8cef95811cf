"""`codemode check`: load the spec, report its problems, then connect and report health.

Exit codes: 0 everything usable; 1 a problem found with a valid spec (a missing file, an
unavailable source); 2 a spec error or a usage error (no spec file at the given path), as in
every other command.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

from codemodekit.cli.common import (
    add_config_argument,
    config_path,
    health_message,
    quiet_library_logs,
    warn_inert_rules,
)
from codemodekit.errors import CodeModeError
from codemodekit.limits import Limits
from codemodekit.providers.base import HealthStatus, SourceHealth
from codemodekit.spec import SpecError, load_spec
from codemodekit.spec.checks import check_environment, locate, unmatched_rules
from codemodekit.spec.model import (
    McpHttpSource,
    McpStdioSource,
    OpenApiSource,
    PythonSource,
    SourceSpec,
    Spec,
)

if TYPE_CHECKING:
    from codemodekit.catalog.catalog import Catalog


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "check",
        help="validate codemode.toml, then connect every source and report its health",
        description=(
            "Load the spec and report problems with file:line:column. Unless --offline, "
            "also start every source and report health, tool counts, quarantined tools "
            "and skipped operations."
        ),
        epilog=(
            "Exit codes: 0 all good, 1 a problem was found (missing file, unavailable "
            "source), 2 spec or usage error (malformed spec, no spec file)."
        ),
    )
    add_config_argument(parser)
    parser.add_argument(
        "--offline",
        "--spec-only",
        dest="offline",
        action="store_true",
        help="check the file only: do not start or connect to any source; missing files "
        "and unset variables are reported as warnings",
    )
    parser.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    config = config_path(args)
    if not config.exists():
        print(
            f"codemode check: {args.config} not found; create one with `codemode init` "
            "or pass -c PATH",
            file=sys.stderr,
        )
        return 2
    try:
        spec = load_spec(args.config)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 2  # a spec error is a usage error, as in every other command
    findings = check_environment(spec)
    print_summary(spec, args.config, sys.stdout)
    # Offline, what this machine lacks (a document, a variable) is a warning: the file
    # itself is valid. Connecting, a missing file fails its source, so it is an error.
    for issue in findings.warnings:
        print("warning: " + issue.render(args.config), file=sys.stderr)
    for issue in findings.errors:
        prefix = "warning: " if args.offline else ""
        print(prefix + issue.render(args.config), file=sys.stderr)
    if args.offline:
        return 0
    status = asyncio.run(_connect(spec, args.config, sys.stdout))
    return 1 if findings.errors else status


def print_summary(spec: Spec, shown_path: str, out: TextIO) -> None:
    """The spec on one screen: name, sources, non-default limits, policy."""
    print(f"{shown_path}: spec is valid", file=out)
    print(f"  name:    {spec.name}", file=out)
    if spec.sources:
        print("  sources:", file=out)
        width = max(len(n) for n in spec.sources)
        for name, source in spec.sources.items():
            print(f"    {name:<{width}}  {describe_source(source)}", file=out)
    else:
        print("  sources: (none)", file=out)
    changed = _changed_limits(spec.limits)
    if changed:
        print("  limits:  " + ", ".join(changed), file=out)
    else:
        print("  limits:  defaults", file=out)
    print(f"  policy:  default {spec.policy.default}", file=out)
    # Numbered as key paths are (`policy.rules[1].tools` in a warning is `rules[1]` here).
    for index, rule in enumerate(spec.policy.rules):
        scope = "" if rule.read_only is None else f" (read_only = {str(rule.read_only).lower()})"
        print(f"    rules[{index}]: {rule.tools}{scope} -> {rule.decision}", file=out)
        names = rule.tools.split(".", 1)[0] if "." in rule.tools else "*"
        if rule.read_only and not any(
            source.trust_annotations and fnmatch.fnmatchcase(name, names)
            for name, source in spec.sources.items()
        ):
            print(
                "      (matches nothing: no source it names sets trust_annotations = true, "
                "and readOnlyHint is believed only from those)",
                file=out,
            )


def describe_source(source: SourceSpec) -> str:
    # Only parts that cannot carry a secret: no args, env, headers, URL query or userinfo.
    if isinstance(source, McpStdioSource | McpHttpSource) and source.plugin is not None:
        command = json.loads(source.plugin.entry).get("command")  # as written: portable
        shown = (
            f"mcp (stdio): {command}" if command else describe_source(replace(source, plugin=None))
        )
        return f"{source.plugin.label}: {shown}"
    if isinstance(source, McpStdioSource):
        extra = f" +{len(source.args)} args" if source.args else ""
        return f"mcp (stdio): {source.command}{extra}"
    if isinstance(source, McpHttpSource):
        parts = urlsplit(source.url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"mcp ({source.transport}): {parts.scheme}://{host}{port}{parts.path}"
    if isinstance(source, OpenApiSource):
        return f"openapi: {source.document.name}"
    if isinstance(source, PythonSource):
        return f"python: {source.module}"
    return type(source).__name__  # pragma: no cover - SourceSpec is closed


def _report_containment(spec: Spec, out: TextIO) -> bool:
    """Which containment layers `codemode serve` would run model code under (ADR 0028);
    false when process mode would refuse to start."""
    from codemodekit.sandbox.process import ProcessSandbox
    from codemodekit.sandbox.zygote import describe

    sandbox = ProcessSandbox(spec.runtime, shared=False)
    try:
        print(f"sandbox: {describe(sandbox.containment())}", file=out)
    except Exception as refused:  # the pool's refusal names the layer and the opt-out
        print(f"codemode check: {refused}", file=sys.stderr)
        return False
    finally:
        sandbox.close()
    return True


def _changed_limits(limits: Limits) -> list[str]:
    defaults = Limits()
    return [
        f"{name} = {getattr(limits, name)} (default {getattr(defaults, name)})"
        for name in Limits.names()
        if getattr(limits, name) != getattr(defaults, name)
    ]


async def _connect(spec: Spec, shown_path: str, out: TextIO) -> int:
    from codemodekit.run import CodeMode
    from codemodekit.runtime import RuntimeOptions

    quiet_library_logs()
    print("connecting...", file=out, flush=True)
    try:
        # No code runs here: no sandbox worker pool to start.
        cm = CodeMode.from_spec(spec, runtime=RuntimeOptions(mode="inline"))
        try:
            # A check reports each source's settled state: wait for slow ones (each is
            # bounded by its own connect timeout) instead of the server's start grace.
            await cm.start(grace_s=None)
            health = cm.health
            catalog = cm.catalog
        finally:
            await cm.aclose()
    except CodeModeError as exc:  # sources report their own failures; this is the facade
        print(f"codemode check: {exc}", file=sys.stderr)
        return 1
    print_health(health, out)
    if spec.runtime.mode == "process" and not _report_containment(spec, out):
        return 1
    if catalog.quarantined:
        print("quarantined tools (visible, not callable):", file=out)
        for tool in catalog.quarantined:
            print(f"  {tool.source}.{tool.name}: {tool.quarantine}", file=out)
    if catalog.skipped:
        print("skipped operations:", file=out)
        for skipped in catalog.skipped:
            print(f"  {skipped.source}.{skipped.name}: {skipped.reason}", file=out)
    up = {h.source for h in health if h.status != HealthStatus.UNAVAILABLE}
    addresses = [f"{t.source}.{t.name}" for t in catalog.tools if t.source in up]
    if len(up) == len(health):  # with a source down, "matches nothing" may be premature
        for issue in locate(spec, unmatched_rules(spec, addresses)):
            print("warning: " + issue.render(shown_path), file=sys.stderr)
        warn_inert_rules(spec, catalog, health, shown_path)
    _report_lock_drift(spec, Path(shown_path), catalog, up)
    total = len(catalog.available_tools)
    print(f"{total} callable tool{'s' if total != 1 else ''}, catalog {catalog.revision}", file=out)
    unavailable = [h.source for h in health if h.status == HealthStatus.UNAVAILABLE]
    if unavailable:
        print(f"unavailable: {', '.join(unavailable)}", file=sys.stderr)
        return 1
    return 0


def _report_lock_drift(spec: Spec, config: Path, live: Catalog, up: set[str]) -> None:
    """One warning per live source whose tools differ from ``codemode.lock.json``."""
    from codemodekit.catalog.lock import (
        LockError,
        drift,
        lock_path,
        locked_catalog,
        read_lock,
        stale,
    )

    path = lock_path(config)
    try:
        locked = read_lock(path)
    except LockError as exc:
        print(f"warning: {exc}", file=sys.stderr)
        return
    if locked is None:
        return
    names = [n for n in spec.sources if n in up]
    reasons = stale(spec, locked, names)
    for name, why in reasons.items():
        print(f"warning: {name} is {why} ({path.name}); run `codemode lock`", file=sys.stderr)
    compared = [n for n in names if n not in reasons]
    for found in drift(locked_catalog(locked, compared), live, compared):
        print(
            f"warning: {found.source} differs from {path.name}: {found.summary}; "
            "run `codemode lock` and `codemode generate`",
            file=sys.stderr,
        )


def print_health(health: tuple[SourceHealth, ...], out: TextIO) -> None:
    print("sources:", file=out)
    if not health:
        print("  (none)", file=out)
        return
    width = max(len(h.source) for h in health)
    for item in health:
        data = {**item.to_json(), "message": health_message(item)}
        line = f"  {data['source']:<{width}}  {data['status']:<11}  {data['kind']:<7}"
        line += f"  {data['tools']} tool{'s' if data['tools'] != 1 else ''}"
        if data["message"]:
            line += f"  ({data['message']})"
        print(line, file=out)
        if item.detail:  # host-only: a failed child's scrubbed stderr tail
            print(f"  {'':<{width}}  stderr: {item.detail}", file=out)
