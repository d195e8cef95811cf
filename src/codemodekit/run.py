"""``CodeMode``: the facade that compiles, runs and bridges one piece of model-written code.

Entering the context connects every source (each may fail alone) and builds the catalog;
``run`` never raises for expected failures and returns a ``RunResult``; leaving closes every
source and child process.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from codemodekit.bridge.bridge import ToolBridge
from codemodekit.bridge.policy import ToolPolicy, rules_policy
from codemodekit.catalog.catalog import Catalog
from codemodekit.compiler.cache import ProgramCache, compile_once
from codemodekit.compiler.size import check_source_size
from codemodekit.errors import (
    CompileFailure,
    Diagnostic,
    ErrorCode,
    new_correlation_id,
)
from codemodekit.limits import Limits
from codemodekit.nesting import NESTING_HINT, depth_exceeds
from codemodekit.observe import ObserverSet, RunObserver, RunStart
from codemodekit.overview import SourceOverview
from codemodekit.progress import ProgressCallback, ProgressEvent, RunProgress
from codemodekit.providers.base import (
    HealthStatus,
    SourceHealth,
    ToolProvider,
)
from codemodekit.run_result import RunResult
from codemodekit.run_sources import RunSources
from codemodekit.run_stop import RunStop, until_cancelled
from codemodekit.runtime import DEFAULT_RUNTIME, RuntimeOptions
from codemodekit.sandbox.base import (
    CodeSandbox,
    LogEntry,
    RuntimeStats,
    SandboxOutcome,
    SourceSandbox,
)

if TYPE_CHECKING:
    from codemodekit.compiler.compile import CodeCompiler
    from codemodekit.search.search import SearchResponse
    from codemodekit.spec.model import Spec

log = logging.getLogger("codemodekit")

NO_RETURN_HINT = (
    "the code called tools but has no `return` statement, so the result is null: "
    "return the value you need (`return await tools...`)"
)
LAST_EXPRESSION_HINT = (
    "the code has no `return` statement and ends in an expression, whose value is not "
    "returned (the code is the body of a function): write `return <expression>`"
)
_RETURN = re.compile(r"\breturn\b")

SERVE_START_GRACE_S = 0.0
"""How long ``codemode serve`` waits for sources before it answers ``initialize``: not at
all. A source still connecting (a slow ``npx`` download, a server that accepts but never
answers) stays ``connecting`` in ``health`` and joins the catalog when it comes up, and a run
that names it waits for it within its wall limit, so no upstream holds the MCP client's
``initialize`` hostage. One-shot uses (the library default, ``codemode run``) wait for every
source to settle instead."""


class _Default:
    """Marks an argument left at its default (where ``None`` is itself a choice)."""


_DEFAULT = _Default()

LogCallback = Callable[[LogEntry], object]
"""Takes one ``console.*`` entry of a run as it is written (``CodeMode.run(on_log=)``)."""


def _sandbox_for(runtime: RuntimeOptions) -> CodeSandbox:
    if runtime.mode == "inline":
        from codemodekit.sandbox.quickjs import QuickJsSandbox

        return QuickJsSandbox()
    from codemodekit.sandbox.process import ProcessSandbox

    return ProcessSandbox(runtime)


class CodeMode:
    """Compile, sandbox and bridge model-written TypeScript over a catalog of tools.

    ``policy`` is required: there is no implicit allow-all (use ``allow_all_tool_calls()``
    explicitly where every call may proceed).
    """

    def __init__(
        self,
        *,
        sources: Sequence[ToolProvider],
        policy: ToolPolicy,
        limits: Limits | None = None,
        name: str = "codemode",
        sandbox: CodeSandbox | None = None,
        compiler: CodeCompiler | None = None,
        spec: Spec | None = None,
        start_grace_s: float | None = None,
        observers: Sequence[RunObserver] = (),
        runtime: RuntimeOptions | None = None,
    ) -> None:
        if policy is None or not callable(policy):
            raise TypeError(
                "CodeMode needs a tool policy: pass policy=allow_all_tool_calls() explicitly, "
                "or a callable that returns 'allow' or 'deny'"
            )
        names = [p.name for p in sources]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"two sources share the name(s) {', '.join(duplicates)}")
        self.name = name
        self.limits = limits or Limits()
        self.policy = policy
        self.spec = spec
        self._sources = RunSources({p.name: p for p in sources})
        self.runtime = runtime or DEFAULT_RUNTIME
        # A sandbox passed in belongs to the caller (it may serve several CodeModes).
        self._owns_sandbox = sandbox is None
        self._sandbox = sandbox if sandbox is not None else _sandbox_for(self.runtime)
        # Checked once: isinstance against a runtime-checkable protocol costs ≈30 µs a run.
        self._source_sandbox: SourceSandbox | None = (
            self._sandbox if isinstance(self._sandbox, SourceSandbox) else None
        )
        # A sandbox that gets ready for a run as it starts (worker processes: ADRs 0043, 0046).
        expect_run = getattr(self._sandbox, "expect_run", None)
        self._expect_run: Callable[[Limits, bool], object] | None = (
            expect_run if callable(expect_run) else None
        )
        # Built at the first compile on this side: with worker processes (the default) the
        # workers compile, and importing the parser costs a fresh process tens of ms.
        self._compiler = compiler
        self._programs = ProgramCache()
        """Programs this side compiled, by source (ADR 0044)."""
        self._start_grace_s = start_grace_s
        self._stops: set[RunStop] = set()
        self._state: Literal["new", "started", "closed"] = "new"
        self._observer: ObserverSet | None = None
        for observer in observers:
            self.add_observer(observer)

    @classmethod
    def from_spec(
        cls, spec: Spec, *, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> CodeMode:
        """Build from a loaded ``codemode.toml``; ``overrides`` replace constructor arguments."""
        from codemodekit.providers.factory import providers_from_spec

        kwargs: dict[str, Any] = {
            "policy": rules_policy(
                spec.policy,
                trusted_sources=[n for n, s in spec.sources.items() if s.trust_annotations],
            ),
            "limits": spec.limits,
            "runtime": spec.runtime,
            "name": spec.name,
            "spec": spec,
        }
        kwargs.update(overrides)
        if "sources" not in kwargs:
            kwargs["sources"] = providers_from_spec(spec, environ=environ)
        return cls(**kwargs)

    # -- lifecycle ----------------------------------------------------------------------
    async def __aenter__(self) -> CodeMode:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self, *, grace_s: float | _Default | None = _DEFAULT) -> None:
        """Connect every source concurrently and build the first catalog.

        Waits up to ``grace_s`` seconds (default: the constructor's ``start_grace_s``;
        ``None``: until every source has come up or failed, each bounded by its own connect
        timeout and ``START_TIMEOUT_S``). Sources still connecting then keep connecting in
        the background and join the catalog when they are up.
        """
        if isinstance(grace_s, _Default):
            grace_s = self._start_grace_s
        if self._state != "new":
            raise RuntimeError(f"CodeMode is already {self._state}")
        self._state = "started"
        warm = getattr(self._sandbox, "start", None)
        if callable(warm):
            warm()  # sandbox workers come up while the sources connect
        await self._sources.start(grace_s)

    async def aclose(self) -> None:
        if self._state == "closed":
            return
        self._state = "closed"
        close_sandbox = getattr(self._sandbox, "close", None)
        if self._owns_sandbox and callable(close_sandbox):
            close_sandbox()
        await self._sources.aclose()

    def add_observer(self, observer: RunObserver) -> None:
        """Tell ``observer`` about every later run and tool call (see ``codemodekit.observe``)."""
        if not isinstance(observer, RunObserver):
            raise TypeError(
                f"{type(observer).__name__} is not a RunObserver (it needs on_run_start, "
                "on_tool_call_start, on_tool_call and on_run_end)"
            )
        current = self._observer.observers if self._observer is not None else ()
        self._observer = ObserverSet((*current, observer))

    # -- views ----------------------------------------------------------------------------
    @property
    def catalog(self) -> Catalog:
        return self._sources.catalog

    @property
    def providers(self) -> Mapping[str, ToolProvider]:
        return dict(self._sources.providers)

    @property
    def health(self) -> tuple[SourceHealth, ...]:
        return self._sources.health()

    def sources_overview(self) -> tuple[SourceOverview, ...]:
        """Per source: its name, one-line description (``codemode.toml``'s, else the
        upstream's own), callable and listed tool counts, and health status; what an
        agent is told when it connects (``codemodekit.overview``)."""
        out = []
        for health in self.health:
            name = health.source
            configured = self.spec.sources.get(name) if self.spec is not None else None
            description = getattr(configured, "description", None) or self._sources.described.get(
                name, ""
            )
            listed = [t for t in self._sources.catalog.source_tools(name) if t.model_visible]
            out.append(
                SourceOverview(
                    name=name,
                    kind=health.kind,
                    description=description,
                    tools=sum(t.available for t in listed),
                    listed=len(listed),
                    status=str(health.status),
                )
            )
        return tuple(out)

    def containment(self) -> dict[str, str]:
        """The containment layers of the processes that run model code (ADR 0028), started
        now if needed: each ``on`` or ``off (why)``; empty in inline mode, which has none.
        Raises ``CodeModeError`` naming the missing layer and the opt-out when a mandatory
        one cannot be applied on this machine."""
        layers = getattr(self._sandbox, "containment", None)
        return dict(layers()) if callable(layers) else {}

    def runtime_stats(self) -> RuntimeStats:
        """The execution engine's state: workers, runs in flight and queued, restarts."""
        stats = getattr(self._sandbox, "stats", None)
        if callable(stats):
            snapshot = stats()
            if isinstance(snapshot, RuntimeStats):
                return snapshot
        return RuntimeStats(mode="inline")

    @property
    def degraded(self) -> bool:
        return any(h.status != HealthStatus.OK for h in self.health)

    # -- running ----------------------------------------------------------------------------
    async def run(
        self,
        code: str,
        *,
        on_progress: ProgressCallback | None = None,
        cancel: asyncio.Event | None = None,
        caller: str | None = None,
        context: Any = None,
        on_log: LogCallback | None = None,
    ) -> RunResult:
        """Run ``code`` (the body of an async function) and return its outcome.

        Expected failures come back as ``RunResult(ok=False, diagnostic=...)``.

        Two ways to stop a run, with the same cleanup (sandbox disposed, in-flight tool
        calls cancelled): setting ``cancel`` ends it with a ``CANCELLED`` result; cancelling
        the awaiting task re-raises ``CancelledError`` as asyncio expects (ADR 0017).

        ``caller`` names who asked (an authenticated client id, an MCP session) for
        observers such as the audit trail, and for fair admission: one caller's runs take
        at most its share of the sandbox workers and of the queue (``[runtime]``
        ``max_runs_per_caller``, ``max_queued_per_caller``), so a caller that floods cannot
        delay another's runs. Runs without a caller have no share of their own: they may use
        the whole pool (ADR 0030).

        ``context`` is the host's trusted per-run context (user identity, tenant, request
        id: any object). The policy sees it as ``ToolCallRequest.context``, local tools as
        ``ToolContext.context``; model code never sees it.

        ``on_log`` receives each ``console.*`` entry while the run goes (a plain function,
        called on the event loop; keep it quick). Entries the log limits drop before they
        could be sent become one ``truncated`` entry; past the log budget the stream is held
        back and the run's last entries follow when it ends. ``RunResult.logs`` is the same
        with or without it, and holds the lines a run wrote before a wall limit or a
        cancellation ended it too.
        """
        if self._state != "started":
            raise RuntimeError("CodeMode is not started: use `async with CodeMode(...)` first")
        if self._expect_run is not None:
            self._expect_run(self.limits, True)  # logs always stream: see ``_run``
        execution_id = uuid.uuid4().hex
        observer = self._observer
        if observer is None:
            return await self._run(
                code, execution_id, on_progress, cancel, None, caller, context, on_log
            )
        start = RunStart(execution_id, self._sources.catalog.revision, time.time(), code, caller)
        observer.on_run_start(start)
        result: RunResult | None = None
        try:
            result = await self._run(
                code, execution_id, on_progress, cancel, observer, caller, context, on_log
            )
            return result
        finally:
            observer.on_run_end(start, result)

    async def _run(
        self,
        code: str,
        execution_id: str,
        on_progress: ProgressCallback | None,
        cancel: asyncio.Event | None,
        observer: RunObserver | None,
        caller: str | None,
        context: Any = None,
        on_log: LogCallback | None = None,
    ) -> RunResult:
        started = time.perf_counter()
        stop = RunStop()
        self._stops.add(stop)
        progress = RunProgress(execution_id, on_progress, self.limits.progress_events)
        progress.emit("started", "run started")
        deadline = asyncio.get_running_loop().time() + self.limits.wall_time_ms / 1000
        try:
            waited = await self._await_joining(code, deadline, progress, cancel)
        except BaseException:
            self._stops.discard(stop)
            raise
        # A run sees one catalog: the revision it started with (a tool that appears
        # mid-run is callable from the next run; one that disappears fails cleanly).
        sources = self._sources
        pinned = sources.catalog
        bridge = ToolBridge(
            catalog=lambda: pinned,
            live_catalog=lambda: sources.catalog,
            providers=sources.providers,
            policy=self.policy,
            limits=self.limits,
            execution_id=execution_id,
            # Nobody follows the run's progress: its calls skip the per-call events.
            on_event=None
            if on_progress is None
            else lambda kind, tool, message: progress.emit(kind, message, tool),  # type: ignore[arg-type]
            observer=observer,
            caller=caller,
            context=context,
        )
        # Logs always stream here (bounded as the stream is): they are the run's logs when
        # it ends without the sandbox's outcome (a wall limit, a cancellation).
        streamed: list[LogEntry] = []

        def keep_log(entry: LogEntry, caller_on_log: LogCallback | None = on_log) -> None:
            streamed.append(entry)
            if caller_on_log is not None:
                caller_on_log(entry)

        bridge.on_log = keep_log
        revision = pinned.revision

        compile_ms = 0.0
        outcome: SandboxOutcome | None = None

        def result(
            ok: bool,
            *,
            value: Any = None,
            logs: tuple[LogEntry, ...] | None = None,
            diagnostic: Diagnostic | None = None,
            warnings: tuple[str, ...] = (),
        ) -> RunResult:
            return RunResult(
                warnings=warnings,
                ok=ok,
                execution_id=execution_id,
                value=value,
                logs=tuple(streamed) if logs is None else logs,
                diagnostic=diagnostic,
                tool_calls=bridge.calls_started,
                duration_ms=(time.perf_counter() - started) * 1000,
                catalog_revision=revision,
                compile_ms=compile_ms or (outcome.compile_ms if outcome is not None else 0.0),
                compute_ms=outcome.compute_ms if outcome is not None else 0.0,
                tool_ms=bridge.tool_ms,
                queue_ms=outcome.queue_ms if outcome is not None else 0.0,
            )

        if waited is not None:
            progress.emit("finished", "run finished")
            await progress.close()
            code_ = ErrorCode.CANCELLED if waited == "" else ErrorCode.WALL_LIMIT
            message = (
                "the run was cancelled by its caller"
                if waited == ""
                else f"the run took longer than {self.limits.wall_time_ms} ms (wall_time_ms) "
                f"waiting for {waited} to connect"
            )
            return result(False, diagnostic=Diagnostic(code_, message))
        try:
            work: Awaitable[SandboxOutcome]
            source_sandbox = self._source_sandbox
            if source_sandbox is not None:
                # The sandbox compiles in its worker, under the run's limits.
                try:
                    check_source_size(code, self.limits.source_bytes)
                except CompileFailure as failure:
                    return result(False, diagnostic=failure.diagnostic)
                work = source_sandbox.run_source(code, bridge, self.limits)
            else:
                compiling = time.perf_counter()
                try:
                    program = await compile_once(
                        self._programs, self._code_compiler, code, self.limits.source_bytes
                    )
                except CompileFailure as failure:
                    return result(False, diagnostic=failure.diagnostic)
                finally:
                    compile_ms = (time.perf_counter() - compiling) * 1000
                work = self._sandbox.run(program, bridge, self.limits)
            try:
                async with asyncio.timeout_at(deadline):
                    outcome = await until_cancelled(work, cancel, stop)
            except TimeoutError:
                return result(
                    False,
                    diagnostic=Diagnostic(
                        ErrorCode.WALL_LIMIT,
                        f"the run took longer than {self.limits.wall_time_ms} ms (wall_time_ms)",
                    ),
                )
            if outcome is None:
                return result(
                    False,
                    diagnostic=Diagnostic(
                        ErrorCode.CANCELLED, stop.reason or "the run was cancelled by its caller"
                    ),
                )
            warnings = outcome.warnings
            if outcome.ok and outcome.value is None and not _RETURN.search(code):
                if bridge.calls_started:
                    warnings += (NO_RETURN_HINT,)
                elif self._code_compiler().ends_in_expression(code):
                    warnings += (LAST_EXPRESSION_HINT,)
            if outcome.ok and depth_exceeds(outcome.value):
                # Checked here so a run means the same in-process and through `serve`.
                too_deep = Diagnostic(
                    ErrorCode.RESULT_NOT_SERIALIZABLE,
                    f"the returned value {NESTING_HINT}; return a flatter value",
                )
                return result(False, logs=outcome.logs, diagnostic=too_deep, warnings=warnings)
            if outcome.ok:
                return result(True, value=outcome.value, logs=outcome.logs, warnings=warnings)
            return result(
                False, logs=outcome.logs, diagnostic=outcome.diagnostic, warnings=warnings
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            correlation_id = new_correlation_id()
            log.exception(
                "run %s failed inside the host (correlation %s)", execution_id, correlation_id
            )
            return result(
                False,
                diagnostic=Diagnostic(
                    ErrorCode.INTERNAL_ERROR,
                    f"an internal error occurred (correlation id {correlation_id})",
                    correlation_id=correlation_id,
                ),
            )
        finally:
            self._stops.discard(stop)
            progress.emit("finished", "run finished")
            await progress.close()

    def _code_compiler(self) -> CodeCompiler:
        if self._compiler is None:
            from codemodekit.compiler.compile import CodeCompiler

            self._compiler = CodeCompiler()
        return self._compiler

    def cancel_all_runs(self, reason: str = "the run was cancelled by the host") -> int:
        """End every run in flight (or waiting for a worker) with ``CANCELLED`` and
        ``reason``: its worker is killed and its tool calls cancelled, and each ``run()``
        returns its result as usual. Returns how many runs were told to stop. ``codemode
        serve`` calls it at the drain deadline."""
        stops = [s for s in self._stops if not s.is_set()]
        for stop in stops:
            stop.reason = reason
            stop.set()
        return len(stops)

    async def _await_joining(
        self,
        code: str,
        deadline: float,
        progress: RunProgress,
        cancel: asyncio.Event | None,
    ) -> str | None:
        """Wait for the sources ``code`` names that are still connecting (all of them when
        its use of ``tools`` is not static). ``None`` once they settled (up or failed);
        else what the run waited for when its wall limit passed (``""``: cancelled)."""
        connecting = self._sources.connecting
        if not connecting:
            return None
        named = self._code_compiler().referenced_sources(code)
        if named is None and not self._compiles(code):
            return None  # its compile error needs no source
        waiting = [name for name in connecting if named is None or name in named]
        if not waiting:
            return None
        listed = ", ".join(repr(name) for name in waiting)
        progress.emit("source_connecting", f"waiting for source {listed} to connect")
        return await self._sources.wait_for(waiting, deadline, cancel)

    def _compiles(self, code: str) -> bool:
        try:
            self._code_compiler().compile(code, max_source_bytes=self.limits.source_bytes)
        except CompileFailure:
            return False
        return True

    async def wait_for_sources(self) -> None:
        """Wait until every source still connecting after ``start``'s grace has come up
        (and joined the catalog) or failed (``health`` says why)."""
        await self._sources.wait_all()

    # -- projections --------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        source: str | None = None,
        detail: Literal["summary", "typescript"] = "summary",
        limit: int = 8,
    ) -> SearchResponse:
        from codemodekit.search.search import search_catalog

        down = {
            # A plugin's server is named with its plugin, so the note says whose it is.
            h.source: str(h.status) + (f" ({h.plugin})" if h.plugin else "")
            for h in self.health
            if h.status not in (HealthStatus.OK, HealthStatus.DEGRADED)
        }
        return search_catalog(
            self._sources.catalog,
            query,
            source=source,
            detail=detail,
            limit=limit,
            unavailable=down,
        )

    def generate(self) -> dict[str, str]:
        """Every generated artifact as ``{relative path: text}``; pure, writes nothing."""
        from codemodekit.codegen import generate

        return generate(self._sources.catalog, name=self.name)


__all__ = ["CodeMode", "LogCallback", "ProgressEvent", "RunResult"]
