"""ToolBridge: the trusted boundary between sandbox calls and providers.

One bridge serves one run. For every ``tools.<source>.<tool>(args)`` it:

resolve address → check visibility → validate and bound the input → queue at
``max_concurrent_tool_calls`` → ask the policy → dispatch under ``tool_call_time_ms`` →
check and bound the result → hand it back to the sandbox.

Every failure becomes a ``ToolCallRejected`` carrying a model-safe ``Diagnostic``; the
sandbox turns it into a catchable JavaScript error. A failed call is never replayed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from codemodekit.bridge.hints import expected_properties, suggest
from codemodekit.bridge.policy import (
    PolicyDecision,
    ToolCallRequest,
    ToolPolicy,
    decide,
    fixed_verdict,
)
from codemodekit.catalog.catalog import (
    Catalog,
    ToolDefinition,
    accessor,
    is_identifier,
    tool_address,
)
from codemodekit.errors import (
    Diagnostic,
    ErrorCode,
    SecretUnavailable,
    SourceUnavailable,
    ToolError,
    new_correlation_id,
)
from codemodekit.limits import Limits
from codemodekit.nesting import NESTING_HINT, depth_exceeds
from codemodekit.observe import RunObserver, ToolCallEvent
from codemodekit.providers.base import (
    CallContext,
    ResultInvalid,
    ResultTooLarge,
    ToolOutput,
    ToolProvider,
)
from codemodekit.sandbox._stepwise import stepwise
from codemodekit.sandbox.base import JsonText, LogEntry, ToolCallRejected
from codemodekit.schema import SchemaUnsupported, Validator

log = logging.getLogger("codemodekit.bridge")

MAX_MESSAGE_CHARS = 1_000
"""Bound on any model-visible message that carries upstream text."""

ToolEvent = Callable[[str, str, str], None]
"""``(kind, address, message)`` for progress: ``tool_call_started`` and friends."""


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    text = str(text)
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


_JSON_SCALARS = (str, int, bool, type(None))


def non_json_path(value: Any, *, max_depth: int = 200) -> str | None:
    """Where ``value`` first stops being JSON: ``$.created_at: datetime is not JSON``."""
    stack: list[tuple[str, Any, int]] = [("$", value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if isinstance(item, _JSON_SCALARS):
            continue
        if isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"{path}: {item} is not JSON (no NaN or infinity)"
            continue
        if depth >= max_depth:
            return None  # reported as nesting too deeply by the encoder
        if isinstance(item, dict):
            children = []
            for key, child in item.items():
                if not isinstance(key, (str, int, float, bool, type(None))):
                    return f"{path}: a key of type {type(key).__name__} is not JSON"
                shown = str(key)
                step = f".{shown}" if is_identifier(shown) else f"[{json.dumps(shown)}]"
                children.append((path + step, child, depth + 1))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([(f"{path}[{i}]", c, depth + 1) for i, c in enumerate(item)]))
        else:
            return f"{path}: {type(item).__name__} is not JSON"
    return None


_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def _json_text(value: Any) -> tuple[str, int]:
    """``value`` as compact JSON text and its UTF-8 size; raises ValueError/TypeError for
    non-JSON data (a lone surrogate included) and RecursionError for data nested deeper
    than the encoder goes."""
    text = _encode(value)
    return text, len(text) if text.isascii() else len(text.encode("utf-8"))


def _json_size(value: Any) -> int:
    return _json_text(value)[1]


@dataclass(slots=True)
class _Plan:
    """What every call of one tool in one run shares, worked out at its first call."""

    definition: ToolDefinition
    catalog: Catalog
    address: str
    validators: tuple[Validator, Validator | None] | None = None
    provider: ToolProvider | None = None
    verdict: PolicyDecision | None = None
    """The policy's answer when it cannot depend on the arguments (a ``[policy]`` table,
    ``allow_all_tool_calls``); ``None``: the policy is asked at every call."""
    report: Callable[[str], None] | None = None


class _Slots:
    """``max_concurrent_tool_calls``: a semaphore whose uncontended path awaits nothing."""

    __slots__ = ("_free", "_waiters")

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def take(self) -> bool:
        """Take a free slot if there is one and nobody waits for it (no coroutine)."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def acquire(self) -> None:
        if self.take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot as it was cancelled: pass it on
            else:
                # Still queued, unless a release in the turn it was cancelled passed it by.
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


