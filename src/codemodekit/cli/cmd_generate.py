"""``codemode generate``: write the generated artifacts, or check them for drift.

    codemode generate [-c codemode.toml] [--out DIR] [--plugin DIR] [--check]

The artifacts go to ``--out`` (default: ``codemode/`` beside the config file) and, with
``--plugin``, an Agent Plugin to that folder. ``--check`` writes nothing: it prints a
unified diff of any drift and exits 1, which is what CI runs. An unchanged catalog
touches no file. A source that cannot be reached aborts the run (exit 2) instead of
silently dropping its tools from the lock, unless ``--allow-unavailable`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from codemodekit.catalog import Catalog
from codemodekit.cli.common import add_config_argument, config_path
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
from codemodekit.providers.base import HealthStatus
from codemodekit.spec.model import Spec

DEFAULT_OUT = "codemode"


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "generate",
        help="write tools.d.ts, per-source declarations, catalog.json (and a skills plugin)",
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
        "(default: the config's file name, resolved in the agent's project folder)",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; print drift and exit 1 if any"
    )
    parser.add_argument(
        "--allow-unavailable",
        action="store_true",
        help="generate even if a source cannot be reached (its tools drop out)",
    )
    parser.set_defaults(func=_run)


async def _catalog(spec: Spec) -> tuple[Catalog, list[str]]:
    from codemodekit.run import CodeMode

    async with CodeMode.from_spec(spec) as cm:
        down = [
            f"{h.source}: {h.message or h.status}"
            for h in cm.health
            if h.status in (HealthStatus.UNAVAILABLE, HealthStatus.CLOSED)
        ]
        return cm.catalog, down


def _plans(args: argparse.Namespace, spec: Spec, catalog: Catalog) -> list[WritePlan]:
    config = config_path(args)
    out = args.out if args.out is not None else config.parent / DEFAULT_OUT
    recover = not args.check
    plans = [
        plan_write(out, generate(catalog, name=spec.name), manifest=LOCK_FILE, recover=recover)
    ]
    if args.plugin is not None:
        files = generate_plugin(
            catalog,
            name=spec.name,
            config=args.serve_config or config.name,
            limits=spec.limits,
        )
        manifest = f"{skill_dir(spec.name)}/references/{METADATA_FILE}"
        plans.append(
            plan_write(args.plugin, files, manifest=manifest, kind=artifact_kind, recover=recover)
        )
    return plans


def _run(args: argparse.Namespace) -> int:
    from codemodekit.spec import load_spec

    try:
        spec = load_spec(config_path(args))
    except CodeModeError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    try:
        catalog, down = asyncio.run(_catalog(spec))
    except CodeModeError as exc:
        print(f"codemode generate: {exc}", file=sys.stderr)
        return 2
    if down and not args.allow_unavailable:
        print(
            "codemode generate: not generating from an incomplete catalog; unavailable "
            "source(s):\n  "
            + "\n  ".join(down)
            + "\n(fix them, or pass --allow-unavailable to drop their tools)",
            file=sys.stderr,
        )
        return 2
    try:
        plans = _plans(args, spec, catalog)
    except ArtifactConflict as exc:
        print(f"codemode generate: {exc}", file=sys.stderr)
        return 2
    if args.check:
        drift = [p for p in plans if p.changed]
        for plan in drift:
            sys.stdout.write(plan.diff())
        if drift:
            print(
                f"codemode generate --check: generated files are out of date "
                f"({sum(len(p.writes) + len(p.deletes) for p in drift)} file(s)); "
                f"run `codemode generate -c {args.config}`"
                + (f" --plugin {args.plugin}" if args.plugin is not None else ""),
                file=sys.stderr,
            )
            return 1
        print(
            f"codemode generate --check: up to date (catalog {catalog.revision})", file=sys.stderr
        )
        return 0
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
