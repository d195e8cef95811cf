"""Python functions as tools: ``define_tool``, ``local`` and ``type = "python"`` modules.

Local tools run on the trusted host, never inside the sandbox. Their arguments have been
validated by the bridge; their results cross the same result checks as any other source.
A sync function runs on a thread of its source so it never blocks the event loop, unless
it is declared ``blocking=False`` (quick, pure computation): then it runs on the event loop
at once, which saves the thread hand-off.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
import json
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from codemodekit.catalog.catalog import tool_address
from codemodekit.errors import Diagnostic, ErrorCode, SourceUnavailable
from codemodekit.providers.base import (
    CallContext,
    Discovery,
    DiscoveryListener,
    HealthStatus,
    SourceHealth,
    ToolOutput,
    ToolSpec,
    closed_message,
)
from codemodekit.providers.describe import docstring_line, one_line
from codemodekit.providers.python.files import unsafe_import, unsafe_roots
from codemodekit.providers.python.schemas import model_json_schema
from codemodekit.providers.python.threads import ToolThreads
from codemodekit.sandbox.base import ToolCallRejected

ToolFunction = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class LocalTool:
    """A tool made with ``define_tool``. Immutable; share it between sources freely."""

    description: str
    input_schema: Mapping[str, Any]
    execute: ToolFunction
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    input_model: type[BaseModel] | None = None
    context_style: str = ""
    """How ``execute`` takes a ``ToolContext``: ``"positional"`` (a second parameter),
    ``"keyword"`` (a keyword-only ``context``) or ``""`` (it does not)."""
    blocking: bool = True
    """Whether a sync ``execute`` may block (files, sockets, sleeps, heavy work): it then
    runs on a thread of its source. ``False`` runs it on the event loop, at once."""

    def spec(self, name: str) -> ToolSpec:
        return ToolSpec(
            name=name,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=self.output_schema,
            annotations=self.annotations,
            provenance={"kind": "python", "function": _qualname(self.execute)},
        )


class ToolContext:
    """The second parameter of a local tool that asks for one (``execute(args, context)``).

    Trusted host data only: model-written code never sees any of it.
    """

    __slots__ = ("_cancelled", "_loop", "_report", "call_id", "context", "execution_id")

    def __init__(
        self,
        *,
        context: Any,
        execution_id: str,
        call_id: int,
        report_progress: Callable[[str], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.context = context
        """What the host passed to ``CodeMode.run(code, context=...)`` (``None`` if nothing)."""
        self.execution_id = execution_id
        self.call_id = call_id
        self._report = report_progress
        self._loop = loop
        self._cancelled = threading.Event()

    def report_progress(self, message: str) -> None:
        """Short progress text for the run's progress events (bounded in count and rate).
        Safe to call from a sync tool's worker thread."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._report(str(message))
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._report, str(message))

    @property
    def cancelled(self) -> bool:
        """True once the call was cancelled (the run stopped, or ``tool_call_time_ms``
        passed). An async tool is cancelled by ``CancelledError`` as well; a sync tool,
        which cannot be interrupted, should check this and return early."""
        return self._cancelled.is_set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block (a sync tool's thread) until the call is cancelled or ``timeout`` passes."""
        return self._cancelled.wait(timeout)

    def _cancel(self) -> None:
        self._cancelled.set()


def _context_style(fn: Callable[..., Any]) -> str:
    """Whether ``fn`` takes a ``ToolContext``: a keyword-only ``context`` parameter, or a
    second positional parameter."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ""
    if any(p.name == "context" and p.kind is p.KEYWORD_ONLY for p in parameters):
        return "keyword"
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return "positional" if len(positional) >= 2 else ""


def _qualname(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', type(fn).__name__)}"


SYNC_WORKERS_PER_SOURCE = 32
"""Worker threads a source may use for sync tools (created on demand)."""


def define_tool(
    *,
    description: str,
    execute: ToolFunction,
    input_schema: Mapping[str, Any] | None = None,
    input_model: type[BaseModel] | None = None,
    output_schema: Mapping[str, Any] | None = None,
    annotations: Mapping[str, Any] | None = None,
    name: str | None = None,
    blocking: bool = True,
) -> LocalTool:
    """Describe a Python function as a tool.

    ``execute(args)`` receives the validated arguments: a dict, or an instance of
    ``input_model`` when one is given (its JSON Schema becomes the input schema). It may be
    sync or async and returns JSON data (or a pydantic model). Raise ``ToolError`` to refuse
    with a model-visible message.

    A sync ``execute`` runs on a thread of its source, because it may block (files, sockets,
    sleeps, heavy work) and the event loop must stay free; the hand-off costs about 0.1 ms.
    ``blocking=False`` says it never blocks (a lookup in memory, a small computation): it
    then runs on the event loop at once. Such a tool holds every run on that loop while it
    runs and ``tool_call_time_ms`` cannot interrupt it, so only mark quick functions.
    ``blocking`` has no effect on an async ``execute``. ``execute(args, context)`` (a second parameter, or a
    keyword-only ``context``) also receives a ``ToolContext``: the host's per-run context,
    progress reporting and cancellation.
    """
    if not callable(execute):
        raise TypeError("define_tool: execute must be callable")
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError("define_tool: name must be a non-empty string (or omitted)")
    if (input_schema is None) == (input_model is None):
        raise TypeError("define_tool: pass exactly one of input_schema or input_model")
    if input_model is not None:
        if not (isinstance(input_model, type) and issubclass(input_model, BaseModel)):
            raise TypeError("define_tool: input_model must be a pydantic BaseModel subclass")
        schema: Mapping[str, Any] = model_json_schema(input_model)
    else:
        assert input_schema is not None
        schema = _json_object(input_schema, "input_schema")
    return LocalTool(
        description=description,
        input_schema=schema,
        execute=execute,
        output_schema=None
        if output_schema is None
        else _json_object(output_schema, "output_schema"),
        annotations=_json_object(annotations or {}, "annotations"),
        name=name,
        input_model=input_model,
        context_style=_context_style(execute),
        blocking=bool(blocking),
    )


def _json_object(value: Any, what: str) -> dict[str, Any]:
    """``value`` as a dict, if it is a JSON object: the catalog, the lock and every generated
    file hold it as JSON (a set, a tuple key or an integer of 4300 digits became a traceback
    in ``codemode lock`` rather than an error where the tool is defined)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"define_tool: {what} must be a JSON object (a dict)")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"define_tool: {what} is not JSON data ({exc})") from None
    except RecursionError:
        pass  # too deep to check here: the catalog quarantines it, with the depth it allows
    return dict(value)


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    # An object whose __call__ is a coroutine function (functools.partial is handled by
    # inspect itself).
    return not inspect.isfunction(fn) and inspect.iscoroutinefunction(type(fn).__call__)


