"""``codemode typecheck SCRIPT.ts``: check a script against the catalog's declarations.

Uses the real TypeScript compiler (``tsc --strict``) from ``node_modules/.bin`` of this
folder, the config's folder or a parent, or from PATH. The declarations are built the way
``codemode generate`` builds them (MCP sources from ``codemode.lock.json``, so no server or
secret is needed once the lock exists). Diagnostics are reported at the script's own lines.
Exit 0 no errors, 1 type errors, 2 usage error or no TypeScript compiler.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from codemodekit.cli.common import (
    CliExit,
    add_config_argument,
    config_path,
    load_config,
    read_script,
)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "typecheck",
        help="type-check a script against the tools' declarations with tsc",
        description=__doc__.split("\n\n", 1)[1].replace("``", "`") if __doc__ else None,
    )
    parser.add_argument("script", help="TypeScript file to check, or - for standard input")
    add_config_argument(parser)
    parser.set_defaults(func=run_typecheck)


def run_typecheck(args: argparse.Namespace) -> int:
    try:
        code, filename = read_script(args.script, command="typecheck")
        spec = load_config(args)
        return typecheck_or_exit(spec, config_path(args), code, filename, quiet_ok=False)
    except CliExit as stop:
        print(stop.message, file=sys.stderr)
        return stop.code


def typecheck_or_exit(spec: Any, config: Path, code: str, filename: str, *, quiet_ok: bool) -> int:
    """Print the diagnostics; 0 when the script type-checks, 1 when not. ``CliExit(2)`` when
    it cannot be checked (no Node.js or tsc, or sources that cannot be reached)."""
    from codemodekit.catalog.lock import lock_path
    from codemodekit.cli.locking import resolve_catalog
    from codemodekit.codegen import generate
    from codemodekit.errors import CodeModeError
    from codemodekit.typecheck import TypecheckUnavailable, check_script, find_tsc

    try:
        tsc = find_tsc(config.parent)
    except TypecheckUnavailable as exc:
        raise CliExit(2, f"codemode typecheck: {exc}") from None
    try:
        resolved = resolve_catalog(spec, lock_path(config), allow_unavailable=False)
    except CodeModeError as exc:
        raise CliExit(2, f"codemode typecheck: {exc}") from None
    if resolved.down:
        down = ", ".join(f"{name} ({why})" for name, why in resolved.down.items())
        raise CliExit(
            2,
            f"codemode typecheck: cannot build the declarations: unavailable source(s): {down}; "
            "run `codemode lock` where they are reachable",
        )
    declarations = generate(resolved.catalog, name=spec.name)["tools.d.ts"]
    try:
        found, other = check_script(code, declarations, tsc)
    except TypecheckUnavailable as exc:
        raise CliExit(2, f"codemode typecheck: {exc}") from None
    for diagnostic in found:
        print(diagnostic.render(filename), file=sys.stderr)
    for line in other:  # trouble outside the script (a declaration tsc rejects): say it as is
        print(f"codemode typecheck: {line}", file=sys.stderr)
    errors = sum(1 for d in found if d.category == "error") + len(other)
    if errors:
        print(
            f"{filename}: {errors} type error{'s' if errors != 1 else ''} ({tsc.shown})",
            file=sys.stderr,
        )
        return 1
    if not quiet_ok:
        print(f"{filename}: no type errors ({tsc.shown})", file=sys.stderr)
    return 0
