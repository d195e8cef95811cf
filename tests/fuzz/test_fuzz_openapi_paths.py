"""Fuzzed family for OpenAPI path parameters: dot, slash, percent and Unicode-dot fragments
in any combination never change which path the upstream receives."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.providers.openapi.server import RecordingApp, ServerThread
from tests.providers.openapi.test_path_traversal import (
    _assert_templated,
    _code_mode,
)

_SEGMENT_PARTS = st.sampled_from(
    [
        *(".", "..", "%2e", "%2E", "%25", "%", "/", "\\", "?", "#", ";", "a", "0", " ", "~"),
        *("\uff0e", "\u2024", "\u3002", "\x00", "%2f", "%5c"),
    ]
)


@pytest.fixture(scope="module")
def upstream() -> Iterator[ServerThread]:
    with ServerThread(RecordingApp()) as running:
        yield running


_VALUES = st.lists(_SEGMENT_PARTS, max_size=6).map("".join) | st.text(max_size=8)


@settings(
    max_examples=8,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # values are printed; no slow shrink
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(values=st.lists(_VALUES, min_size=20, max_size=30))
async def test_fuzzed_values_never_change_the_path(
    values: list[str], tmp_path_factory: pytest.TempPathFactory, upstream: ServerThread
) -> None:
    """A fuzzed family: dot, slash, percent and Unicode-dot fragments in any combination."""
    async with _code_mode(tmp_path_factory.mktemp("fuzz"), upstream) as cm:
        before = len(upstream.app.requests)
        result = await cm.run(
            f"const values = {json.dumps(values)};\n"
            "const out = [];\n"
            "for (const v of values) {\n"
            "  try { await tools.api.deleteComment({postId: '42', commentId: v}); out.push(null); }\n"
            "  catch (e) { out.push(e.code); }\n"
            "}\n"
            "return out;"
        )
    assert result.ok, result.diagnostic
    received = iter(upstream.app.requests[before:])
    for value, code in zip(values, result.value, strict=True):
        raw = next(received).raw_path if code is None else None
        _assert_templated(raw, code, "/api/posts/42/comments/", value, "")
    assert next(received, None) is None
