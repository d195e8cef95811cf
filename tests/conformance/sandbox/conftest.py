"""The adapters the sandbox conformance suite runs against."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from codemodekit.sandbox.base import CodeSandbox
from codemodekit.sandbox.process import ProcessSandbox
from codemodekit.sandbox.quickjs import QuickJsSandbox

SANDBOXES: dict[str, Callable[[], CodeSandbox]] = {
    "quickjs-thread": lambda: QuickJsSandbox(offload="thread"),
    "quickjs-inline": lambda: QuickJsSandbox(offload="inline"),
    "process": ProcessSandbox,
}


@pytest.fixture(params=sorted(SANDBOXES))
def sandbox(request: pytest.FixtureRequest) -> CodeSandbox:
    return SANDBOXES[request.param]()
