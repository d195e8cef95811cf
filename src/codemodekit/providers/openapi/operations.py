"""Operations → tools: names, input/output schemas, and the plan used to call them.

Naming: the ``operationId`` as written (only whitespace and control characters are
replaced, since the name must appear in code), or ``<method>_<path segments>`` when there
is none (``GET /pets/{petId}`` → ``get_pets_petId``). Operations are named in document
order; when two want one name, the first keeps it and the next ones get ``_2``, ``_3``...
(skipping names another operation already owns). ``include``/``exclude`` globs then apply
to these final names. The input-merging rule is ADR 0010.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from codemodekit.errors import SourceUnavailable
from codemodekit.providers.base import Discovery, SkippedTool, ToolSpec
from codemodekit.providers.openapi import parameters as params
from codemodekit.providers.openapi.bodies import BodyPlan, is_json, plan_body
from codemodekit.providers.openapi.document import OpenApiDocument, UnresolvedRef
from codemodekit.providers.openapi.parameters import ParamPlan, Unsupported
from codemodekit.providers.openapi.schemas import SchemaConverter
from codemodekit.providers.openapi.security import SecurityPlan, plan_security, shadowed

log = logging.getLogger("codemodekit.providers.openapi")

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_SAFE_METHODS = frozenset({"get", "head", "options"})
MAX_DESCRIPTION = 2000
_LOCATION_ORDER = {"path": 0, "query": 1, "header": 2, "cookie": 3}
_UNSAFE_NAME = re.compile(r"[\s\x00-\x1f\x7f]+")


@dataclass(frozen=True, slots=True)
class OperationPlan:
    name: str
    method: str
    """Upper case (``GET``)."""
    path: str
    """The path template (``/pets/{petId}``)."""
    server: str | None
    """An operation- or path-level server (same origin as the source); ``None``: the source's."""
    params: tuple[ParamPlan, ...]
    body: BodyPlan | None
    security: SecurityPlan
    accept: str | None


@dataclass(frozen=True, slots=True)
class Built:
    discovery: Discovery
    plans: Mapping[str, OperationPlan]
    warnings: tuple[str, ...]


# -- servers ---------------------------------------------------------------------------------


def server_url(server: Any, where: str) -> str:
    """The URL of a Server Object with every variable replaced by its default."""
    if not isinstance(server, Mapping) or not isinstance(server.get("url"), str):
        raise SourceUnavailable(f"{where}: server entry has no 'url'")
    url: str = server["url"]
    variables = server.get("variables") or {}
    for name in re.findall(r"\{([^{}]+)\}", url):
        var = variables.get(name) if isinstance(variables, Mapping) else None
        default = var.get("default") if isinstance(var, Mapping) else None
        if not isinstance(default, str | int | float):
            raise SourceUnavailable(
                f"{where}: server variable {{{name}}} has no default; set base_url for this source"
            )
        url = url.replace("{" + name + "}", str(default))
    return url


def source_base_url(document: OpenApiDocument, override: str | None, source: str) -> str:
    if override is not None:
        url = override
        origin = f"sources.{source}.base_url"
    else:
        servers = document.root.get("servers")
        if not isinstance(servers, list) or not servers:
            raise SourceUnavailable(
                f"{document.path.name} declares no servers; set base_url in [sources.{source}]"
            )
        url = server_url(servers[0], document.path.name)
        origin = f"{document.path.name} servers[0]"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        hint = f"; set base_url in [sources.{source}]" if override is None else ""
        raise SourceUnavailable(f"{origin}: {url!r} is not an absolute http(s) URL{hint}")
    if parts.username or parts.password:
        raise SourceUnavailable(f"{origin}: credentials in the URL are not allowed; use auth")
    return url.rstrip("/")


