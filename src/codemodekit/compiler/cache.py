"""Compiled programs by their exact TypeScript source (ADR 0028, ADR 0044).

Compiling is a function of the source alone, so a source seen before need not be parsed
again: process mode fills a ``ProgramCache`` from a worker's ``J`` frame (the worker
compiled it before any model code ran in it), inline mode through ``compile_once`` with its
own compiler. The source-size limit is checked before a lookup, as it is before a compile.
Least recently used out, bounded in bytes; thread-safe.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from codemodekit.compiler.size import check_source_size
from codemodekit.sandbox.base import CompiledProgram

if TYPE_CHECKING:  # the parser is imported only where this side compiles
    from codemodekit.compiler.compile import CodeCompiler

PROGRAM_CACHE_BYTES = 16 * 1024 * 1024
"""Most compiled JavaScript (and its sources) a cache keeps."""
INLINE_COMPILE_CHARS = 8_192
"""Sources up to this size compile on the event loop; larger ones on a worker thread."""


class ProgramCache:
    """``source`` → ``(javascript, line_offset)``."""

    def __init__(self, max_bytes: int = PROGRAM_CACHE_BYTES) -> None:
        self._max = max_bytes
        self._size = 0
        self._entries: collections.OrderedDict[str, tuple[str, int]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, source: str) -> tuple[str, int] | None:
        with self._lock:
            entry = self._entries.get(source)
            if entry is not None:
                self._entries.move_to_end(source)
            return entry

    def put(self, source: str, program: tuple[str, int]) -> None:
        size = len(source) + len(program[0])
        if size > self._max // 4:
            return
        with self._lock:
            old = self._entries.pop(source, None)
            if old is not None:
                self._size -= len(source) + len(old[0])
            self._entries[source] = program
            self._size += size
            while self._size > self._max:
                gone, (javascript, _) = self._entries.popitem(last=False)
                self._size -= len(gone) + len(javascript)


async def compile_once(
    cache: ProgramCache,
    compiler: Callable[[], CodeCompiler],
    source: str,
    max_source_bytes: int,
) -> CompiledProgram:
    """The program of ``source``, compiled on this side unless ``cache`` has it. Small
    snippets compile in well under a millisecond; a large or adversarial source (bounded
    by the parse budget) compiles off the event loop so other runs keep going. A source
    that fails to compile is not kept."""
    cached = cache.get(source)
    if cached is not None:
        check_source_size(source, max_source_bytes)
        return CompiledProgram(cached[0], cached[1], source)
    if len(source) <= INLINE_COMPILE_CHARS:
        program = compiler().compile(source, max_source_bytes=max_source_bytes)
    else:
        program = await asyncio.to_thread(
            compiler().compile, source, max_source_bytes=max_source_bytes
        )
    cache.put(source, (program.javascript, program.line_offset))
    return program
