"""Loading a large YAML OpenAPI document: libyaml (C) against the pure-Python parser.

Both go through ``yaml_load.load_yaml`` (alias budget, depth bound, deadline checks), so
the ratio is what a user gets from PyYAML being built with libyaml.
Run: ``python -m benchmarks.bench_yaml_load``.
"""

from __future__ import annotations

import yaml

from benchmarks._util import median_ms, row
from codemodekit.providers.openapi import yaml_load


def _document(operations: int) -> str:
    paths = {
        f"/items{i}/{{id}}": {
            "get": {
                "operationId": f"get{i}",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "a": {"type": "string"},
                                        "b": {"type": "integer"},
                                    },
                                }
                            }
                        },
                    }
                },
            }
        }
        for i in range(operations)
    }
    return yaml.safe_dump(
        {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths}
    )


def main() -> None:
    text = _document(500)
    print(f"document: {len(text) / 1e6:.2f} MB of YAML")
    python_ms = median_ms(lambda: yaml_load.load_yaml(text, use_c=False), repeat=5, warmup=1)
    row("pure-Python loader", python_ms, "ms")
    if yaml_load.C_LOADER is None:
        print("  PyYAML has no libyaml here: the C loader is unavailable")
        return
    c_ms = median_ms(lambda: yaml_load.load_yaml(text, use_c=True), repeat=5, warmup=1)
    row("C loader (CSafeLoader)", c_ms, "ms", f"{python_ms / c_ms:.1f}x faster")


if __name__ == "__main__":
    main()
