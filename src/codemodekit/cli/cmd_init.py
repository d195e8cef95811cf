"""`codemode init [DIR]`: write a starter codemode.toml and hello.ts that work as they are."""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path
from typing import Any

STARTER_FILES = ("codemode.toml", "hello.ts")
"""Copied from ``codemodekit/examples``; the spec uses the bundled demo source."""
SCHEMA_FILE = "codemode.schema.json"
"""Written beside the spec, which names it on its ``#:schema`` first line (editor checks)."""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "init",
        help="write a starter codemode.toml (and hello.ts) using the bundled demo tools",
        description=(
            "Write a commented codemode.toml, its JSON Schema (codemode.schema.json, named on "
            "the spec's #:schema line for editors) and an example script, hello.ts, into DIR. "
            "The spec uses a bundled offline demo source, so `codemode check` and "
            "`codemode run hello.ts` work right away. Existing files are kept unless --force."
        ),
    )
    parser.add_argument("dir", nargs="?", default=".", help="target folder (default: .)")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.set_defaults(func=run_init)


def starter_files() -> dict[str, str]:
    """``{name: text}`` of the files ``init`` writes (the spec always; the script when the
    installed package ships it)."""
    package = resources.files("codemodekit.examples")
    files = {}
    for name in STARTER_FILES:
        item = package.joinpath(name)
        if item.is_file() or name == "codemode.toml":
            files[name] = item.read_text(encoding="utf-8")
    from codemodekit.spec.jsonschema import render_json_schema

    files[SCHEMA_FILE] = render_json_schema()
    return files


def run_init(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    if target.exists() and not target.is_dir():
        print(f"codemode init: {args.dir} exists and is not a folder", file=sys.stderr)
        return 2
    files = starter_files()
    existing = [name for name in files if (target / name).exists()]
    if existing and not args.force:
        shown = ", ".join(str(target / name) for name in existing)
        print(
            f"codemode init: {shown} already exist{'s' if len(existing) == 1 else ''}; "
            "nothing written (pass --force to overwrite)",
            file=sys.stderr,
        )
        return 1
    target.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (target / name).write_text(text, encoding="utf-8")
        print(f"wrote {target / name}")
    where = "" if target.resolve() == Path.cwd().resolve() else f"cd {args.dir} && "
    run_hint = " && codemode run hello.ts" if "hello.ts" in files else ""
    print(f"next: {where}codemode check{run_hint}")
    return 0