def origin_of(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


# -- naming ----------------------------------------------------------------------------------


def fallback_name(method: str, path: str) -> str:
    segments = [re.sub(r"[^A-Za-z0-9_]+", "_", s.strip("{}")).strip("_") for s in path.split("/")]
    return "_".join([method, *(s for s in segments if s)])


def _base_name(operation: Mapping[str, Any], method: str, path: str) -> str:
    op_id = operation.get("operationId")
    if isinstance(op_id, str) and op_id.strip():
        return _UNSAFE_NAME.sub("_", op_id.strip())[:200]
    return fallback_name(method, path)


def assign_names(wanted: Sequence[str]) -> list[str]:
    """Deterministic: the first keeps its name, later duplicates get ``_2``, ``_3``..."""
    taken = set(wanted)
    seen: set[str] = set()
    out: list[str] = []
    for name in wanted:
        if name not in seen:
            seen.add(name)
            out.append(name)
            continue
        n = 2
        while f"{name}_{n}" in taken:
            n += 1
        final = f"{name}_{n}"
        taken.add(final)
        seen.add(final)
        out.append(final)
    return out


def selected(name: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    if include and not any(fnmatch.fnmatchcase(name, g) for g in include):
        return False
    return not any(fnmatch.fnmatchcase(name, g) for g in exclude)


# -- building --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Op:
    path: str
    method: str
    item: Mapping[str, Any]
    operation: Mapping[str, Any]
    base: Path


def _operations(document: OpenApiDocument, skipped: list[SkippedTool]) -> list[_Op]:
    out: list[_Op] = []
    paths = document.root.get("paths") or {}
    if not isinstance(paths, Mapping):
        return out
    for path, raw_item in paths.items():
        if not isinstance(path, str) or not path.startswith("/"):
            continue  # x- extensions of the Paths Object
        try:
            item, base = document.deref(raw_item, document.path)
        except UnresolvedRef as exc:
            skipped.append(SkippedTool(fallback_name("any", path), f"{path}: {exc.reason}"))
            continue
        if not isinstance(item, Mapping):
            continue
        for method in METHODS:
            operation = item.get(method)
            if isinstance(operation, Mapping):
                out.append(_Op(path, method, item, operation, base))
        for extra in ("query",):
            if isinstance(item.get(extra), Mapping):
                skipped.append(
                    SkippedTool(
                        _base_name(item[extra], extra, path),
                        f"{extra.upper()} {path}: the HTTP QUERY method is not supported",
                    )
                )
        if isinstance(item.get("additionalOperations"), Mapping):
            for method, operation in item["additionalOperations"].items():
                if isinstance(operation, Mapping):
                    skipped.append(
                        SkippedTool(
                            _base_name(operation, str(method).lower(), path),
                            f"{method} {path}: additional HTTP methods are not supported",
                        )
                    )
    return out


def build(
    document: OpenApiDocument,
    *,
    source: str,
    base_url: str,
    base_url_overridden: bool,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> Built:
    # Request and response sides differ in one rule (ADR 0011): a required readOnly
    # property is required only in responses, a required writeOnly one only in requests.
    converter = SchemaConverter(document, direction="request")
    responses = SchemaConverter(document, direction="response")
    skipped: list[SkippedTool] = []
    ops = _operations(document, skipped)
    names = assign_names([_base_name(op.operation, op.method, op.path) for op in ops])
    tools: list[ToolSpec] = []
    plans: dict[str, OperationPlan] = {}
    for op, name in zip(ops, names, strict=True):
        if not selected(name, include, exclude):
            continue
        label = f"{op.method.upper()} {op.path}"
        try:
            plan, spec = _build_one(
                document,
                (converter, responses),
                op,
                name,
                base_url,
                base_url_overridden,
            )
        except (Unsupported, UnresolvedRef) as exc:
            skipped.append(SkippedTool(name, f"{label}: {exc.reason}"))
            continue
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError) as exc:
            # A shape the checks above did not anticipate: one operation is lost, never
            # the source. The traceback goes to the host log for a bug report.
            log.warning("source %r: cannot read %s", source, label, exc_info=True)
            reason = f"{label}: the operation could not be read ({type(exc).__name__})"
            skipped.append(SkippedTool(name, reason))
            continue
        tools.append(spec)
        plans[name] = plan
    warnings = tuple(dict.fromkeys([*converter.unresolved, *responses.unresolved]))
    return Built(Discovery(tuple(tools), tuple(skipped)), plans, warnings)


def _describe(operation: Mapping[str, Any]) -> str:
    parts = [
        text.strip()
        for text in (operation.get("summary"), operation.get("description"))
        if isinstance(text, str) and text.strip()
    ]
    if len(parts) == 2 and parts[1].startswith(parts[0]):
        parts = parts[1:]
    text = "\n\n".join(parts)
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def _op_server(op: _Op, base_url: str, overridden: bool) -> str | None:
    if overridden:
        return None
    for holder, where in ((op.operation, "operation"), (op.item, "path item")):
        servers = holder.get("servers")
        if isinstance(servers, list) and servers:
            try:
                url = server_url(servers[0], f"{where} servers")
            except SourceUnavailable as exc:
                raise Unsupported(str(exc)) from None
            absolute = urljoin(base_url + "/", url)
            if origin_of(absolute) != origin_of(base_url):
                raise Unsupported(
                    f"{where} server {url!r} is on another host than the source's base URL"
                )
            return absolute.rstrip("/")
    return None


def _build_one(
    document: OpenApiDocument,
    converters: tuple[SchemaConverter, SchemaConverter],
    op: _Op,
    name: str,
    base_url: str,
    overridden: bool,
) -> tuple[OperationPlan, ToolSpec]:
    converter, responses = converters
    security = plan_security(document, op.operation)
    hidden = shadowed(security)
    raws = params.collect(
        document, op.item.get("parameters"), op.operation.get("parameters"), op.base, op.method
    )
    template_names = re.findall(r"\{([^{}]+)\}", op.path)
    declared_path = {r.name for r in raws if r.location == "path"}
    for var in template_names:
        if var not in declared_path:
            raise Unsupported(f"path parameter {{{var}}} is not declared")
    planned: list[tuple[ParamPlan, Any]] = []
    deps: set[str] = set()
    for raw in sorted(raws, key=lambda r: _LOCATION_ORDER.get(r.location, 9)):
        if raw.location == "path" and raw.name not in template_names:
            continue  # declared but not in the template: nothing to fill
        ident = (raw.location, raw.name.lower() if raw.location == "header" else raw.name)
        if ident in hidden:
            continue  # supplied by the credentials, never by the model
        result = params.plan(raw, converter)
        if result is None:
            continue
        plan, schema, used = result
        planned.append((plan, schema))
        deps |= used
    properties: dict[str, Any] = {}
    required: list[str] = []
    final: list[ParamPlan] = []
    for plan, schema in planned:
        key = _free_key(plan.name, plan.location, properties)
        properties[key] = schema
        if plan.required:
            required.append(key)
        final.append(_with_key(plan, key))
    body: BodyPlan | None = None
    planned_body = plan_body(
        document, converter, op.operation.get("requestBody"), op.base, properties
    )
    if planned_body is not None:
        body, body_schema, used = planned_body
        properties[body.key] = body_schema
        if body.required:
            required.append(body.key)
        deps |= used
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    input_schema["additionalProperties"] = False
    output, accept = _output(document, responses, op)
    summary = op.operation.get("summary")
    annotations: dict[str, Any] = {}
    if isinstance(summary, str) and summary.strip():
        annotations["title"] = summary.strip()[:200]
    annotations["readOnlyHint"] = op.method in _SAFE_METHODS
    if op.method == "delete":
        annotations["destructiveHint"] = True
    if op.method in ("put", "delete"):
        annotations["idempotentHint"] = True
    op_id = op.operation.get("operationId")
    spec = ToolSpec(
        name=name,
        description=_describe(op.operation),
        input_schema=converter.attach(input_schema, deps),
        output_schema=output,
        annotations=annotations,
        provenance={
            "operation": f"{op.method.upper()} {op.path}",
            **({"operationId": op_id} if isinstance(op_id, str) else {}),
        },
        deprecated=op.operation.get("deprecated") is True,
    )
    op_plan = OperationPlan(
        name=name,
        method=op.method.upper(),
        path=op.path,
        server=_op_server(op, base_url, overridden),
        params=tuple(final),
        body=body,
        security=security,
        accept=accept,
    )
    return op_plan, spec


def _free_key(name: str, location: str, taken: Mapping[str, Any]) -> str:
    if name not in taken:
        return name
    candidate, n = f"{name}_{location}", 2
    while candidate in taken:
        candidate = f"{name}_{location}_{n}"
        n += 1
    return candidate


def _with_key(plan: ParamPlan, key: str) -> ParamPlan:
    return ParamPlan(
        key,
        plan.name,
        plan.location,
        plan.style,
        plan.explode,
        plan.required,
        plan.allow_reserved,
        plan.json_content,
    )


def _output(
    document: OpenApiDocument, converter: SchemaConverter, op: _Op
) -> tuple[dict[str, Any] | None, str | None]:
    responses = op.operation.get("responses")
    if not isinstance(responses, Mapping):
        return None, None
    schemas: list[Any] = []
    deps: set[str] = set()
    media_types: list[str] = []
    all_json = True
    success = [
        code
        for code in responses
        if isinstance(code, str) and (re.fullmatch(r"2\d\d", code) or code.upper() == "2XX")
    ]
    for code in sorted(success):
        try:
            response, base = document.deref(responses[code], op.base)
        except UnresolvedRef:
            all_json = False
            continue
        content = response.get("content") if isinstance(response, Mapping) else None
        if not isinstance(content, Mapping) or not content:
            all_json = False
            continue
        for media in content:
            if isinstance(media, str) and media not in media_types:
                media_types.append(media)
        json_types = [m for m in content if isinstance(m, str) and is_json(m)]
        media_obj = content[json_types[0]] if json_types else None
        if not isinstance(media_obj, Mapping) or "schema" not in media_obj:
            all_json = False
            continue
        schema, used = converter.convert(media_obj["schema"], base)
        deps |= used
        if schema not in schemas:
            schemas.append(schema)
    accept = ", ".join(sorted(media_types, key=lambda m: (not is_json(m), m))) or None
    if not schemas or not all_json:
        return None, accept
    merged = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    return converter.attach(merged, deps), accept