async def _timed(work: Any, timeout_s: float) -> Any:
    """Await ``work`` within ``timeout_s``. A coroutine runs at once up to its first
    suspension: one that answers without suspending (an in-process tool) costs no timer,
    and one that suspends is timed from its start, as ``asyncio.timeout`` would."""
    if not isinstance(work, types.CoroutineType):
        async with asyncio.timeout(timeout_s):
            return await work
    started = time.monotonic()  # not the loop's clock: asking for the loop costs a getpid()
    try:
        awaited = work.send(None)
    except StopIteration as stop:
        return stop.value
    async with asyncio.timeout(timeout_s - (time.monotonic() - started)):
        return await stepwise(work, awaited=awaited)


class ToolBridge:
    """Serves one run's tool calls (the sandbox's ``SandboxHost``)."""

    def __init__(
        self,
        *,
        catalog: Callable[[], Catalog],
        live_catalog: Callable[[], Catalog] | None = None,
        providers: Mapping[str, ToolProvider],
        policy: ToolPolicy,
        limits: Limits,
        execution_id: str,
        on_event: ToolEvent | None = None,
        observer: RunObserver | None = None,
        caller: str | None = None,
        context: Any = None,
    ) -> None:
        self._catalog = catalog
        self._live = live_catalog
        self._providers = providers
        self._policy = policy
        self._limits = limits
        self._execution_id = execution_id
        self._on_event = on_event
        self._observer = observer
        self._caller = caller
        self._context = context  # trusted: policy and providers only, never the sandbox
        self._slots = _Slots(limits.max_concurrent_tool_calls)
        self._plans: dict[tuple[str, str], _Plan] = {}
        self._timeout_s = limits.tool_call_time_ms / 1000
        self.calls_started = 0
        self.bridge_bytes = 0
        self.tool_ms = 0.0
        """Dispatch time summed over the run's calls (policy, upstream, result checks)."""
        self.on_log: Callable[[LogEntry], object] | None = None
        """Takes the run's console entries as they are written (``CodeMode.run(on_log=)``)."""

    @property
    def caller(self) -> str | None:
        """Who asked for this run (the sandbox pool's admission shares slots by it)."""
        return self._caller

    def _reject(
        self,
        code: ErrorCode,
        message: str,
        *,
        address: str | None = None,
        source: str | None = None,
        correlation_id: str | None = None,
        details: tuple[tuple[str, Any], ...] = (),
    ) -> ToolCallRejected:
        return ToolCallRejected(
            Diagnostic(
                code,
                bounded(message),
                tool=address,
                source=source,
                correlation_id=correlation_id,
                details=details,
            )
        )

    def _account(self, size: int, address: str, source: str) -> None:
        self.bridge_bytes += size
        if self.bridge_bytes > self._limits.total_bridge_bytes:
            raise self._reject(
                ErrorCode.BRIDGE_LIMIT,
                f"this run moved more than {self._limits.total_bridge_bytes} bytes across "
                "the tool bridge (total_bridge_bytes); request less data per call",
                address=address,
                source=source,
            )

    def _resolve(self, source: str, tool: str) -> tuple[ToolDefinition, Catalog]:
        catalog = self._catalog()
        address = tool_address(source, tool)
        if source not in catalog.sources:
            raise self._reject(
                ErrorCode.SOURCE_NOT_FOUND,
                f"there is no tool source {source!r}."
                + suggest(source, list(catalog.sources), lambda c: "tools" + accessor(c), "sources")
                + " Use search_tools to find tools.",
                address=address,
                source=source,
            )
        definition = catalog.get(source, tool)
        if definition is not None and not definition.model_visible:
            definition = None  # app-only (MCP Apps): not reachable from model-written code
        if definition is None:
            listed = catalog.source_tools(source)
            names = [t.name for t in listed if t.model_visible]
            if not listed and source in self._providers:
                health = self._providers[source].health()
                raise self._reject(
                    ErrorCode.SOURCE_UNAVAILABLE,
                    f"source {source!r} is {health.status}; its tools are not "
                    f"known yet. {health.message}".strip(),
                    address=address,
                    source=source,
                )
            raise self._reject(
                ErrorCode.TOOL_NOT_FOUND,
                f"source {source!r} has no tool {tool!r}."
                + suggest(tool, names, lambda c: tool_address(source, c), f"tools of {source!r}"),
                address=address,
                source=source,
            )
        self._check_still_listed(definition, catalog)
        return definition, catalog

    def _check_still_listed(self, definition: ToolDefinition, catalog: Catalog) -> None:
        """A tool the source dropped after the run started fails as not found, before
        any dispatch (the run's own catalog, ``catalog``, still lists it)."""
        if self._live is None:
            return
        live = self._live()
        if live is catalog:
            return  # the catalog has not changed since the run started
        source = definition.source
        if live.get(source, definition.name) is None and live.source_tools(source):
            raise self._reject(
                ErrorCode.TOOL_NOT_FOUND,
                f"{definition.address} was removed by source {source!r} after this run "
                "started; use search_tools to see the current tools",
                address=definition.address,
                source=source,
            )

    async def call_tool(self, source: str, tool: str, arguments: Any) -> Any:
        self.calls_started += 1
        if self._observer is None:
            return await self._call(source, tool, arguments, None)
        return await self._observed_call(self._observer, source, tool, arguments)

    async def _observed_call(
        self, observer: RunObserver, source: str, tool: str, arguments: Any
    ) -> Any:
        record = ToolCallEvent(
            self._execution_id,
            self.calls_started,
            source,
            tool,
            arguments,
            time.time(),
            caller=self._caller,
        )
        observer.on_tool_call_start(record)
        started = time.perf_counter()
        try:
            return await self._call(source, tool, arguments, record)
        except ToolCallRejected as exc:
            record.outcome = exc.diagnostic.code.value
            record.correlation_id = exc.diagnostic.correlation_id
            raise
        except asyncio.CancelledError:
            record.outcome = ErrorCode.CANCELLED.value
            raise
        except BaseException:
            record.outcome = ErrorCode.INTERNAL_ERROR.value
            raise
        finally:
            record.duration_ms = (time.perf_counter() - started) * 1000
            observer.on_tool_call(record)

    def _plan(self, source: str, tool: str) -> _Plan:
        """The tool's plan for this run; a call that cannot be planned is rejected (and
        nothing is kept, so the next call asks again)."""
        plan = self._plans.get((source, tool))
        if plan is None:
            definition, catalog = self._resolve(source, tool)
            if not definition.available:
                address = tool_address(source, tool)
                raise self._reject(
                    ErrorCode.TOOL_SCHEMA_UNSUPPORTED,
                    f"{address} cannot be called: {definition.quarantine}",
                    address=address,
                    source=source,
                )
            plan = _Plan(definition, catalog, definition.address)
            plan.provider = self._providers.get(definition.source)
            plan.verdict = fixed_verdict(self._policy, self._request(plan, {}))
            if self._on_event is not None:
                address = plan.address
                plan.report = lambda message: self._emit(
                    "tool_progress", address, bounded(message, 200)
                )
            self._plans[(source, tool)] = plan
        else:
            self._check_still_listed(plan.definition, plan.catalog)
        return plan

    def _request(self, plan: _Plan, arguments: dict[str, Any]) -> ToolCallRequest:
        definition = plan.definition
        return ToolCallRequest(
            address=plan.address,
            source=definition.source,
            tool=definition.name,
            arguments=arguments,
            annotations=definition.annotations,
            execution_id=self._execution_id,
            context=self._context,
        )

    def _input_validators(self, plan: _Plan) -> tuple[Validator, Validator | None]:
        validators = plan.validators
        if validators is not None:
            return validators
        address, source = plan.address, plan.definition.source
        try:
            validators = plan.catalog.validators(source, plan.definition.name)
        except SchemaUnsupported as exc:
            # The build proved this schema compiles (docs/adr/0026): a disagreement is a
            # defect, so it is logged, and only this call fails.
            log.error("the schema of %s did not compile at first use: %s", address, exc.reason)
            raise self._reject(
                ErrorCode.TOOL_SCHEMA_UNSUPPORTED,
                f"{address} cannot be called: {exc.reason}",
                address=address,
                source=source,
            ) from None
        if validators is None:  # pragma: no cover - quarantined tools were rejected above
            raise self._reject(ErrorCode.TOOL_SCHEMA_UNSUPPORTED, f"{address} has no validator")
        plan.validators = validators
        return validators

    async def _call(
        self, source: str, tool: str, arguments: Any, record: ToolCallEvent | None
    ) -> Any:
        if record is not None:  # a tool planned before (the limit below comes first)
            record.listed = (source, tool) in self._plans
        if self.calls_started > self._limits.max_tool_calls:
            raise self._reject(
                ErrorCode.TOOL_CALL_LIMIT,
                f"this run already made {self._limits.max_tool_calls} tool calls "
                "(max_tool_calls); batch work into fewer calls",
                address=tool_address(source, tool),
                source=source,
            )
        call_id = self.calls_started
        plan = self._plan(source, tool)
        if record is not None:
            record.listed = True
        address = plan.address
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise self._reject(
                ErrorCode.TOOL_INPUT_INVALID,
                f"{address} takes one object argument, got {type(arguments).__name__}",
                address=address,
                source=source,
            )
        if arguments and depth_exceeds(arguments):
            raise self._reject(
                ErrorCode.TOOL_INPUT_INVALID,
                f"the arguments of {address} {NESTING_HINT}",
                address=address,
                source=source,
            )
        try:
            size = _json_size(arguments) if arguments else 2
        except (TypeError, ValueError, RecursionError) as exc:
            reason = "nest too deeply" if isinstance(exc, RecursionError) else "are not JSON data"
            raise self._reject(
                ErrorCode.TOOL_INPUT_INVALID,
                f"the arguments of {address} {reason}",
                address=address,
                source=source,
            ) from None
        self._account(size, address, source)
        if record is not None:
            record.request_bytes = size
        validators = plan.validators or self._input_validators(plan)
        issue = validators[0].first_error(arguments)
        if issue is not None:
            raise self._reject(
                ErrorCode.TOOL_INPUT_INVALID,
                f"invalid input for {address} at {issue.path}: "
                + bounded(issue.message.rstrip("."), 400)
                + "."
                + expected_properties(plan.definition.input_schema),
                address=address,
                source=source,
                details=(("path", issue.path),),
            )
        queued = time.perf_counter()
        if not self._slots.take():  # a free slot is taken without a coroutine
            await self._slots.acquire()
        dispatched = time.perf_counter()
        if record is not None:
            record.queue_ms = (dispatched - queued) * 1000
        try:
            try:
                return await self._dispatch(plan, validators[1], call_id, arguments, record)
            finally:
                self.tool_ms += (time.perf_counter() - dispatched) * 1000
        finally:
            self._slots.release()

    async def _dispatch(
        self,
        plan: _Plan,
        output_validator: Validator | None,
        call_id: int,
        arguments: dict[str, Any],
        record: ToolCallEvent | None,
    ) -> Any:
        definition = plan.definition
        address, source = plan.address, definition.source
        verdict = plan.verdict
        if verdict is None:
            request = self._request(plan, arguments)
            verdict = await decide(self._policy, request, timeout_s=self._timeout_s)
        if record is not None:
            record.decision, record.rule = verdict.decision, verdict.rule
        if not verdict.allowed:
            raise self._reject(
                ErrorCode.TOOL_DENIED,
                f"{address} was denied: {verdict.reason or 'denied by policy'}",
                address=address,
                source=source,
            )
        provider = plan.provider
        if provider is None:  # pragma: no cover - the catalog only lists configured sources
            raise self._reject(ErrorCode.SOURCE_UNAVAILABLE, f"source {source!r} is not running")
        on_event = self._on_event
        if on_event is not None:
            on_event("tool_call_started", address, f"calling {address}")
        context = CallContext(
            execution_id=self._execution_id,
            call_id=call_id,
            timeout_s=self._timeout_s,
            max_result_bytes=self._limits.tool_result_bytes,
            report_progress=plan.report or _ignore,
            run_context=self._context,
        )
        outcome = "failed"
        try:
            output = await _timed(
                provider.call_tool(definition.name, arguments, context), self._timeout_s
            )
            result = self._check_result(plan, output_validator, output, record)
            outcome = "finished"
            return result
        except ToolCallRejected:
            raise
        except ToolError as exc:
            if exc.cause is not None or exc.__cause__ is not None:
                log.info(
                    "tool %s refused (execution %s, call %d): %r",
                    address,
                    self._execution_id,
                    call_id,
                    exc.cause or exc.__cause__,
                )
            details: tuple[tuple[str, Any], ...] = ()
            if exc.code:
                details = (("upstream_code", bounded(exc.code, 200)),)
            details += tuple((k, v) for k, v in exc.details if k != "upstream_code")
            raise self._reject(
                ErrorCode.TOOL_ERROR, exc.message, address=address, source=source, details=details
            ) from None
        except TimeoutError:
            raise self._reject(
                ErrorCode.TOOL_TIMEOUT,
                f"{address} did not answer within {self._limits.tool_call_time_ms} ms "
                "(tool_call_time_ms)",
                address=address,
                source=source,
            ) from None
        except (SourceUnavailable, SecretUnavailable) as exc:
            raise self._reject(
                ErrorCode.SOURCE_UNAVAILABLE,
                f"source {source!r} is unavailable: {exc}",
                address=address,
                source=source,
            ) from None
        except ResultInvalid as exc:
            raise self._reject(
                ErrorCode.TOOL_RESULT_INVALID,
                f"the result of {address}: {bounded(str(exc), 300)}",
                address=address,
                source=source,
            ) from None
        except ResultTooLarge:
            raise self._reject(
                ErrorCode.TOOL_RESULT_TOO_LARGE,
                f"{address} returned more than {self._limits.tool_result_bytes} bytes "
                "(tool_result_bytes); ask for less data",
                address=address,
                source=source,
            ) from None
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception:
            correlation_id = new_correlation_id()
            log.exception(
                "tool %s failed unexpectedly (execution %s, call %d, correlation %s)",
                address,
                self._execution_id,
                call_id,
                correlation_id,
            )
            raise self._reject(
                ErrorCode.TOOL_INTERNAL_ERROR,
                f"{address} failed with an internal error (correlation id {correlation_id})",
                address=address,
                source=source,
                correlation_id=correlation_id,
            ) from None
        finally:
            if on_event is not None:
                on_event("tool_call_finished", address, f"{address} {outcome}")

    def _check_result(
        self,
        plan: _Plan,
        output_validator: Validator | None,
        output: ToolOutput,
        record: ToolCallEvent | None = None,
    ) -> Any:
        address, source = plan.address, plan.definition.source
        if not isinstance(output, ToolOutput):
            raise self._reject(
                ErrorCode.TOOL_RESULT_INVALID,
                f"{address} returned an invalid result",
                address=address,
                source=source,
            )
        result: dict[str, Any] = {"content": list(output.content)}
        if output.structured_content is not None:
            result["structuredContent"] = output.structured_content
        # One level for the result object and one for the content list are ours.
        if depth_exceeds(output.structured_content) or (
            output.content and any(depth_exceeds(block) for block in output.content)
        ):
            raise self._reject(
                ErrorCode.TOOL_RESULT_INVALID,
                f"the result of {address} {NESTING_HINT}",
                address=address,
                source=source,
            )
        try:
            text, size = _json_text(result)
        except (TypeError, ValueError, RecursionError) as exc:
            if isinstance(exc, RecursionError):
                reason = "nests too deeply (some hundreds of levels at most)"
            elif "ircular" in str(exc):
                reason = "is circular"
            else:
                where = non_json_path(output.structured_content)
                reason = "is not JSON data" + (f": {where}" if where else "")
                if "bytes" in str(exc) or "memoryview" in str(exc):
                    # Binary data is explicit (ADR 0023): the tool must tag it.
                    reason += (
                        " (return bytes as codemodekit.binary.bytes_value(data, media_type),"
                        ' the { $bytes: "<base64>", mediaType } shape)'
                    )
            raise self._reject(
                ErrorCode.TOOL_RESULT_INVALID,
                f"the result of {address} {reason}",
                address=address,
                source=source,
            ) from None
        if size > self._limits.tool_result_bytes:
            raise self._reject(
                ErrorCode.TOOL_RESULT_TOO_LARGE,
                f"{address} returned {size} bytes; the limit is {self._limits.tool_result_bytes} "
                "(tool_result_bytes)",
                address=address,
                source=source,
            )
        if record is not None:
            record.response_bytes = size
        self._account(size, address, source)
        if output_validator is not None:
            if output.structured_content is None:
                raise self._reject(
                    ErrorCode.TOOL_RESULT_INVALID,
                    f"{address} declares an output schema but returned no structuredContent",
                    address=address,
                    source=source,
                )
            issue = output_validator.first_error(output.structured_content)
            if issue is not None:
                raise self._reject(
                    ErrorCode.TOOL_RESULT_INVALID,
                    f"the result of {address} does not match its output schema at "
                    f"{issue.path}: {issue.message}",
                    address=address,
                    source=source,
                    details=(("path", issue.path),),
                )
        return JsonText(text)  # encoded once: the sandbox gets this very text

    def _emit(self, kind: str, address: str, message: str) -> None:
        if self._on_event is not None:
            self._on_event(kind, address, message)


def _ignore(_message: str) -> None:
    """Progress reports of a run nobody follows."""
