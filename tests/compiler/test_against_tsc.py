"""Differential check: our erasure and the real TypeScript compiler give the same results.

Every case of the erasure and semantics suites is wrapped the way the compiler wraps it,
transpiled by `typescript` (`transpileModule`, ES2022) and run in QuickJS next to our output.
A second pass re-lays each case out (line breaks and comments between random tokens), which
is where erasure and automatic semicolon insertion interact.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from typing import Any

import pytest
import quickjs
import tree_sitter as ts
import tree_sitter_typescript as tst

from codemodekit.errors import CompileFailure
from tests.compiler import test_erasure, test_semantics
from tests.compiler.jsrun import JsError, compile_ts, run_js
from tests.conftest import missing, node_package

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
_SEPARATORS = ["\n", "\r\n", " /* c */ ", "\n// c\n", "/*\n*/"]
# TypeScript's emitter drops `<T>`/parentheses and leaves a line-breaking comment right after
# `return`/`throw`, so its own output returns undefined there: not a reference to compare with.
_TSC_COMMENT_AFTER_RETURN = re.compile(r"\b(return|throw)\s*/\*[^*]*[\r\n]")


def _relayouts(source: str, rng: random.Random, count: int) -> list[str]:
    data = source.encode()
    parser = ts.Parser(ts.Language(tst.language_typescript()))
    ends: set[int] = set()
    stack = [parser.parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.child_count == 0:
            ends.add(node.end_byte)
        stack.extend(node.children)
    boundaries = sorted(ends)
    variants = []
    for _ in range(count):
        picks = rng.sample(boundaries, min(len(boundaries), rng.randint(1, 3)))
        variant = data
        for at in sorted(picks, reverse=True):
            variant = variant[:at] + rng.choice(_SEPARATORS).encode() + variant[at:]
        variants.append(variant.decode())
    return variants


def _transpile(sources: list[str]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        missing("node", "install Node.js 20 and npm (the differential check runs TypeScript)")
    typescript = node_package("typescript")
    result = subprocess.run(
        [node, "-e", _TRANSPILE, str(typescript)],
        input=json.dumps(sources),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    outputs: list[dict[str, Any]] = json.loads(result.stdout)
    return outputs


@pytest.fixture(scope="module")
def tsc_outputs() -> dict[str, dict[str, Any]]:
    outputs = _transpile([source for _, source, _ in CASES])
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


def test_relaid_out_cases_match_typescript_or_fail_loudly() -> None:
    rng = random.Random(20261129)
    variants = [v for _, source, _ in CASES for v in _relayouts(source, rng, 8)]
    compared = 0
    mismatches = []
    for variant, tsc in zip(variants, _transpile(variants), strict=True):
        if tsc["diagnostics"] or _TSC_COMMENT_AFTER_RETURN.search(tsc["js"]):
            continue
        try:
            ours = compile_ts(variant).javascript
        except CompileFailure:
            continue  # refused with a location: loud, never a silent change of meaning
        try:
            expected = _outcome(tsc["js"].replace("export {};", "").rstrip().rstrip(";"))
        except quickjs.JSException:
            continue
        compared += 1
        try:
            got = _outcome(ours)
        except quickjs.JSException as exc:
            got = ("syntax", str(exc).splitlines()[0])
        if got != expected:
            mismatches.append((variant, got, expected))
    assert not mismatches
    assert compared > len(variants) // 2
