"""The operator's side of the HTTP server: health, readiness, metrics and graceful drain.

``Operations`` wraps the MCP app (already behind its auth) and answers three paths itself:

- ``/healthz``: 200 while the process serves HTTP at all (liveness);
- ``/readyz``: 200 when the catalog is built and the server is not draining, else 503; the
  body reports the catalog revision, each source's health and the execution engine. A
  degraded or unavailable source does not make a replica unready: every replica shares the
  same upstreams, so taking them all out would turn a partial outage into a total one;
- ``/metrics``: the Prometheus exposition, when metrics are on.

Health endpoints sit behind the same bearer token as MCP unless the operator makes them
public (``public_health``); ``/metrics`` has its own token (or the MCP one, or none).

Draining (``drain``): stop listening, answer new MCP requests with 503, wait for the
requests in flight (each stateless ``tools/call`` is one request) up to a deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from codemodekit.server.bearer import BearerAuth

if TYPE_CHECKING:
    from codemodekit.observe.metrics import CodeModeMetrics
    from codemodekit.run import CodeMode

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"


class Operations:
    """Health, readiness, metrics and drain state of one HTTP server (see the module doc)."""

    def __init__(
        self,
        code_mode: CodeMode,
        *,
        metrics: CodeModeMetrics | None = None,
        public_health: bool = False,
        metrics_token: str | None = None,
        public_metrics: bool = False,
    ) -> None:
        self.code_mode = code_mode
        self.metrics = metrics
        self.public_health = public_health
        self.metrics_token = metrics_token
        self.public_metrics = public_metrics
        self.draining = False
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.stop_listening: Callable[[], None] = lambda: None
        """Set by the server: closes its listening sockets (connections stay open)."""

    # -- readiness ---------------------------------------------------------------------------
    def ready(self) -> tuple[bool, dict[str, Any]]:
        # The server listens only once the CodeMode is entered (its catalog built), so
        # readiness is lost only by draining; sources still connecting say so below.
        cm = self.code_mode
        stats = cm.runtime_stats()
        body: dict[str, Any] = {
            "ready": not self.draining,
            "draining": self.draining,
            "catalog_revision": cm.catalog.revision,
            "tools": len(cm.catalog.available_tools),
            "sources": [h.to_json() for h in cm.health],
            "runtime": {
                "mode": stats.mode,
                "workers": stats.workers,
                "busy_workers": stats.busy_workers,
                "runs_in_flight": stats.runs_in_flight,
                "runs_queued": stats.runs_queued,
            },
            "requests_in_flight": self.in_flight,
        }
        return bool(body["ready"]), body

    # -- drain -------------------------------------------------------------------------------
    async def drain(self, timeout_s: float) -> bool:
        """Stop taking requests and wait for those in flight; ``False`` if the deadline hit."""
        self.draining = True
        self.stop_listening()
        return await self.wait_idle(timeout_s)

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no request is in flight; ``False`` if ``timeout_s`` passed first."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    # -- ASGI --------------------------------------------------------------------------------
    def wrap(self, mcp_app: ASGIApp, *, auth: Callable[[ASGIApp], ASGIApp]) -> ASGIApp:
        """The whole app: ops paths first, then ``auth(mcp_app)`` with request accounting.

        ``auth`` wraps an app in the MCP bearer rule (identity when there is no token).
        """
        guarded_mcp = auth(self._counted(mcp_app))
        health = _Endpoint(self._health)
        guarded_health = health if self.public_health else auth(health)
        metrics = _Endpoint(self._metrics)
        if self.public_metrics:
            guarded_metrics: ASGIApp = metrics
        elif self.metrics_token:
            guarded_metrics = BearerAuth(metrics, self.metrics_token)
        else:
            guarded_metrics = auth(metrics)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            path = scope.get("path", "") if scope["type"] == "http" else ""
            if path in (HEALTH_PATH, READY_PATH):
                await guarded_health(scope, receive, send)
            elif path == METRICS_PATH and self.metrics is not None:
                await guarded_metrics(scope, receive, send)
            else:
                await guarded_mcp(scope, receive, send)

        return app

    def _counted(self, app: ASGIApp) -> ASGIApp:
        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope.get("method") != "POST":
                await app(scope, receive, send)
                return
            if self.draining:
                response = JSONResponse(
                    {"error": "draining", "message": "this server is shutting down; retry"},
                    status_code=503,
                    headers={"Retry-After": "1", "Connection": "close"},
                )
                await response(scope, receive, send)
                return
            self.in_flight += 1
            self._idle.clear()
            try:
                await app(scope, receive, send)
            finally:
                self.in_flight -= 1
                if self.in_flight == 0:
                    self._idle.set()

        return counted

    async def _health(self, scope: Scope) -> Response:
        if scope.get("method") not in ("GET", "HEAD"):
            return JSONResponse({"error": "method not allowed"}, status_code=405)
        if scope.get("path") == HEALTH_PATH:
            return JSONResponse({"status": "ok", "time": time.time()})
        ok, body = self.ready()
        return JSONResponse(body, status_code=200 if ok else 503)

    async def _metrics(self, scope: Scope) -> Response:
        from codemodekit.observe.metrics import CONTENT_TYPE

        if scope.get("method") not in ("GET", "HEAD"):
            return JSONResponse({"error": "method not allowed"}, status_code=405)
        assert self.metrics is not None
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)


class _Endpoint:
    def __init__(self, respond: Callable[[Scope], Any]) -> None:
        self._respond = respond

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self._respond(scope)
        await response(scope, receive, send)


__all__ = ["HEALTH_PATH", "METRICS_PATH", "READY_PATH", "Operations"]
