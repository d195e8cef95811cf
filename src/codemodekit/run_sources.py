"""A ``CodeMode``'s sources: started side by side, joining the catalog late when they come
up after the start's grace, and what a run waits for when it names one still connecting.

The catalog is swapped whole whenever a source joins or refreshes, so a reader always sees
one consistent revision. A source that fails to start leaves the catalog without its tools
and says why in ``health`` (ADR 0032).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import Any

from codemodekit.catalog.catalog import Catalog
from codemodekit.errors import SecretUnavailable, SourceUnavailable, new_correlation_id
from codemodekit.providers.base import Discovery, HealthStatus, SourceHealth, ToolProvider

log = logging.getLogger("codemodekit")

START_TIMEOUT_S = 60.0
"""Upper bound on connecting one source; a source still not up is reported unavailable."""


class RunSources:
    """The providers of one ``CodeMode``, the catalog they make, and why one is missing."""

    def __init__(self, providers: Mapping[str, ToolProvider]) -> None:
        self.providers = dict(providers)
        self.catalog = Catalog((), sources=list(self.providers))
        self.described: dict[str, str] = {}
        """Each source's own one-line description, from its last discovery."""
        self._start_errors: dict[str, str] = {}
        self._joining: dict[str, asyncio.Task[Discovery | None]] = {}
        self._open = False
        """Started and not closed: only then does a late or refreshed source change the
        catalog."""

    async def start(self, grace_s: float | None) -> None:
        """Start every source concurrently and build the first catalog from those up within
        ``grace_s`` (``None``: all of them, each bounded by ``START_TIMEOUT_S``); the rest
        join the catalog when they come up."""
        self._open = True
        names = list(self.providers)
        tasks = {
            n: asyncio.create_task(self._start_one(n), name=f"codemode-start-{n}") for n in names
        }
        if tasks:
            try:
                await asyncio.wait(tasks.values(), timeout=grace_s)
            except BaseException:
                for task in tasks.values():
                    task.cancel()
                raise
        discoveries = {}
        for name, task in tasks.items():
            if not task.done():
                self._joining[name] = task
                task.add_done_callback(self._joined(name))
            elif (discovery := task.result()) is not None:
                discoveries[name] = discovery
                self.described[name] = discovery.description
        self.catalog = Catalog.build(discoveries, sources=names)

    def _joined(self, name: str) -> Callable[[asyncio.Task[Discovery | None]], None]:
        def done(task: asyncio.Task[Discovery | None]) -> None:
            self._joining.pop(name, None)
            if task.cancelled() or not self._open:
                return
            discovery = task.result()
            if discovery is not None:
                self.described[name] = discovery.description
                self.catalog = self.catalog.with_source(name, discovery)
                log.info("source %r came up after start; revision %s", name, self.catalog.revision)

        return done

    async def _start_one(self, name: str) -> Discovery | None:
        provider = self.providers[name]
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                return await provider.start(self._listener(name))
        except (SourceUnavailable, SecretUnavailable) as exc:
            self._start_errors[name] = str(exc)
            log.warning("source %r is unavailable: %s", name, exc)
        except TimeoutError:
            self._start_errors[name] = f"did not come up within {START_TIMEOUT_S:.0f} s"
            log.warning("source %r did not start in time", name)
        except Exception:
            correlation_id = new_correlation_id()
            self._start_errors[name] = f"failed to start (correlation id {correlation_id})"
            log.exception("source %r failed to start (correlation %s)", name, correlation_id)
        return None

    def _listener(self, name: str) -> Callable[[Discovery], None]:
        def on_change(discovery: Discovery) -> None:
            if not self._open:
                return
            self._start_errors.pop(name, None)
            self.described[name] = discovery.description
            # Swap the whole catalog: readers always see one consistent revision.
            self.catalog = self.catalog.with_source(name, discovery)
            log.info("source %r refreshed; catalog revision %s", name, self.catalog.revision)

        return on_change

    async def aclose(self) -> None:
        """Stop the sources still connecting, then close every source."""
        self._open = False
        for joining in list(self._joining.values()):
            joining.cancel()
        results = await asyncio.gather(
            *(p.aclose() for p in self.providers.values()), return_exceptions=True
        )
        for name, result in zip(self.providers, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("closing source %r failed: %r", name, result)

    @property
    def connecting(self) -> tuple[str, ...]:
        """The sources still connecting after the start's grace, in the order they started."""
        return tuple(self._joining)

    def health(self) -> tuple[SourceHealth, ...]:
        out = []
        for name, provider in self.providers.items():
            health = provider.health()
            error = self._start_errors.get(name)
            if error and health.status in (HealthStatus.OK, HealthStatus.CONNECTING):
                health = replace(health, status=HealthStatus.UNAVAILABLE, message=error, tools=0)
            elif error and not health.message:
                health = replace(health, message=error)
            out.append(health)
        return tuple(out)

    async def wait_for(
        self, names: Collection[str] | None, deadline: float, cancel: asyncio.Event | None
    ) -> str | None:
        """Wait until the sources ``names`` (every one still connecting: ``None``) have come
        up or failed. ``None`` once they settled; else what was still awaited when the loop's
        clock reached ``deadline`` (``""``: ``cancel`` was set)."""
        waiting = {
            name: task for name, task in self._joining.items() if names is None or name in names
        }
        if not waiting:
            return None
        loop = asyncio.get_running_loop()
        stop = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
        pending: set[asyncio.Future[Any]] = set(waiting.values())
        try:
            while pending and loop.time() < deadline:
                done, _ = await asyncio.wait(
                    pending | ({stop} if stop is not None else set()),
                    timeout=deadline - loop.time(),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not done or stop in done:
                    break
                pending -= done
        finally:
            if stop is not None:
                stop.cancel()
        if cancel is not None and cancel.is_set():
            return ""
        late = [name for name, task in waiting.items() if not task.done()]
        if late:
            return "source " + ", ".join(repr(name) for name in late)
        return None

    async def wait_all(self) -> None:
        """Wait until every source still connecting has come up or failed."""
        joining = list(self._joining.values())
        if joining:
            await asyncio.wait(joining)
