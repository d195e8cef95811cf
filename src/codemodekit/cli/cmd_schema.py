"""`codemode schema` (placeholder until its issue lands)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    parser = sub.add_parser("schema", help="(not yet available)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    print("codemode schema: not available yet", file=sys.stderr)
    return 2