def _to_json_value(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


class LocalToolProvider:
    """A source of Python tools. Built by ``local(name, tools)`` or from a module."""

    kind = "python"

    def __init__(self, name: str, tools: Mapping[str, LocalTool], *, description: str = "") -> None:
        self._name = name
        self._tools = dict(tools)
        self._description = description
        self._closed = False
        self._executor: ToolThreads | None = None
        self._async: dict[str, bool] = {}
        """Whether each tool's ``execute`` is a coroutine function (asked at its first call)."""

    def _threads(self) -> ToolThreads:
        # Each source has its own worker threads. A sync tool that hangs past its timeout
        # keeps its thread (threads cannot be killed); on the loop's shared default
        # executor (a handful of threads on a small machine) a few of them would starve
        # every sibling source's sync tools, and anything else using asyncio.to_thread.
        if self._executor is None:
            self._executor = ToolThreads(f"codemode-tool-{self._name}", SYNC_WORKERS_PER_SOURCE)
        return self._executor

    @property
    def name(self) -> str:
        return self._name

    async def start(self, on_change: DiscoveryListener) -> Discovery:
        if self._closed:
            raise SourceUnavailable(closed_message(self._name))
        return Discovery(
            tools=tuple(tool.spec(name) for name, tool in self._tools.items()),
            description=self._description,
        )

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: CallContext
    ) -> ToolOutput:
        tool = self._tools.get(name)
        if tool is None or self._closed:
            raise SourceUnavailable(f"source {self._name!r} has no tool {name!r}")
        args: Any = arguments
        if tool.input_model is not None:
            try:
                # JSON mode: the arguments are JSON the sandbox sent, checked against the
                # model's JSON Schema; in Python mode a strict model refuses a date, UUID
                # or enum written as a string, and a tuple written as a list.
                args = tool.input_model.model_validate_json(json.dumps(arguments))
            except ValidationError as exc:
                raise self._input_invalid(name, exc) from None
        execute: Callable[..., Any] = tool.execute
        tool_context: ToolContext | None = None
        if tool.context_style:
            tool_context = ToolContext(
                context=context.run_context,
                execution_id=context.execution_id,
                call_id=context.call_id,
                report_progress=context.report_progress,
                loop=asyncio.get_running_loop(),
            )
            if tool.context_style == "keyword":
                execute = functools.partial(tool.execute, context=tool_context)  # type: ignore[call-arg]
        extra = (tool_context,) if tool.context_style == "positional" else ()
        try:
            is_async = self._async.get(name)
            if is_async is None:
                is_async = self._async[name] = _is_async(tool.execute)
            if is_async:
                result = await execute(args, *extra)
            elif not tool.blocking:
                result = execute(args, *extra)
                if inspect.isawaitable(result):
                    result = await result
            else:
                call = functools.partial(contextvars.copy_context().run, execute, args, *extra)
                result = await self._threads().run(call)
                if inspect.isawaitable(result):
                    result = await result
        except asyncio.CancelledError:
            if tool_context is not None:
                tool_context._cancel()
            raise
        value = _to_json_value(result)
        return ToolOutput(structured_content=value)

    def _input_invalid(self, name: str, exc: ValidationError) -> ToolCallRejected:
        # The model's own validators (field_validator, custom types) go beyond its JSON
        # Schema, which the bridge already enforced: their refusal is still bad input, so
        # the model sees TOOL_INPUT_INVALID with the field, not an internal error.
        address = tool_address(self._name, name)
        errors = exc.errors(include_url=False, include_input=False)
        first = errors[0] if errors else {"loc": (), "msg": str(exc)}
        path = "$" + "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]
        )
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        reason = str(first["msg"])[:300]  # bounded: validator messages are user-written
        message = f"invalid input for {address} at {path}: {reason}{more}"
        return ToolCallRejected(
            Diagnostic(
                ErrorCode.TOOL_INPUT_INVALID,
                message,
                tool=address,
                source=self._name,
                details=(("path", path),),
            )
        )

    def health(self) -> SourceHealth:
        status = HealthStatus.CLOSED if self._closed else HealthStatus.OK
        return SourceHealth(self._name, self.kind, status, tools=len(self._tools))

    async def aclose(self) -> None:
        self._closed = True
        if self._executor is not None:
            # Never wait for a hung tool; queued calls are dropped.
            self._executor.close()
            self._executor = None


