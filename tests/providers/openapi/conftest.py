"""Fixtures: a recording HTTP server on 127.0.0.1 and providers built from fixture files."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import pytest

from codemodekit.limits import Limits
from codemodekit.providers.base import CallContext, Discovery
from codemodekit.providers.openapi import OpenApiToolProvider
from codemodekit.spec.model import OpenApiSource, SecretTemplate
from tests.providers.openapi.server import RecordingApp, ServerThread

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(RecordingApp()) as running:
        yield running


def make_provider(
    document: str | Path,
    *,
    base_url: str | None = None,
    auth: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    name: str = "api",
) -> OpenApiToolProvider:
    path = document if isinstance(document, Path) else FIXTURES / document
    config = OpenApiSource(
        name=name,
        document=path,
        base_url=base_url,
        auth={
            k: SecretTemplate(v, key=f"sources.{name}.auth.{k}") for k, v in (auth or {}).items()
        },
        include=include,
        exclude=exclude,
    )
    return OpenApiToolProvider(config, limits=Limits(), environ=environ or {})


def context(max_result_bytes: int = 1 << 20, timeout_s: float = 10.0) -> CallContext:
    return CallContext(
        execution_id="test", call_id=1, timeout_s=timeout_s, max_result_bytes=max_result_bytes
    )


async def started(provider: OpenApiToolProvider) -> Discovery:
    return await provider.start(lambda _d: None)


@pytest.fixture
async def wire(server: ServerThread) -> AsyncIterator[OpenApiToolProvider]:
    provider = make_provider("wire.yaml", base_url=server.url + "/api")
    await started(provider)
    yield provider
    await provider.aclose()
