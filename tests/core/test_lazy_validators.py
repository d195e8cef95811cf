"""Validators are compiled on a tool's first call, shared by schema, bounded (ADR 0026)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from codemodekit import ErrorCode
from codemodekit.catalog.catalog import Catalog
from codemodekit.providers.base import Discovery, ToolSpec
from codemodekit.schema import SchemaUnsupported
from codemodekit.schema.cache import VALIDATORS, ValidatorCache
from codemodekit.schema.normalize import prepare_schema
from tests.core.helpers import code_mode, const, source, tool


def _unique_schema() -> dict[str, Any]:
    # A schema no other test compiled: the process-wide cache cannot have it yet.
    return {
        "type": "object",
        "properties": {"n": {"type": "integer", "description": uuid.uuid4().hex}},
        "required": ["n"],
    }


def test_a_build_compiles_nothing_and_the_first_use_compiles_once() -> None:
    schema = _unique_schema()
    text = prepare_schema(schema).text
    discovery = Discovery(tools=(ToolSpec("t", input_schema=schema),))
    catalog = Catalog.build({"a": discovery, "b": discovery})
    assert not VALIDATORS.has(text)
    first = catalog.validators("a", "t")
    assert VALIDATORS.has(text)
    again = catalog.validators("b", "t")  # same schema, another source: same validator
    assert first is not None and again is not None and first[0] is again[0]
    rebuilt = Catalog.build({"a": discovery, "c": discovery})  # another revision
    same = rebuilt.validators("c", "t")
    assert rebuilt.revision != catalog.revision
    assert same is not None and same[0] is first[0]
    assert first[0].first_error({"n": 1}) is None
    issue = first[0].first_error({"n": "1"})
    assert issue is not None and issue.path == "$.n"


def test_the_cache_is_bounded_and_keeps_the_most_recently_used() -> None:
    cache = ValidatorCache(limit=2)
    texts = [prepare_schema(_unique_schema()) for _ in range(3)]
    first = cache.get(texts[0].text, texts[0].dialect)
    cache.get(texts[1].text, texts[1].dialect)
    assert cache.get(texts[0].text, texts[0].dialect) is first  # now most recent
    cache.get(texts[2].text, texts[2].dialect)  # drops texts[1]
    assert len(cache) == 2 and cache.compiled == 3
    assert cache.has(texts[0].text) and not cache.has(texts[1].text)
    cache.get(texts[1].text, texts[1].dialect)
    assert cache.compiled == 4


def test_a_refused_schema_is_compiled_once_and_refused_every_time() -> None:
    cache = ValidatorCache()
    bad = prepare_schema({"type": "object", "properties": {"x": {"pattern": "(?<"}}})
    for _ in range(3):
        with pytest.raises(SchemaUnsupported, match="regex"):
            cache.get(bad.text, bad.dialect)
    assert cache.compiled == 1 and not cache.has(bad.text)


async def test_a_compile_failure_at_first_use_fails_that_call_not_the_run(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The build-time proof is wrong on purpose here (it never is on the corpora:
    # tests/schema/test_enforce.py): the compiler refuses at the first call instead.
    monkeypatch.setattr("codemodekit.catalog.catalog.surely_compiles", lambda _prepared: True)
    broken = {"type": "object", "properties": {"x": {"type": "string", "pattern": "(?<"}}}
    src = source("app", tool("broken", const(1), broken), tool("fine", const(2)))
    async with code_mode(src) as cm:
        assert [t.name for t in cm.catalog.quarantined] == []
        with caplog.at_level(logging.ERROR, logger="codemodekit"):
            failed = await cm.run("await tools.app.broken({});")
            again = await cm.run("await tools.app.broken({x: 'a'});")
        survived = await cm.run(
            "let caught = '';"
            "try { await tools.app.broken({}); } catch (e) { caught = e.code; }"
            "return [caught, (await tools.app.fine({})).structuredContent];"
        )
    for result in (failed, again):
        assert result.diagnostic is not None
        assert result.diagnostic.code == ErrorCode.TOOL_SCHEMA_UNSUPPORTED
        assert result.diagnostic.message.startswith("tools.app.broken cannot be called: ")
        assert "regex" in result.diagnostic.message
    assert survived.value == ["TOOL_SCHEMA_UNSUPPORTED", 2]
    assert "did not compile at first use" in caplog.text
