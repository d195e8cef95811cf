"""Validators compiled on first use, shared by schema and bounded.

The catalog proves at build that a schema compiles (``surely_compiles``) and compiles it
only when a tool is first called. Compiled validators are kept here, keyed by the
normalized schema text (which starts with its ``$schema``): identical schemas of different
tools, sources and catalog revisions share one validator, and a refresh that leaves a
schema unchanged compiles nothing. The text is the key rather than a digest of it: equal
keys then mean equal schemas, with no collision to reason about, and Python caches a
string's hash, so a call's lookup costs no hashing of the schema.

Least recently used entries are dropped beyond ``MAX_VALIDATORS``; a dropped validator
is compiled again on its next use (tens of microseconds). A failure is cached too, so a
schema the compiler refuses is not recompiled on every call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import OrderedDict

from codemodekit.schema.normalize import PreparedSchema, SchemaUnsupported
from codemodekit.schema.validate import Validator, compile_validator

log = logging.getLogger("codemodekit.schema")

MAX_VALIDATORS = 1024
"""Compiled validators kept at most. One costs ~26 KiB for a typical 1.4 KB tool schema
(measured), so ~26 MiB at most; recompiling an evicted one takes ~0.1 ms."""

_INTERNAL = "its schema could not be compiled (internal error; see the host log)"


class ValidatorCache:
    """A bounded, thread-safe map from normalized schema text to its compiled validator."""

    def __init__(self, limit: int = MAX_VALIDATORS) -> None:
        self._limit = max(1, limit)
        self._entries: OrderedDict[str, Validator | str] = OrderedDict()
        self._lock = threading.Lock()
        self.compiled = 0
        """How many compilations this cache ran (hits do not count)."""

    def get(self, text: str, dialect: str) -> Validator:
        """The validator of the normalized schema ``text``; ``SchemaUnsupported`` if the
        compiler refuses it (cached as well)."""
        with self._lock:
            entry = self._entries.get(text)
            if entry is not None:
                self._entries.move_to_end(text)
        if entry is None:
            # Compiled outside the lock: two threads may both compile a new schema once.
            entry = self._compile(text, dialect)
            with self._lock:
                self.compiled += 1
                self._entries[text] = entry
                self._entries.move_to_end(text)
                while len(self._entries) > self._limit:
                    self._entries.popitem(last=False)
        if isinstance(entry, str):  # the reason, raised afresh (a kept exception's traceback grows)
            raise SchemaUnsupported(entry)
        return entry

    def put(self, text: str, validator: Validator) -> None:
        """Keep a validator compiled elsewhere (at build, when it was not proven)."""
        with self._lock:
            self._entries[text] = validator
            self._entries.move_to_end(text)
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)

    def has(self, text: str) -> bool:
        """Whether a compiled validator (not a failure) of ``text`` is kept."""
        return isinstance(self._entries.get(text), Validator)

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _compile(text: str, dialect: str) -> Validator | str:
        try:
            return compile_validator(PreparedSchema(json.loads(text), text, dialect))
        except SchemaUnsupported as exc:
            return exc.reason
        except (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError):
            raise
        except BaseException:  # also a Rust panic, which is not an Exception
            log.exception("compiling a schema failed unexpectedly")
            return _INTERNAL


VALIDATORS = ValidatorCache()
"""The process-wide cache every catalog compiles into."""


__all__ = ["MAX_VALIDATORS", "VALIDATORS", "ValidatorCache"]
