"""A projected type name is never a global of the TypeScript lib scripts are checked against.

The generated ``tools.d.ts`` declares its types in the global scope. A projected interface
named like a built-in (``ErrorOptions``, ``PromiseLike``) merges into it, and a type alias
named like one (``Uint8Array``) clashes with it; the editor's ``skipLibCheck`` hides both,
and a script's own use of the built-in then fails or means something else. Names come from
the upstream: ``error`` with a ``$defs`` key ``Options`` asks for ``ErrorOptions``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from codemodekit.codegen.artifacts import generate
from codemodekit.schema.typescript import RESERVED_TYPE_NAMES, pascal_case
from tests.codegen.helpers import assert_typechecks, catalog_from_json
from tests.conftest import NODE_MODULES, node_tool

ROOT = Path(__file__).resolve().parents[2]
_DECLARED = re.compile(r"^(?:export )?(?:declare )?(?:interface|type) ([A-Za-z_$][\w$]*)", re.M)


def _lib_globals() -> list[str]:
    """Every global TypeScript's lib.es2022 declares, as the installed compiler reports it."""
    node_tool("tsc")  # skips with the reason when node or typescript is missing
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run(
        [node, str(ROOT / "scripts" / "ts_lib_globals.cjs"), str(NODE_MODULES / "typescript")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.split()


def _asking_for(names: list[str]) -> dict[str, list[str]]:
    """Source name → ``$defs`` keys, so that source + key asks for each name that can be
    split into two such parts (``error`` + ``Options`` for ``ErrorOptions``)."""
    wanted: dict[str, list[str]] = defaultdict(list)
    for name in names:
        for cut in range(1, len(name)):
            source, key = name[:cut].lower(), name[cut:]
            if (
                re.fullmatch(r"[a-z][a-z0-9]*", source)
                and pascal_case(source) + pascal_case(key) == name
            ):
                wanted[source].append(key)
                break
    return wanted


def test_every_global_of_the_installed_typescript_lib_is_reserved() -> None:
    missing = sorted(set(_lib_globals()) - RESERVED_TYPE_NAMES)
    assert not missing, (
        f"regenerate src/codemodekit/schema/typescript/lib_globals.py "
        f"(scripts/ts_lib_globals.cjs): {missing}"
    )


def test_no_projected_name_is_a_global_of_the_lib(tmp_path: Path) -> None:
    globals_ = _lib_globals()
    wanted = _asking_for(globals_)
    asked = sum(len(keys) for keys in wanted.values())
    assert asked > 100  # most of the lib's type names can be asked for this way
    sources = {
        source: {
            "tools": [
                {
                    "name": "t",
                    "input_schema": {
                        "type": "object",
                        "properties": {
                            f"p{i}": {"$ref": f"#/$defs/{k}"} for i, k in enumerate(keys)
                        },
                        "$defs": {
                            k: {
                                "type": "object",
                                "properties": {f"only_{source}_{k}": {"type": "string"}},
                            }
                            for k in keys
                        },
                    },
                }
            ]
        }
        for source, keys in wanted.items()
    }
    files = generate(catalog_from_json({"sources": sources}), name="demo")
    declarations = files["tools.d.ts"]
    declared = set(_DECLARED.findall(declarations))
    assert len(declared) > asked  # every asked-for name was declared, under some name
    assert not declared & set(globals_), sorted(declared & set(globals_))

    # The built-ins still mean what they mean, checked without skipLibCheck.
    (tmp_path / "tools.d.ts").write_text(declarations, encoding="utf-8")
    (tmp_path / "check.ts").write_text(
        "const e = new Error('x', { cause: 1 });\n"
        "const bytes: Uint8Array = new Uint8Array(2);\n"
        "const later: PromiseLike<number> = Promise.resolve(1);\n"
        "const step: IteratorResult<number> = [1][Symbol.iterator]().next();\n"
        "const key: PropertyKey = 'k';\n"
        "export { e, bytes, later, step, key };\n",
        encoding="utf-8",
    )
    assert_typechecks([[tmp_path / "tools.d.ts", tmp_path / "check.ts"]])


@pytest.mark.parametrize("name", ["ErrorOptions", "Uint8Array", "PromiseLike", "IteratorResult"])
def test_each_reported_collision_is_reserved(name: str) -> None:
    # The collisions a review found (a stop's note): each is in the checked-in list even
    # where no TypeScript is installed.
    assert name in RESERVED_TYPE_NAMES
