"""Type-check a script against the generated declarations with the real TypeScript compiler.

A script is the body of an async function (top-level ``await`` and ``return``), which no
TypeScript file mode accepts as is. So the script is wrapped, unchanged and unindented, in
an ``async function`` in a generated file, next to ``tools.d.ts`` and the sandbox's globals
(``globals.d.ts``), under the options of the generated ``tsconfig.json``; ``tsc`` checks
that, and each diagnostic is mapped back to the script's own line and column (ADR 0020).

Node.js and ``tsc`` are the user's, looked for only inside the project: in
``node_modules/typescript`` of the config's folder and of its parents up to the repository
root (the nearest folder with ``.git``; without one, the config's folder alone), then on
``PATH``. Never in ``/tmp`` or a parent folder outside the project, where anyone may have
put one. The compiler must answer ``--version`` like TypeScript (``Version X.Y.Z``), and
its name and version are reported with the result (ADR 0030).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
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


@dataclass(frozen=True, slots=True)
class Compiler:
    """The ``tsc`` that will run: its command and what it said its version is."""

    command: tuple[str, ...]
    version: str
    """``5.6.3``, from ``tsc --version``."""

    @property
    def shown(self) -> str:
        return f"TypeScript {self.version}, {self.command[-1]}"


_VERSION = re.compile(r"^Version (\d+\.\d+\.\d+[0-9A-Za-z.+-]*)\s*$")


def project_folders(config_folder: Path) -> list[Path]:
    """Where a project's own ``node_modules`` may be: the config's folder and its parents up
    to the repository root; the config's folder alone outside a repository."""
    start = config_folder.resolve()
    chain = [start, *start.parents]
    for index, folder in enumerate(chain):
        if (folder / ".git").exists():
            return chain[: index + 1]
    return [start]


def find_tsc(config_folder: Path, *, timeout_s: float = 60.0) -> Compiler:
    """The project's ``tsc`` (see the module doc), checked to be TypeScript; raises
    ``TypecheckUnavailable`` with the fix."""
    node = shutil.which("node")
    if node is None:
        raise TypecheckUnavailable(
            "Node.js is not installed (no `node` on PATH): type-checking needs Node.js 18+ "
            f"and the TypeScript compiler; {INSTALL_HINT}"
        )
    command: list[str] | None = None
    for folder in project_folders(config_folder):
        script = folder / "node_modules" / "typescript" / "bin" / "tsc"
        if script.is_file():
            command = [node, str(script)]
            break
    if command is None:
        on_path = shutil.which("tsc")
        if on_path is None:
            raise TypecheckUnavailable(
                f"the TypeScript compiler (tsc) was not found; {INSTALL_HINT}"
            )
        command = [on_path]
    return Compiler(tuple(command), _version(command, timeout_s))


def _version(command: list[str], timeout_s: float) -> str:
    shown = command[-1]
    try:
        done = subprocess.run(
            [*command, "--version"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "NO_COLOR": "1"},
        )
    except subprocess.TimeoutExpired:
        raise TypecheckUnavailable(f"{shown} --version did not answer") from None
    except OSError as exc:
        raise TypecheckUnavailable(f"{shown} could not be started: {exc.strerror}") from None
    match = _VERSION.match(done.stdout.strip()) if done.returncode == 0 else None
    if match is None:
        said = " ".join(done.stdout.split())[:80] or "nothing"
        raise TypecheckUnavailable(
            f"{shown} does not answer like the TypeScript compiler (`--version` printed "
            f"{said!r}, exit {done.returncode}); {INSTALL_HINT}"
        )
    return match[1]


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
    tsc: Compiler,
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
                [
                    *tsc.command,
                    "--project",
                    str(root / "tsconfig.json"),
                    "--pretty",
                    "false",
                    # The files it read: proof that it compiled the script at all.
                    "--listFiles",
                ],
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
    printed = (done.stdout + done.stderr).splitlines()
    listed = [line for line in printed if os.path.isabs(line.strip()) and line.endswith(".ts")]
    read_script = any(Path(line.strip()).name == WRAPPER_FILE for line in listed)
    found, other = parse_output("\n".join(line for line in printed if line not in listed), lines)
    if done.returncode not in (0, 1, 2) or not read_script:
        # tsc lists the files it compiled and exits 0 (no errors) or 1-2 (errors printed);
        # anything else is not a verdict, and must never read as "no type errors".
        raise TypecheckUnavailable(
            f"{tsc.shown} exited {done.returncode} without reporting anything on the script "
            "(it does not behave like the TypeScript compiler)"
        )
    return found, other