def local(
    name: str,
    tools: Mapping[str, LocalTool] | Iterable[LocalTool],
    *,
    description: str = "",
) -> LocalToolProvider:
    """A source named ``name`` (the namespace) of Python tools.

    ``tools`` maps tool names to ``define_tool`` results, or is an iterable of tools that
    were given ``name=``. ``description`` (one line) is told to the model with the name.
    """
    _check_source_name(name)
    if isinstance(tools, Mapping):
        table = dict(tools)
    else:
        table = {}
        for tool in tools:
            if not tool.name:
                raise TypeError("local(): a tool in a list needs define_tool(name=...)")
            if table.get(tool.name, tool) is not tool:
                raise ValueError(f"local(): two tools are named {tool.name!r}")
            table[tool.name] = tool
    for key, tool in table.items():
        if not isinstance(tool, LocalTool):
            raise TypeError(f"local(): {key!r} is not a tool made with define_tool")
        if not isinstance(key, str) or not key:
            raise ValueError(f"local(): tool names must be non-empty strings, got {key!r}")
    return LocalToolProvider(name, table, description=one_line(description))


def _check_source_name(name: object) -> None:
    # The same rule as `[sources.NAME]` in codemode.toml: the TOML file is only one way to
    # write CodeMode's arguments, so a name it rejects must not slip in through Python.
    if not isinstance(name, str) or not name:
        raise ValueError("local(): a source name must be a non-empty string")
    if "." in name or any(c.isspace() for c in name):
        raise ValueError(
            f"local(): invalid source name {name!r}: names become `tools.NAME` and must not "
            "contain `.` or whitespace"
        )


