"""``@tool``: a typed Python function as a tool, the FastMCP way, beside ``define_tool``.

The input schema comes from the parameters' type hints (through a pydantic model, so
defaults, ``Annotated[..., Field(description=...)]`` and nested models work), the
description from the docstring, and the function is called with keyword arguments. A
return annotation that is an object type becomes the output schema, and the result is
serialized through it (so a ``datetime`` field becomes a string, as its schema says). Any
other return type (``list[Issue]``, ``int``, a union) is returned as ``{"result": value}``
with that object as the output schema, since a structured result is an object (MCP).
pydantic's automatic titles (the class and field names again) are left out.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

from codemodekit.providers.python.local import LocalTool, ToolContext, define_tool
from codemodekit.providers.python.schemas import type_json_schema

_NO_OUTPUT = (inspect.Signature.empty, Any, None, type(None))


@overload
def tool(fn: Callable[..., Any], /) -> LocalTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    annotations: Mapping[str, Any] | None = None,
    blocking: bool = True,
) -> Callable[[Callable[..., Any]], LocalTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    annotations: Mapping[str, Any] | None = None,
    blocking: bool = True,
) -> LocalTool | Callable[[Callable[..., Any]], LocalTool]:
    """Make a tool of a typed function: ``@tool`` or ``@tool(name=..., annotations=...)``.

    A keyword-only ``context: ToolContext`` parameter receives the call's context and is not
    part of the input. ``annotations`` are MCP hints such as ``{"readOnlyHint": True}``.
    ``blocking=False``: a sync function that never blocks runs on the event loop rather
    than a thread (see ``define_tool``).
    """

    def make(function: Callable[..., Any]) -> LocalTool:
        return _from_function(
            function,
            name=name,
            description=description,
            annotations=annotations,
            blocking=blocking,
        )

    return make if fn is None else make(fn)


def _from_function(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    annotations: Mapping[str, Any] | None,
    blocking: bool = True,
) -> LocalTool:
    if not callable(fn):
        raise TypeError("@tool: decorate a function")
    label = getattr(fn, "__qualname__", repr(fn))
    text = description if description is not None else inspect.getdoc(fn)
    if not text:
        raise TypeError(f"@tool: {label} has no docstring; write one or pass description=...")
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve
        raise TypeError(f"@tool: the type hints of {label} cannot be resolved: {exc}") from None
    fields: dict[str, Any] = {}
    wants_context = False
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"@tool: {label}: *args and **kwargs cannot be described as input")
        if parameter.name == "context" and parameter.kind is parameter.KEYWORD_ONLY:
            wants_context = True
            continue
        if parameter.name not in hints:
            raise TypeError(f"@tool: {label}: parameter {parameter.name!r} needs a type hint")
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints[parameter.name], default)
    model_name = "".join(part.title() for part in (name or fn.__name__).split("_")) + "Input"
    model: type[BaseModel] = create_model(
        model_name, __config__=ConfigDict(extra="forbid"), **fields
    )
    returns = hints.get("return", inspect.Signature.empty)
    adapter: TypeAdapter[Any] | None = None
    output_schema: dict[str, Any] | None = None
    wrapped = False
    if returns not in _NO_OUTPUT:
        adapter = TypeAdapter(returns)
        named = returns.__name__ if isinstance(returns, type) else None
        schema = type_json_schema(adapter, "serialization", name=named)
        if schema.get("type") == "object" or ("$ref" in schema and "$defs" in schema):
            output_schema = schema
        else:
            # structuredContent is an object (MCP): a list, a number or a union is returned
            # as {"result": value}, the convention MCP servers use for such results.
            wrapped = True
            output_schema = _wrap(schema)
    names = list(fields)
    is_async = inspect.iscoroutinefunction(fn)

    def arguments(args: BaseModel) -> dict[str, Any]:
        # Attributes, not model_dump(): a nested model parameter stays a model instance.
        return {key: getattr(args, key) for key in names}

    def dump(result: Any) -> Any:
        if adapter is None:
            return result
        value = adapter.dump_python(result, mode="json")
        return {"result": value} if wrapped else value

    execute: Any
    # Takes a keyword-only ToolContext (which define_tool detects) only when `fn` wants one:
    # building it costs every call.
    if is_async and wants_context:

        async def execute_async_context(args: BaseModel, *, context: ToolContext) -> Any:
            return dump(await fn(**arguments(args), context=context))

        execute = execute_async_context
    elif is_async:

        async def execute_async(args: BaseModel) -> Any:
            return dump(await fn(**arguments(args)))

        execute = execute_async
    elif wants_context:

        def execute_sync_context(args: BaseModel, *, context: ToolContext) -> Any:
            return dump(fn(**arguments(args), context=context))

        execute = execute_sync_context
    else:

        def execute_sync(args: BaseModel) -> Any:
            return dump(fn(**arguments(args)))

        execute = execute_sync
    execute.__module__ = getattr(fn, "__module__", execute.__module__)
    execute.__qualname__ = getattr(fn, "__qualname__", execute.__qualname__)
    return define_tool(
        description=text,
        execute=execute,
        input_model=model,
        output_schema=output_schema,
        annotations=annotations,
        name=name or getattr(fn, "__name__", None),
        blocking=blocking,
    )


def _wrap(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"result": <schema>}`` as an object schema; shared ``$defs`` stay at the root, so
    the ``$ref``s inside keep resolving."""
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    out: dict[str, Any] = {
        "type": "object",
        "properties": {"result": inner},
        "required": ["result"],
        "additionalProperties": False,
    }
    if defs:
        out["$defs"] = defs
    return out


__all__ = ["tool"]
