"""Type-check a script against the generated declarations with the real TypeScript compiler.

A script is the body of an async function (top-level ``await`` and ``return``), which no
TypeScript file mode accepts as is. So the script is wrapped, unchanged and unindented, in
an ``async function`` in a generated file, next to ``tools.d.ts`` and the sandbox's globals
(``globals.d.ts``), under the options of the generated ``tsconfig.json``; ``tsc`` checks
that, and each diagnostic is mapped back to the script's own line and column (ADR 0020). Node.js and ``tsc`` are the user's: found in ``node_modules/.bin`` of the current
folder, the config's folder or one of their parents, then on ``PATH``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from codemodekit.codegen.editor import COMPILER_OPTIONS, GLOBALS_FILE, SANDBOX_GLOBALS

WRAPPER_FILE = "script.ts"
# The script starts on line 2 of the wrapper, at column 1: only lines shift.
WRAPPER_HEAD = "async function __codemode_script__(): Promise<unknown> {\n"
WRAPPER_TAIL = "\n}\nvoid __codemode_script__;\n"
LINE_OFFSET = WRAPPER_HEAD.count("\n")

INSTALL_HINT = (
    "install it with `npm install --save-dev typescript` in your project "
    "(or `npm install --global typescript`)"
)


class TypecheckUnavailable(Exception):
    """Node.js or the TypeScript compiler is not installed; the message says how to fix it."""


@dataclass(frozen=True, slots=True)
class TsDiagnostic:
    line: int
    column: int
    code: str
    """``TS2339``."""
    category: str
    """``error`` or ``warning``."""
    message: str

    def render(self, filename: str) -> str:
        return f"{filename}:{self.line}:{self.column}: {self.category} {self.code}: {self.message}"


def find_tsc(folders: Iterable[Path]) -> list[str]:
    """The command that runs ``tsc``; raises ``TypecheckUnavailable`` with the fix."""
    node = shutil.which("node")
    if node is None:
        raise TypecheckUnavailable(
            "Node.js is not installed (no `node` on PATH): type-checking needs Node.js 18+ "
            f"and the TypeScript compiler; {INSTALL_HINT}"
        )
    seen: set[Path] = set()
    for folder in folders:
        for candidate in (folder.resolve(), *folder.resolve().parents):
            if candidate in seen:
                continue
            seen.add(candidate)
            script = candidate / "node_modules" / "typescript" / "bin" / "tsc"
            if script.is_file():
                return [node, str(script)]
    on_path = shutil.which("tsc")
    if on_path is not None:
        return [on_path]
    raise TypecheckUnavailable(f"the TypeScript compiler (tsc) was not found; {INSTALL_HINT}")


_LINE = re.compile(
    r"^(?P<file>.*)\((?P<line>\d+),(?P<col>\d+)\): (?P<cat>error|warning) (?P<code>TS\d+): (?P<msg>.*)$"
)


def parse_output(output: str, script_lines: int) -> tuple[list[TsDiagnostic], list[str]]:
    """``tsc --pretty false`` output → (diagnostics in the script, lines about other files)."""
    found: list[tuple[int, int, str, str, list[str]]] = []
    other: list[str] = []
    current: list[str] | None = None
    for raw in output.splitlines():
        match = _LINE.match(raw)
        if match is None:
            if raw.startswith(" ") and current is not None:
                current.append(raw.strip())  # a message continues on indented lines
            elif raw.strip():
                other.append(raw)
            continue
        if Path(match["file"]).name != WRAPPER_FILE:
            other.append(raw)
            current = None
            continue
        line = int(match["line"]) - LINE_OFFSET
        column = int(match["col"])
        if line < 1:
            line, column = 1, 1
        elif line > script_lines:  # reported on the wrapper's closing lines: the script's end
            line, column = max(script_lines, 1), 1
        current = [match["msg"]]
        found.append((line, column, match["code"], match["cat"], current))
    diagnostics = [
        TsDiagnostic(ln, col, code, cat, " ".join(parts)) for ln, col, code, cat, parts in found
    ]
    return diagnostics, other


def check_script(
    code: str,
    declarations: str,
    tsc: list[str],
    *,
    timeout_s: float = 120.0,
) -> tuple[list[TsDiagnostic], list[str]]:
    """Type-check ``code`` against ``declarations`` (the generated ``tools.d.ts``)."""
    with tempfile.TemporaryDirectory(prefix="codemode-typecheck-") as folder:
        root = Path(folder)
        (root / "tools.d.ts").write_text(declarations, encoding="utf-8")
        (root / GLOBALS_FILE).write_text(SANDBOX_GLOBALS, encoding="utf-8")
        (root / WRAPPER_FILE).write_text(WRAPPER_HEAD + code + WRAPPER_TAIL, encoding="utf-8")
        config = {
            "compilerOptions": dict(COMPILER_OPTIONS),
            "files": ["tools.d.ts", GLOBALS_FILE, WRAPPER_FILE],
        }
        (root / "tsconfig.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        try:
            done = subprocess.run(
                [*tsc, "--project", str(root / "tsconfig.json"), "--pretty", "false"],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                env={**os.environ, "NO_COLOR": "1"},
            )
        except subprocess.TimeoutExpired:
            raise TypecheckUnavailable(f"tsc did not finish within {timeout_s:.0f} s") from None
        except OSError as exc:
            raise TypecheckUnavailable(f"tsc could not be started: {exc.strerror}") from None
    lines = len(code.splitlines()) or 1
    return parse_output(done.stdout + done.stderr, lines)
