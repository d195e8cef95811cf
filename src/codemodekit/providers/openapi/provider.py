"""``OpenApiToolProvider``: an OpenAPI 3.0/3.1 document as a source of tools."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Any

import httpx

from codemodekit.errors import SecretUnavailable, SourceUnavailable, ToolError
from codemodekit.limits import Limits
from codemodekit.observe.tracing import upstream_span
from codemodekit.providers.base import (
    CallContext,
    Discovery,
    DiscoveryListener,
    HealthStatus,
    JsonObject,
    SourceHealth,
    ToolOutput,
    closed_message,
    scrub_discovery,
)
from codemodekit.providers.describe import document_title
from codemodekit.providers.openapi import http
from codemodekit.providers.openapi.document import OpenApiDocument, load_document
from codemodekit.providers.openapi.operations import OperationPlan, build, source_base_url
from codemodekit.providers.openapi.security import AUTH_KEYS, Credentials
from codemodekit.scrub import Scrubber
from codemodekit.spec.model import OpenApiSource

log = logging.getLogger("codemodekit.providers.openapi")

DEFAULT_LOAD_TIMEOUT_S = 60.0
"""Bound on reading and checking a document when the source sets no ``timeout_ms``."""


class OpenApiToolProvider:
    """Tools from an OpenAPI document, called over HTTP with one ``httpx.AsyncClient``.

    ``start`` reads and checks the document (never fetched: it is a local file), resolves
    the ``auth`` templates, and discovers one tool per supported operation; unsupported
    ones are listed in ``Discovery.skipped`` with the reason. ``transport`` replaces the
    network layer (tests, ASGI apps); ``environ`` replaces ``os.environ`` for ``${VAR}``.
    """

    def __init__(
        self,
        config: OpenApiSource,
        *,
        limits: Limits,
        environ: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        unknown = sorted(set(config.auth) - set(AUTH_KEYS))
        if unknown:
            raise ValueError(
                f"sources.{config.name}.auth: unknown key(s) {', '.join(unknown)} "
                f"(expected {', '.join(AUTH_KEYS)})"
            )
        if config.auth and config.base_url is None:
            raise ValueError(
                f"sources.{config.name}.auth needs base_url: a credential is sent only to a "
                "server the configuration names, never to one the OpenAPI document chooses"
            )
        self._config = config
        self._limits = limits
        self._environ = environ
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._plans: Mapping[str, OperationPlan] = {}
        self._base_url = ""
        self._credentials = Credentials({})
        self._scrub = Scrubber([])
        self._status = HealthStatus.CONNECTING
        self._message = ""
        self._tools = 0
        self._document: OpenApiDocument | None = None

    @property
    def name(self) -> str:
        return self._config.name

    @property
    def kind(self) -> str:
        return "openapi"

    def __repr__(self) -> str:
        return (
            f"<OpenApiToolProvider {self._config.name!r} document={self._config.document.name!r}>"
        )

    async def start(self, on_change: DiscoveryListener) -> Discovery:
        del on_change  # the document is static: the tool list never changes while running
        if self._status == HealthStatus.CLOSED:
            raise SourceUnavailable(closed_message(self._config.name))
        timeout_s = (
            self._config.timeout_ms / 1000
            if self._config.timeout_ms is not None
            else DEFAULT_LOAD_TIMEOUT_S
        )
        try:
            # The loading thread checks the deadline itself, so it stops soon after too.
            deadline = time.monotonic() + timeout_s
            async with asyncio.timeout(timeout_s + 1):
                discovery = await asyncio.to_thread(self._load, deadline)
        except TimeoutError:
            self._status = HealthStatus.UNAVAILABLE
            self._message = (
                f"{self._config.document.name}: reading the document took longer than "
                f"{timeout_s:g}s (timeout_ms)"
            )
            raise SourceUnavailable(self._message) from None
        except SourceUnavailable as exc:
            self._status, self._message = HealthStatus.UNAVAILABLE, str(exc)
            raise
        if self._client is not None:  # started again: never leak the previous connections
            await self._client.aclose()
        self._client = http.make_client(self._limits.tool_call_time_ms / 1000, self._transport)
        self._tools = len(discovery.tools)
        self._status = HealthStatus.OK
        if discovery.skipped:
            self._message = f"{len(discovery.skipped)} operation(s) skipped"
        return discovery

    def _load(self, deadline: float | None = None) -> Discovery:
        config = self._config
        document = load_document(config.document, deadline=deadline)
        base_url = source_base_url(document, config.base_url, config.name)
        # A ${VAR} that is not set fails the calls that need it, never the listing: the tool
        # list must not depend on which credentials this machine has (ADR 0021).
        values: dict[str, str] = {}
        unset: dict[str, str] = {}
        for key, template in config.auth.items():
            try:
                values[key] = template.resolve(self._environ)
            except SecretUnavailable as exc:
                unset[key] = str(exc)
        built = build(
            document,
            source=config.name,
            base_url=base_url,
            base_url_overridden=config.base_url is not None,
            include=config.include,
            exclude=config.exclude,
        )
        for warning in built.warnings[:10]:
            log.warning(
                "source %r: schema construct not used (unknown or unconstrained): %s",
                config.name,
                warning,
            )
        self._document = document
        self._base_url = base_url
        self._plans = built.plans
        self._credentials = Credentials(values, unset)
        http.unwatch_logs(self._scrub)
        self._scrub = Scrubber(self._credentials.secrets())
        http.watch_logs(self._scrub)
        described = dataclasses.replace(built.discovery, description=document_title(document.root))
        return scrub_discovery(described, self._scrub)

    async def call_tool(self, name: str, arguments: JsonObject, context: CallContext) -> ToolOutput:
        plan = self._plans.get(name)
        client = self._client
        if client is None:
            raise SourceUnavailable(f"source {self._config.name!r} is not started or is closed")
        if plan is None:
            raise ToolError(f"{self._config.name}: no operation named {name!r}")
        request = http.build_request(client, plan, self._base_url, arguments, self._credentials)
        with upstream_span(plan.method, plan.path, request):
            return await http.send(
                client,
                request,
                plan=plan,
                base_url=self._base_url,
                context=context,
                scrub=self._scrub,
            )

    def health(self) -> SourceHealth:
        return SourceHealth(
            source=self._config.name,
            kind="openapi",
            status=self._status,
            message=self._scrub(self._message),
            tools=self._tools,
        )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        http.unwatch_logs(self._scrub)
        self._status = HealthStatus.CLOSED

    @property
    def operations(self) -> Mapping[str, Any]:
        """Tool name → ``"METHOD /path"`` (diagnostics and tests)."""
        return {name: f"{p.method} {p.path}" for name, p in self._plans.items()}
