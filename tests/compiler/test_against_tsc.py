"""Differential check: our erasure and the real TypeScript compiler give the same results.

Every case of the erasure and semantics suites is wrapped the way the compiler wraps it,
transpiled by `typescript` (`transpileModule`, ES2022) and run in QuickJS next to our output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
import quickjs

from tests.compiler import test_erasure, test_semantics
from tests.compiler.jsrun import JsError, compile_ts, run_js
from tests.conftest import node_package

_TRANSPILE = """
const ts = require(process.argv[1]);
const sources = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = sources.map((source) => {
  const r = ts.transpileModule('(async () => {\\n' + source + '\\n})()', {
    reportDiagnostics: true,
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.None,
                       useDefineForClassFields: true },
  });
  return { js: r.outputText, diagnostics: (r.diagnostics || []).length };
});
process.stdout.write(JSON.stringify(out));
"""

CASES = [*test_erasure.CASES, *test_semantics.CASES]


@pytest.fixture(scope="module")
def tsc_outputs() -> dict[str, dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the differential check needs the typescript package")
    typescript = node_package("typescript")
    result = subprocess.run(
        [node, "-e", _TRANSPILE, str(typescript)],
        input=json.dumps([source for _, source, _ in CASES]),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    outputs = json.loads(result.stdout)
    return {name: out for (name, _, _), out in zip(CASES, outputs, strict=True)}


def _outcome(javascript: str) -> tuple[str, Any]:
    try:
        return "ok", run_js(javascript)
    except JsError as exc:
        return "error", exc.stack.splitlines()[0]


@pytest.mark.parametrize(
    ("name", "source"), [(n, s) for n, s, _ in CASES], ids=[n for n, _, _ in CASES]
)
def test_same_result_as_typescript(
    name: str, source: str, tsc_outputs: dict[str, dict[str, Any]]
) -> None:
    tsc = tsc_outputs[name]
    if tsc["diagnostics"]:
        pytest.skip("TypeScript rejects this inside a function body (module-level syntax)")
    javascript = tsc["js"].replace("export {};", "").rstrip().rstrip(";")
    try:
        expected = _outcome(javascript)
    except quickjs.JSException:
        pytest.skip("TypeScript's own output does not parse inside a function body")
    assert _outcome(compile_ts(source).javascript) == expected
