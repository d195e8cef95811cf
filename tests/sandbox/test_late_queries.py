"""The zygote compiles the compiler's rarer queries after it is ready (while no worker is
wanted, and all of them once it forked its first worker), so a fresh process's first run
does not wait for them. A worker forked before then compiles the ones its source needs
itself, inside its lockdown: that must work, and give the program a warm zygote gives.

A fresh interpreter stands for such a worker: it compiles only the core query, as
``_warm_up`` does, locks itself down exactly as a worker does (``_lockdown``: the zygote's
layers, then the worker's filter and limits), then compiles sources that need every group.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from codemodekit.compiler.compile import CodeCompiler

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="worker processes are Linux-only")

#: One source per lazy group of ``compiler/query.py`` (class members, an asserted callee,
#: parameter properties, a dynamic import's refusal, a generic tag before a template).
SOURCES = [
    "class A { readonly x?: number = 1; m(): number { return 2; } }\nreturn new A().m();",
    "const f = (() => 3) as () => number;\nreturn (f as () => number)();",
    "class B { constructor(public y: number) {} }\nreturn new B(4).y;",
    "const m = await import('x');\nreturn m;",
    "const t = 1;\nreturn `a${t}`;",
]

CHILD = textwrap.dedent(
    """
    import json, sys
    from codemodekit.compiler.compile import CodeCompiler
    from codemodekit.compiler.query import compile_core_query, compile_next_group
    from codemodekit.errors import CompileFailure
    from codemodekit.sandbox import _lockdown

    compiler = CodeCompiler()
    compile_core_query()
    compiler.compile("const x: number = 1;\\nreturn x;", max_source_bytes=1024)
    layers = _lockdown.prepare_zygote("not requested")
    _lockdown.lock_down_worker(layers)
    _lockdown.limit_worker(layers)
    out = []
    for source in json.loads(sys.argv[1]):
        try:
            out.append(["ok", compiler.compile(source, max_source_bytes=65536).javascript])
        except CompileFailure as failure:
            out.append(["refused", failure.diagnostic.message])
    # Every group was compiled here, by the source that needed it.
    left = compile_next_group()
    print(json.dumps({"seccomp": layers.report()["seccomp"], "results": out, "left": left}))
    """
)


def _expected(source: str) -> list[str]:
    from codemodekit.errors import CompileFailure

    try:
        return ["ok", CodeCompiler().compile(source, max_source_bytes=65536).javascript]
    except CompileFailure as failure:
        return ["refused", failure.diagnostic.message]


def test_a_worker_forked_before_the_rarer_queries_compiles_them_inside_its_lockdown() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", CHILD, json.dumps(SOURCES)],
        capture_output=True,
        text=True,
        timeout=120,
        env={},
        cwd="/",
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["seccomp"] == "on"  # the worker's filter was in force
    assert report["left"] is False
    assert report["results"] == [_expected(source) for source in SOURCES]
    assert report["results"][3][0] == "refused"  # the dynamic import group matched
