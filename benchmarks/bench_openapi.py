"""OpenAPI provider at scale: GitHub's REST description (13 MB, 1,223 operations).

Run: python benchmarks/bench_openapi.py [--repeat N]
Prints medians of: document load + check, discovery (operations → tools), catalog build
(normalization + validator compilation) and artifact generation.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from codemodekit.catalog.catalog import Catalog
from codemodekit.codegen.artifacts import generate
from codemodekit.limits import Limits
from codemodekit.providers.openapi.document import load_document
from codemodekit.providers.openapi.operations import build, source_base_url
from codemodekit.providers.openapi.provider import OpenApiToolProvider
from codemodekit.spec.model import OpenApiSource, SecretTemplate

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "tests/js/node_modules/@octokit/openapi/generated/api.github.com.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not DOCUMENT.exists():
        raise SystemExit(f"{DOCUMENT} is missing: run `npm install --prefix tests/js`")
    timings: dict[str, list[float]] = {
        "load": [],
        "discovery": [],
        "start": [],
        "catalog": [],
        "generate": [],
    }
    tools = skipped = 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        document = load_document(DOCUMENT)
        t1 = time.perf_counter()
        base = source_base_url(document, None, "github")
        built = build(
            document,
            source="github",
            base_url=base,
            base_url_overridden=False,
        )
        t2 = time.perf_counter()
        config = OpenApiSource(
            name="github", document=DOCUMENT, auth={"bearer": SecretTemplate("x", key="bearer")}
        )
        provider = OpenApiToolProvider(config, limits=Limits(), environ={})
        t3 = time.perf_counter()
        discovery = asyncio.run(_start(provider))
        t4 = time.perf_counter()
        catalog = Catalog.build({"github": discovery})
        t5 = time.perf_counter()
        generate(catalog, name="github")
        t6 = time.perf_counter()
        timings["load"].append(t1 - t0)
        timings["discovery"].append(t2 - t1)
        timings["start"].append(t4 - t3)
        timings["catalog"].append(t5 - t4)
        timings["generate"].append(t6 - t5)
        tools, skipped = len(built.discovery.tools), len(built.discovery.skipped)
    print(
        f"document: {DOCUMENT.name} ({DOCUMENT.stat().st_size / 1e6:.1f} MB), "
        f"{tools} tools, {skipped} skipped, {args.repeat} runs"
    )
    for name, values in timings.items():
        print(
            f"  {name:<10} median {statistics.median(values) * 1000:8.1f} ms   "
            f"min {min(values) * 1000:8.1f} ms"
        )
    print(
        "  (start = load + discovery through the provider's start(); catalog = normalize + "
        "compile validators)"
    )


async def _start(provider: OpenApiToolProvider):  # type: ignore[no-untyped-def]
    try:
        return await provider.start(lambda _d: None)
    finally:
        await provider.aclose()


if __name__ == "__main__":
    main()
