"""Generation speed, and a side-by-side with json-schema-to-typescript on the same schemas.

    python benchmarks/bench_codegen.py

1. ``generate()`` on a synthetic catalog of 1,000 tools (nested objects, enums, arrays,
   ``$ref`` definitions, unions): median wall time of every artifact.
2. ``generate()`` on GitHub's REST description (@octokit/openapi, ~1,200 operations)
   through the OpenAPI provider, when the npm corpus is installed.
3. The same 1,000 input schemas projected one by one with ``tool_typescript`` and with the
   npm ``json-schema-to-typescript`` ``compile()`` (in one Node process, timed inside it,
   with and without its Prettier formatting), plus one output sample of each.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._util import row  # noqa: E402
from codemodekit.catalog.catalog import Catalog  # noqa: E402
from codemodekit.codegen import generate, tool_typescript  # noqa: E402
from codemodekit.providers.base import Discovery, ToolSpec  # noqa: E402

NODE_MODULES = ROOT / "tests" / "js" / "node_modules"

_JSON2TS = r"""
const { compile } = require(process.argv[2]);
const schemas = JSON.parse(require("fs").readFileSync(0, "utf8"));
(async () => {
  const out = {};
  for (const format of [false, true]) {
    const started = process.hrtime.bigint();
    let sample = "";
    for (let i = 0; i < schemas.length; i++) {
      const ts = await compile(schemas[i], "Input" + i, { bannerComment: "", format });
      if (i === 0) sample = ts;
    }
    out[format ? "formatted" : "unformatted"] = {
      ms: Number(process.hrtime.bigint() - started) / 1e6, sample,
    };
  }
  process.stdout.write(JSON.stringify(out));
})();
"""


def _schema(rng: random.Random, i: int) -> dict[str, Any]:
    props: dict[str, Any] = {
        "id": {"type": "string", "description": "Identifier.", "pattern": "^[a-z0-9-]+$"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
        "state": {"enum": ["open", "closed", "all"]},
        "labels": {"type": "array", "items": {"$ref": "#/$defs/Label"}},
        "filter": {
            "type": "object",
            "properties": {
                "since": {"type": "string", "format": "date-time"},
                "author": {"type": ["string", "null"]},
            },
        },
        "target": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"user": {"type": "string"}},
                    "required": ["user"],
                },
                {
                    "type": "object",
                    "properties": {"team": {"type": "string"}},
                    "required": ["team"],
                },
            ]
        },
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    }
    for k in range(rng.randint(0, 6)):
        props[f"extra_{k}"] = rng.choice(
            [
                {"type": "string"},
                {"type": "number"},
                {"type": "boolean"},
                {"type": "array", "items": {"type": "string"}},
            ]
        )
    return {
        "type": "object",
        "description": f"Arguments of operation {i}.",
        "properties": props,
        "required": ["id"],
        "additionalProperties": False,
        "$defs": {
            "Label": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "color": {"type": "string"}},
                "required": ["name"],
            }
        },
    }


def synthetic_catalog(n: int = 1000) -> Catalog:
    rng = random.Random(7)
    nouns = [
        "issues",
        "pulls",
        "repos",
        "users",
        "teams",
        "orgs",
        "checks",
        "actions",
        "gists",
        "apps",
    ]
    tools = tuple(
        ToolSpec(
            name=f"{nouns[i % len(nouns)]}_op_{i}",
            description=f"Operation {i} on {nouns[i % len(nouns)]}.",
            input_schema=_schema(rng, i),
            output_schema={
                "type": "object",
                "properties": {"ok": {"type": "boolean"}, "count": {"type": "integer"}},
            },
        )
        for i in range(n)
    )
    return Catalog.build(
        {"api": Discovery(tools=tools[: n // 2]), "other": Discovery(tools=tools[n // 2 :])}
    )


def _median_s(fn: Any, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _github_catalog() -> Catalog | None:
    document = NODE_MODULES / "@octokit" / "openapi" / "generated" / "api.github.com.json"
    if not document.exists():
        return None
    from codemodekit.providers.factory import providers_from_spec
    from codemodekit.spec import parse_spec

    spec = parse_spec(
        'version = 1\nname = "gh"\n[policy]\ndefault = "deny"\n'
        f'[sources.github]\ntype = "openapi"\ndocument = {json.dumps(str(document))}\n'
    )

    async def discover() -> Discovery:
        (provider,) = providers_from_spec(spec)
        try:
            return await provider.start(lambda _d: None)
        finally:
            await provider.aclose()

    return Catalog.build({"github": asyncio.run(discover())})


def main() -> None:
    catalog = synthetic_catalog()
    files = generate(catalog, name="bench")
    size = sum(len(t) for t in files.values())
    seconds = _median_s(lambda: generate(catalog, name="bench"), 5)
    print("generate(): every artifact")
    row(
        "1,000 synthetic tools (2 sources, shards)",
        seconds * 1000,
        "ms",
        f"{len(files)} files, {size / 1e6:.2f} MB",
    )
    github = _github_catalog()
    if github is not None:
        gh_files = generate(github, name="gh")
        gh_seconds = _median_s(lambda: generate(github, name="gh"), 3)
        row(
            f"GitHub REST via OpenAPI provider ({len(github.available_tools)} tools)",
            gh_seconds * 1000,
            "ms",
            f"{len(gh_files)} files, {sum(len(t) for t in gh_files.values()) / 1e6:.2f} MB",
        )

    tools = catalog.available_tools
    ours = _median_s(lambda: [tool_typescript(t) for t in tools], 5)
    print("\nper-schema projection of the same 1,000 input schemas")
    row("codemodekit tool_typescript (input + output + signature)", ours * 1000, "ms")
    node = shutil.which("node")
    package = NODE_MODULES / "json-schema-to-typescript"
    if node is None or not package.exists():
        print("  json-schema-to-typescript: not installed (npm install --prefix tests/js)")
        return
    schemas = [json.loads(json.dumps(dict(t.input_schema), default=_plain)) for t in tools]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "json2ts.cjs"
        script.write_text(_JSON2TS)
        started = time.perf_counter()
        done = subprocess.run(
            [node, str(script), str(package)],
            input=json.dumps(schemas),
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - started
    result = json.loads(done.stdout)
    row(
        "json-schema-to-typescript compile(), format: false",
        result["unformatted"]["ms"],
        "ms",
        "timed in Node",
    )
    row(
        "json-schema-to-typescript compile(), format: true (default)",
        result["formatted"]["ms"],
        "ms",
        "timed in Node",
    )
    row(
        "  ratio json2ts (unformatted) / codemodekit",
        result["unformatted"]["ms"] / (ours * 1000),
        "x",
    )
    row("  node process wall time, both runs", wall * 1000, "ms")
    print("\nsample, tool 0 — codemodekit:\n")
    print(tool_typescript(tools[0]))
    print("sample, tool 0 input — json-schema-to-typescript (formatted):\n")
    print(result["formatted"]["sample"])


def _plain(value: Any) -> Any:
    from codemodekit.catalog.catalog import thaw

    return thaw(value)


if __name__ == "__main__":
    main()
