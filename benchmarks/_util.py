"""Timing helpers shared by the benchmark scripts: medians of repeated measurements."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable


def median_ms(fn: Callable[[], object], *, repeat: int = 200, warmup: int = 20) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


async def amedian_ms(
    fn: Callable[[], Awaitable[object]], *, repeat: int = 200, warmup: int = 20
) -> float:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def row(label: str, value: float, unit: str, note: str = "") -> None:
    print(f"  {label:<58} {value:>10.3f} {unit:<6} {note}")
