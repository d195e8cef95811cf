"""`codemode init [DIR]`: write a starter codemode.toml and hello.ts that work as they are."""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from codemodekit.bounded_read import UnreadableFile, read_bounded
from codemodekit.safe_write import UnsafeTarget, write_file

STARTER_FILES = ("codemode.toml", "hello.ts")
"""Copied from ``codemodekit/examples``; the spec uses the bundled demo source."""
SCHEMA_FILE = "codemode.schema.json"
"""Written beside the spec, which names it on its ``#:schema`` first line (editor checks)."""
TSCONFIG_FILE = "tsconfig.json"
TSCONFIG_TEXT = """\
// Lets an editor (VS Code...) check the scripts in this folder against the tools' types:
// `codemode generate` writes codemode/tsconfig.json and the declarations it names.
{ "extends": "./codemode/tsconfig.json" }
"""
"""Written only where no ``tsconfig.json`` exists (never replaced, even with ``--force``):
editors look for a ``tsconfig.json`` beside a script or above it, not in ``codemode/``."""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "init",
        help="write a starter codemode.toml (and hello.ts) using the bundled demo tools",
        description=(
            "Write a commented codemode.toml, its JSON Schema (codemode.schema.json, named on "
            "the spec's #:schema line for editors), an example script, hello.ts, and a "
            "tsconfig.json that extends the one `codemode generate` writes (so an editor "
            "checks the scripts) into DIR. The spec uses a bundled offline demo source, so "
            "`codemode check` and `codemode run hello.ts` work right away. Existing files are "
            "kept unless --force (an existing tsconfig.json is always kept)."
        ),
    )
    parser.add_argument("dir", nargs="?", default=".", help="target folder (default: .)")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.set_defaults(func=run_init)


EXAMPLE_NAME = 'name = "demo-code-mode"'
"""The example spec's name line; ``init`` names the project after its folder instead."""


def project_name(folder: Path) -> str:
    """The folder's name as a server name (it becomes the MCP server's and the plugin's
    name): spaces and other punctuation become ``-``; ``code-mode`` when nothing is left."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.resolve().name).strip("-.")
    return name or "code-mode"


def starter_files(folder: Path | None = None) -> dict[str, str]:
    """``{name: text}`` of the files ``init`` writes (the spec always; the script when the
    installed package ships it). The spec's ``name`` is ``folder``'s name when given."""
    package = resources.files("codemodekit.examples")
    files = {}
    for name in STARTER_FILES:
        item = package.joinpath(name)
        if item.is_file() or name == "codemode.toml":
            files[name] = item.read_text(encoding="utf-8")
    if folder is not None and EXAMPLE_NAME in files["codemode.toml"]:
        named = f"name = {json.dumps(project_name(folder))}"
        files["codemode.toml"] = files["codemode.toml"].replace(EXAMPLE_NAME, named, 1)
    from codemodekit.spec.jsonschema import render_json_schema

    files[SCHEMA_FILE] = render_json_schema()
    return files


def run_init(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    if target.exists() and not target.is_dir():
        print(f"codemode init: {args.dir} exists and is not a folder", file=sys.stderr)
        return 2
    files = starter_files(target)
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
    try:
        for name, text in files.items():
            write_file(target / name, text, inside=target, make_parents=True)
            print(f"wrote {target / name}")
        _write_tsconfig(target)
    except (UnsafeTarget, OSError) as exc:
        print(f"codemode init: {exc}", file=sys.stderr)
        return 2
    where = "" if target.resolve() == Path.cwd().resolve() else f"cd {args.dir} && "
    run_hint = " && codemode run hello.ts" if "hello.ts" in files else ""
    print(f"next: {where}codemode check{run_hint}")
    print(
        f"editor types: {where}codemode generate (writes codemode/tsconfig.json and the tools' types)"
    )
    return 0


def _write_tsconfig(target: Path) -> None:
    """The project's ``tsconfig.json``, unless one exists (it is the user's)."""
    path = target / TSCONFIG_FILE
    if path.exists() or path.is_symlink():
        if _read(path) != TSCONFIG_TEXT:
            print(
                f"kept {path} (yours); for an editor to check the scripts here, it needs "
                '"extends": "./codemode/tsconfig.json" (or the options in that file)'
            )
        return
    write_file(path, TSCONFIG_TEXT, inside=target)
    print(f"wrote {path}")


def _read(path: Path) -> str | None:
    """The text of a small regular file; ``None`` for anything else (never blocks on a FIFO
    or reads a link to a device)."""
    try:
        if path.is_symlink():
            return None
        return read_bounded(path, 4096).decode("utf-8")
    except (UnreadableFile, UnicodeDecodeError):
        return None
