"""`codemode schema`: print the JSON Schema of codemode.toml (generated from the models)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from codemodekit.spec.jsonschema import render_json_schema


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "schema",
        help="print the JSON Schema of codemode.toml",
        description=(
            "Print the JSON Schema (draft 2020-12) of codemode.toml. Save it beside the spec "
            "and add `#:schema ./codemode.schema.json` as its first line for editor checks."
        ),
    )
    parser.set_defaults(func=run_schema)


def run_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(render_json_schema())
    return 0
