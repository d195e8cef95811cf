"""``codemode lock``: record what every source offers in ``codemode.lock.json``.

    codemode lock [-c codemode.toml] [--check] [--allow-unavailable]

Connects to every source (this is the step that needs the servers and the secrets), and
writes their tool lists and schemas to ``codemode.lock.json`` beside the config. Commit it:
``codemode generate`` and ``generate --check`` then need no server and no secret. ``--check``
writes nothing and exits 1 when a live source differs from the lock.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from codemodekit.catalog.lock import lock_path
from codemodekit.cli.common import add_config_argument, config_path, quiet_library_logs
from codemodekit.cli.locking import resolve_catalog, write_text_atomic
from codemodekit.errors import CodeModeError
from codemodekit.safe_write import UnsafeTarget


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "lock",
        help="record every source's tools in codemode.lock.json (for offline generate)",
        description=__doc__.split("\n\n", 2)[2].replace("``", "`") if __doc__ else None,
    )
    add_config_argument(parser)
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a live source differs from the lock",
    )
    parser.add_argument(
        "--allow-unavailable",
        action="store_true",
        help="keep the locked entry of a source that cannot be reached instead of failing",
    )
    parser.set_defaults(func=run_lock)


def run_lock(args: argparse.Namespace) -> int:
    from codemodekit.spec import load_spec

    quiet_library_logs()
    try:
        spec = load_spec(config_path(args))
        resolved = resolve_catalog(
            spec,
            lock_path(config_path(args)),
            update=True,
            allow_unavailable=args.allow_unavailable,
        )
    except CodeModeError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if resolved.down:
        print(
            "codemode lock: cannot reach source(s):\n  "
            + "\n  ".join(f"{name}: {why}" for name, why in resolved.down.items())
            + "\n(the lock is unchanged; pass --allow-unavailable to keep their locked entries)",
            file=sys.stderr,
        )
        return 2
    tools = len(resolved.catalog)
    if args.check:
        if resolved.lock_drift:
            print(
                f"codemode lock --check: {resolved.lock_file} is out of date:\n  "
                + "\n  ".join(resolved.lock_drift)
                + f"\nrun `codemode lock -c {args.config}` and commit it",
                file=sys.stderr,
            )
            return 1
        print(f"{resolved.lock_file}: up to date ({tools} tools)", file=sys.stderr)
        return 0
    if not resolved.lock_drift:
        print(f"{resolved.lock_file}: unchanged ({tools} tools)", file=sys.stderr)
        return 0
    try:
        write_text_atomic(resolved.lock_file, resolved.lock_text)
    except (UnsafeTarget, OSError) as exc:
        print(f"codemode lock: {exc}", file=sys.stderr)
        return 2
    print(
        f"{resolved.lock_file}: written ({tools} tools)\n  " + "\n  ".join(resolved.lock_drift),
        file=sys.stderr,
    )
    return 0