def tools_of_module(module: object) -> dict[str, LocalTool]:
    """The module's ``define_tool`` attributes (``__all__`` respected when present).

    ``ValueError`` when two different tools take one name (``define_tool(name=...)`` may
    differ from the attribute): one would replace the other, and with it what a policy
    rule for that name allows."""
    names: Iterable[str] = getattr(module, "__all__", None) or [
        n for n in vars(module) if not n.startswith("_")
    ]
    found: dict[str, LocalTool] = {}
    attrs: dict[str, str] = {}
    for attr in names:
        value = getattr(module, attr, None)
        if isinstance(value, LocalTool):
            name = value.name or attr
            if found.get(name, value) is not value:
                raise ValueError(f"attributes {attrs[name]!r} and {attr!r} are both tool {name!r}")
            found[name], attrs[name] = value, attr
    return found


def _import_site(exc: BaseException) -> str:
    """``file:line`` of the innermost frame outside Python's import machinery."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if "importlib._bootstrap" not in f.filename
    ]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"


def _not_found(module: str, exc: ModuleNotFoundError) -> str:
    missing = exc.name or "?"
    if module == missing or module.startswith(missing + "."):
        return (
            f"python module {module!r} was not found ({missing} is missing); "
            "check `module` and `path` of this source"
        )
    # The module exists; something it imports does not.
    return (
        f"python module {module!r} imports {missing!r}, which is not installed "
        f"(at {_import_site(exc)}); install it in the environment codemode runs in"
    )


class PythonModuleProvider(LocalToolProvider):
    """``[sources.X] type = "python"``: imports ``module`` when the source starts."""

    def __init__(self, name: str, module: str, *, paths: Iterable[Path] = ()) -> None:
        super().__init__(name, {})
        self._module = module
        self._paths = tuple(str(p) for p in paths)
        self._error: str | None = None

    async def start(self, on_change: DiscoveryListener) -> Discovery:
        if self._closed:
            raise SourceUnavailable(closed_message(self.name))
        # Before Python opens anything: a FIFO or /dev/zero there would hang or exhaust it.
        # Roots are checked before they join sys.path (every later import would open them).
        unsafe = unsafe_roots(self._paths)
        if unsafe is None:
            for path in self._paths:
                if path not in sys.path:
                    sys.path.insert(0, path)
            unsafe = unsafe_import(self._module)
        if unsafe is not None:
            self._error = f"python module {self._module!r} cannot be imported safely: {unsafe}"
            raise SourceUnavailable(self._error)
        try:
            module = importlib.import_module(self._module)
        except SyntaxError as exc:
            where = f"{exc.filename}:{exc.lineno}" if exc.filename else "?"
            self._error = f"python module {self._module!r} has a syntax error at {where}: {exc.msg}"
            raise SourceUnavailable(self._error) from None
        except ModuleNotFoundError as exc:
            self._error = _not_found(self._module, exc)
            raise SourceUnavailable(self._error) from None
        except Exception as exc:
            # The type and the place, not the message: it may carry a value from the host.
            self._error = (
                f"importing python module {self._module!r} failed: {type(exc).__name__} "
                f"raised at {_import_site(exc)}"
            )
            raise SourceUnavailable(self._error) from exc
        try:
            self._tools = tools_of_module(module)
        except ValueError as exc:
            self._error = f"python module {self._module!r}: {exc}; give each tool its own name"
            raise SourceUnavailable(self._error) from None
        self._async.clear()
        if not self._tools:
            self._error = (
                f"python module {self._module!r} exposes no tools: define module attributes "
                "with codemodekit.define_tool(...)"
            )
            raise SourceUnavailable(self._error)
        self._error = None
        self._description = docstring_line(module.__doc__)
        return await super().start(on_change)

    def health(self) -> SourceHealth:
        if self._error is not None:
            return SourceHealth(self.name, self.kind, HealthStatus.UNAVAILABLE, self._error)
        return super().health()


__all__ = [
    "LocalTool",
    "LocalToolProvider",
    "PythonModuleProvider",
    "ToolContext",
    "define_tool",
    "local",
    "tools_of_module",
]
