"""``codemode generate``: write the generated artifacts, or check them for drift.

    codemode generate [-c codemode.toml] [--out DIR] [--plugin DIR] [--check]

The artifacts go to ``--out`` (default: ``codemode/`` beside the config file) and, with
``--plugin``, an Agent Plugin to that folder. They include what an editor needs to check the
scripts below the config's folder: ``globals.d.ts`` (the sandbox's ``console``) and a
``tsconfig.json`` (a ``tsconfig.json`` beside the config containing
``{"extends": "./codemode/tsconfig.json"}``, which ``codemode init`` writes, lets VS Code
find it). ``--check`` writes nothing: it prints a
unified diff of any drift and exits 1, which is what CI runs. An unchanged catalog
touches no file.

MCP sources are read from ``codemode.lock.json`` beside the config, so neither a server nor
a secret is needed (CI runs ``generate --check`` offline); OpenAPI documents and Python
modules are read directly. Without a lock, or for a source whose entry is stale,
``generate`` connects to it and writes the lock (``--check`` reports it instead);
``--update-lock`` (or ``codemode lock``) refreshes every source from the live servers. A
source that cannot be reached aborts the run (exit 2) instead of silently dropping its
tools, unless ``--allow-unavailable`` is given.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from codemodekit.catalog.catalog import Catalog
from codemodekit.catalog.lock import LockError, lock_path
from codemodekit.cli.common import add_config_argument, config_path
from codemodekit.cli.locking import Resolved, resolve_catalog, write_text_atomic
from codemodekit.codegen import (
    LOCK_FILE,
    METADATA_FILE,
    ArtifactConflict,
    WritePlan,
    apply,
    artifact_kind,
    generate,
    generate_plugin,
    plan_write,
    skill_dir,
)
from codemodekit.errors import CodeModeError
from codemodekit.safe_write import UnsafeTarget
from codemodekit.spec.model import Spec

DEFAULT_OUT = "codemode"


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "generate",
        help="write tools.d.ts, per-source declarations, a tsconfig.json for editors, catalog.json "
        "(and a skills plugin)",
        description=__doc__.split("\n\n", 2)[2].replace("``", "`") if __doc__ else None,
    )
    add_config_argument(parser)
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        default=None,
        help=f"artifact folder (default: {DEFAULT_OUT}/ beside the config file)",
    )
    parser.add_argument(
        "--plugin", type=Path, default=None, metavar="DIR", help="also write an Agent Plugin here"
    )
    parser.add_argument(
        "--serve-config",
        default=None,
        metavar="PATH",
        help="config path that the plugin's mcp.json passes to `codemode serve -c` "
        "(default: this config's absolute path, as `codemode install` writes it)",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; print drift and exit 1 if any"
    )
    parser.add_argument(
        "--update-lock",
        action="store_true",
        help="refresh codemode.lock.json from the live sources first (like `codemode lock`)",
    )
    parser.add_argument(
        "--allow-unavailable",
        action="store_true",
        help="generate even if a source cannot be reached (its tools drop out)",
    )
    parser.set_defaults(func=_run)


def scripts_folder(scripts: Path, out: Path) -> str:
    """The scripts' folder (the config's) as the generated tsconfig.json names it: relative
    to the output folder, with ``/``."""
    return Path(os.path.relpath(scripts.resolve(), out.resolve())).as_posix()


def _plans(args: argparse.Namespace, spec: Spec, catalog: Catalog) -> list[WritePlan]:
    config = config_path(args)
    out = args.out if args.out is not None else config.parent / DEFAULT_OUT
    recover = not args.check
    files = generate(catalog, name=spec.name, scripts=scripts_folder(config.parent, out))
    plans = [plan_write(out, files, manifest=LOCK_FILE, recover=recover)]
    if args.plugin is not None:
        from codemodekit.cli.cmd_install import server_entry, spec_variables

        # What `codemode install json` writes: works whatever folder the agent starts in.
        served = Path(args.serve_config) if args.serve_config else config.resolve()
        server, _ = server_entry("json", served, spec_variables(spec), copy_env=False)
        files = generate_plugin(catalog, name=spec.name, limits=spec.limits, server=server)
        manifest = f"{skill_dir(spec.name)}/references/{METADATA_FILE}"
        plans.append(
            plan_write(args.plugin, files, manifest=manifest, kind=artifact_kind, recover=recover)
        )
    return plans


def _run(args: argparse.Namespace) -> int:
    from codemodekit.spec import load_spec

    try:
        spec = load_spec(config_path(args))
        resolved = resolve_catalog(
            spec,
            lock_path(config_path(args)),
            update=args.update_lock,
            offline=args.check,
            allow_unavailable=args.allow_unavailable,
        )
    except CodeModeError as exc:
        print(
            f"codemode generate: {exc}" if isinstance(exc, LockError) else str(exc), file=sys.stderr
        )
        return 2
    if resolved.down:
        print(
            "codemode generate: not generating from an incomplete catalog; unavailable "
            "source(s):\n  "
            + "\n  ".join(f"{name}: {why}" for name, why in resolved.down.items())
            + "\n(fix them, or pass --allow-unavailable to drop their tools)",
            file=sys.stderr,
        )
        return 2
    catalog = resolved.catalog
    try:
        plans = _plans(args, spec, catalog)
    except ArtifactConflict as exc:
        print(f"codemode generate: {exc}", file=sys.stderr)
        return 2
    if args.check:
        return _check(args, plans, resolved)
    if resolved.lock_drift:
        try:
            write_text_atomic(resolved.lock_file, resolved.lock_text)
        except (UnsafeTarget, OSError) as exc:
            print(f"codemode generate: {exc}", file=sys.stderr)
            return 2
        print(
            f"{resolved.lock_file}: updated ({len(resolved.lock_drift)} change(s))", file=sys.stderr
        )
    for plan in plans:
        try:
            apply(plan)
        except ArtifactConflict as exc:
            print(f"codemode generate: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(
                f"codemode generate: writing {plan.root} failed ({exc}); "
                "its previous files were restored",
                file=sys.stderr,
            )
            return 1
        print(
            f"{plan.root}: {len(plan.writes)} written, {len(plan.deletes)} removed, "
            f"{len(plan.unchanged)} unchanged (catalog {catalog.revision})",
            file=sys.stderr,
        )
    return 0


def _check(args: argparse.Namespace, plans: list[WritePlan], resolved: Resolved) -> int:
    """``--check``: print every drift (files as a diff, the lock as a summary); exit 1 if any."""
    drift = [p for p in plans if p.changed]
    for plan in drift:
        sys.stdout.write(plan.diff())
    fix = f"codemode generate -c {args.config}" + (
        f" --plugin {args.plugin}" if args.plugin is not None else ""
    )
    if drift:
        print(
            f"codemode generate --check: generated files are out of date "
            f"({sum(len(p.writes) + len(p.deletes) for p in drift)} file(s)); run `{fix}`",
            file=sys.stderr,
        )
    if resolved.lock_drift:
        print(
            f"codemode generate --check: {resolved.lock_file} is out of date:\n  "
            + "\n  ".join(resolved.lock_drift)
            + f"\nrun `{fix}` (or `codemode lock` to refresh every source) and commit it",
            file=sys.stderr,
        )
    if drift or resolved.lock_drift:
        return 1
    print(
        f"codemode generate --check: up to date (catalog {resolved.catalog.revision})",
        file=sys.stderr,
    )
    return 0
