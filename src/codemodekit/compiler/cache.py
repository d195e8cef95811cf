"""Compiled programs by their exact TypeScript source (ADR 0028, ADR 0044).

Compiling is a function of the source alone, so a source seen before need not be parsed
again: process mode fills this from a worker's ``J`` frame (the worker compiled it before
any model code ran in it), inline mode from its own compiler. The source-size limit is
checked before a lookup, as it is before a compile. Least recently used out, bounded in
bytes; thread-safe.
"""

from __future__ import annotations

import collections
import threading

PROGRAM_CACHE_BYTES = 16 * 1024 * 1024
"""Most compiled JavaScript (and its sources) a cache keeps."""


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
