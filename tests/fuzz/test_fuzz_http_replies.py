"""Property-based family for MCP replies read over HTTP (``mcp_http_bound``): a stream of
server-sent events, with any mix of line endings and cut into chunks at random, reaches
httpx2's own event parser exactly as it was sent when every event is within the bound;
an event over the bound never reaches it (an error for its request, or nothing), and the
parser never sees more than the bound.

Run a longer budget with ``HYPOTHESIS_PROFILE=long``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import AsyncIterator

import httpx2
from hypothesis import given, settings
from hypothesis import strategies as st

from codemodekit.providers.mcp.http_bound import bound_replies
from codemodekit.providers.mcp.stdio import REPLY_TOO_LARGE

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("long", max_examples=5_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])
_TEXT = st.text(st.characters(blacklist_characters='\r\n"', blacklist_categories=("Cs",)))


@st.composite
def _events(draw: st.DrawFn) -> list[list[bytes]]:
    """Events of fields in any order; the data is one JSON-RPC message or plain text (a
    garbled message naming an id is answered with an error for that id, by design)."""
    events = []
    for _ in range(draw(st.integers(1, 6))):
        lines = []
        as_json = draw(st.booleans())
        if as_json:
            message = {"jsonrpc": "2.0", "id": draw(st.integers(0, 99)), "result": {}}
            message["result"] = {"text": draw(_TEXT)}
            lines.append(b"data: " + json.dumps(message).encode())
        for _ in range(draw(st.integers(0 if as_json else 1, 3))):
            kind = draw(st.sampled_from(["data", "id", "event", "comment", "retry"]))
            if kind == "data" and as_json:
                continue
            if kind == "comment":
                lines.append(b":" + draw(_TEXT).encode())
            elif kind == "event":
                lines.append(b"event: message")
            else:
                lines.append(kind.encode() + b": " + draw(_TEXT).encode())
        events.append(draw(st.permutations(lines)))
    return events


def _wire(events: list[list[bytes]], endings: list[bytes]) -> bytes:
    out = bytearray()
    previous = b""
    for index, lines in enumerate(events):
        for line in [*lines, b""]:
            ending = endings[(index + len(out)) % len(endings)]
            if previous == b"\r" and not line:
                ending = b"\r"  # "\r" then "\n" would be one CRLF: the empty line would vanish
            out += line + ending
            previous = ending
    return bytes(out)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


class _Stream(httpx2.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


async def _parse(
    chunks: list[bytes], limit: int | None, max_event: int | None = None
) -> list[httpx2.ServerSentEvent]:
    request = httpx2.Request("GET", "http://127.0.0.1:1/mcp")
    response = httpx2.Response(
        200,
        headers={"content-type": "text/event-stream"},
        stream=_Stream(chunks),
        request=request,
    )
    if limit is not None:
        hook = bound_replies(limit, on_large=lambda _n: None, on_set_aside=lambda _a, _b: None)
        await hook(response)
    return [sse async for sse in httpx2.EventSource(response, max_event_size=max_event)]


def _key(events: list[httpx2.ServerSentEvent]) -> list[tuple[str, str, str, int | None]]:
    return [(e.event, e.data, e.id, e.retry) for e in events]


@given(_events(), st.lists(_ENDINGS, min_size=1, max_size=3), st.lists(st.integers(0, 10_000)))
def test_events_within_the_bound_pass_unchanged(
    events: list[list[bytes]], endings: list[bytes], cuts: list[int]
) -> None:
    chunks = _chunks(_wire(events, endings), cuts)
    plain = asyncio.run(_parse(chunks, None))
    bounded = asyncio.run(_parse(chunks, 1 << 20))
    assert _key(bounded) == _key(plain)


@given(
    st.lists(st.integers(0, 2_000), min_size=1, max_size=6),
    st.lists(_ENDINGS, min_size=1, max_size=3),
    st.lists(st.integers(0, 20_000)),
)
def test_events_over_the_bound_never_reach_the_parser(
    sizes: list[int], endings: list[bytes], cuts: list[int]
) -> None:
    limit = 600
    events = []
    for index, size in enumerate(sizes):
        message = {"jsonrpc": "2.0", "id": index, "result": {"text": "x" * size}}
        events.append([b"event: message", b"data: " + json.dumps(message).encode()])
    chunks = _chunks(_wire(events, endings), cuts)
    # The parser's own bound would raise (failing the whole stream) if a big event got by.
    seen = asyncio.run(_parse(chunks, limit, max_event=limit))
    assert len(seen) == len(sizes)
    for index, (size, sse) in enumerate(zip(sizes, seen, strict=True)):
        message = json.loads(sse.data)
        assert message["id"] == index
        if size + 100 < limit:  # the event's other bytes: its fields and the envelope
            assert message["result"]["text"] == "x" * size
        elif size > limit:
            assert message["error"]["code"] == REPLY_TOO_LARGE
