"""``codemode serve``'s operator flags: stateless HTTP, health, metrics, tracing, audit, drain.

Kept apart from ``cmd_serve`` (which owns transports and the lifecycle): this module reads
and checks the flags and builds the observers and ``Operations`` they ask for.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codemodekit.cli.common import CliExit
from codemodekit.server.http_limits import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_SESSIONS_PER_CLIENT,
    HttpLimits,
)

if TYPE_CHECKING:
    from codemodekit.observe import RunObserver
    from codemodekit.run import CodeMode
    from codemodekit.server.operations import Operations

DEFAULT_DRAIN_S = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("operations (HTTP)")
    group.add_argument(
        "--stateless",
        action="store_true",
        help="stateless Streamable HTTP: no sessions, so any replica behind a load balancer "
        "can answer any request (progress and cancellation work within a request; nothing "
        "is sent between requests)",
    )
    group.add_argument(
        "--public-health",
        action="store_true",
        help="answer /healthz and /readyz without the bearer token (for probes)",
    )
    group.add_argument(
        "--drain-timeout",
        type=float,
        default=DEFAULT_DRAIN_S,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, stop listening and let requests in flight finish for up to "
        f"this long before stopping (default {DEFAULT_DRAIN_S:g}; a second signal stops at once)",
    )
    group.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT_S,
        metavar="SECONDS",
        help="close a connection whose request headers take longer than this "
        f"(default {DEFAULT_HEADER_TIMEOUT_S:g})",
    )
    group.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT_S,
        metavar="SECONDS",
        help="close a connection whose request body takes longer than this after its headers "
        f"(default {DEFAULT_BODY_TIMEOUT_S:g})",
    )
    group.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"close connections beyond N open at once (default {DEFAULT_MAX_CONNECTIONS})",
    )
    group.add_argument(
        "--max-sessions-per-client",
        type=int,
        default=DEFAULT_MAX_SESSIONS_PER_CLIENT,
        metavar="N",
        help="stateful sessions one client (authenticated principal, else address) may hold "
        f"open; one more gets 429 (default {DEFAULT_MAX_SESSIONS_PER_CLIENT})",
    )
    group.add_argument(
        "--metrics",
        action="store_true",
        help="serve Prometheus metrics at /metrics (needs codemodekit[metrics])",
    )
    group.add_argument(
        "--metrics-token-env",
        metavar="VAR",
        help="/metrics needs `Authorization: Bearer <token>` with the token from VAR "
        "(default: the same rule as MCP)",
    )
    group.add_argument(
        "--public-metrics", action="store_true", help="answer /metrics without any token"
    )
    obs = parser.add_argument_group("observability (any transport)")
    obs.add_argument(
        "--audit",
        metavar="PATH",
        help="append one JSON line per tool call and per run to PATH ('-' for stdout, HTTP only)",
    )
    obs.add_argument(
        "--audit-hash-key-env",
        metavar="VAR",
        help="hash audited arguments with HMAC-SHA256 keyed by the value of VAR "
        "(default: plain SHA-256)",
    )
    obs.add_argument(
        "--otel",
        action="store_true",
        help="emit OpenTelemetry spans (needs codemodekit[otel]); exported over OTLP/HTTP to "
        "OTEL_EXPORTER_OTLP_ENDPOINT unless a tracer provider is already installed",
    )


@dataclass
class OpsConfig:
    stateless: bool = False
    public_health: bool = False
    drain_timeout_s: float = DEFAULT_DRAIN_S
    metrics: bool = False
    metrics_token: str | None = None
    public_metrics: bool = False
    audit: str | None = None
    audit_key: bytes | None = None
    otel: bool = False
    http_limits: HttpLimits = field(default_factory=HttpLimits)
    closers: list[Any] = field(default_factory=list)


def _env_secret(var: str, flag: str) -> str:
    value = os.environ.get(var, "")
    if not value.strip():
        raise CliExit(2, f"codemode serve: environment variable {var} ({flag}) is unset or empty")
    return value


def read(args: argparse.Namespace) -> OpsConfig:
    """Check the flags (``CliExit(2, …)`` naming the fix) and return them resolved."""
    http = args.transport == "http"
    for flag, on in (
        ("--stateless", args.stateless),
        ("--public-health", args.public_health),
        ("--metrics", args.metrics),
        ("--metrics-token-env", args.metrics_token_env is not None),
        ("--public-metrics", args.public_metrics),
    ):
        if on and not http:
            raise CliExit(2, f"codemode serve: {flag} applies to --transport http only")
    if (args.metrics_token_env or args.public_metrics) and not args.metrics:
        raise CliExit(2, "codemode serve: --metrics-token-env/--public-metrics need --metrics")
    if args.metrics_token_env and args.public_metrics:
        raise CliExit(2, "codemode serve: choose --metrics-token-env or --public-metrics")
    if not args.drain_timeout >= 0:
        raise CliExit(2, f"codemode serve: --drain-timeout {args.drain_timeout} is negative")
    for flag, value in (
        ("--header-timeout", args.header_timeout),
        ("--body-timeout", args.body_timeout),
        ("--max-connections", args.max_connections),
        ("--max-sessions-per-client", args.max_sessions_per_client),
    ):
        if not value > 0:
            raise CliExit(2, f"codemode serve: {flag} {value} must be positive")
    if args.audit == "-" and not http:
        raise CliExit(
            2, "codemode serve: --audit - would write into the stdio wire; give a file path"
        )
    if args.audit_hash_key_env and not args.audit:
        raise CliExit(2, "codemode serve: --audit-hash-key-env needs --audit")
    if args.metrics:
        _require("prometheus_client", "metrics", "--metrics")
    if args.otel:
        _require("opentelemetry.sdk", "otel", "--otel")
    return OpsConfig(
        stateless=args.stateless,
        public_health=args.public_health,
        drain_timeout_s=args.drain_timeout,
        metrics=args.metrics,
        metrics_token=(
            _env_secret(args.metrics_token_env, "--metrics-token-env")
            if args.metrics_token_env
            else None
        ),
        public_metrics=args.public_metrics,
        audit=args.audit,
        audit_key=(
            _env_secret(args.audit_hash_key_env, "--audit-hash-key-env").encode()
            if args.audit_hash_key_env
            else None
        ),
        otel=args.otel,
        http_limits=HttpLimits(
            header_timeout_s=args.header_timeout,
            body_timeout_s=args.body_timeout,
            max_connections=args.max_connections,
            max_sessions_per_client=args.max_sessions_per_client,
        ),
    )


def _require(module: str, extra: str, flag: str) -> None:
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise CliExit(
            2, f"codemode serve: {flag} needs the {extra} extra: pip install 'codemodekit[{extra}]'"
        )


def observers(config: OpsConfig, service_name: str) -> list[RunObserver]:
    """The audit and tracing observers the flags ask for (metrics need the CodeMode)."""
    out: list[RunObserver] = []
    if config.otel:
        from codemodekit.observe.tracing import TracingObserver

        shutdown = _install_tracer_provider(service_name)
        if shutdown is not None:
            config.closers.append(shutdown)  # flushes spans still batched
        out.append(TracingObserver())
    if config.audit is not None:
        from codemodekit.observe.audit import AuditSink

        try:
            sink = AuditSink(config.audit, hash_key=config.audit_key)
        except OSError as exc:
            raise OSError(f"cannot open the audit file {config.audit}: {exc.strerror}") from None
        config.closers.append(sink.close)
        out.append(sink)
    return out


def _install_tracer_provider(service_name: str) -> Callable[[], None] | None:
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return None  # already configured (opentelemetry-instrument, or the host application)
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        print(
            "codemode serve: --otel: no OTLP exporter installed; spans are not exported "
            "(pip install 'codemodekit[otel]')",
            file=sys.stderr,
        )
    else:
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def operations(config: OpsConfig, code_mode: CodeMode) -> Operations:
    from codemodekit.server.operations import Operations

    metrics = None
    ops: Operations
    if config.metrics:
        from codemodekit.observe.metrics import CodeModeMetrics

        holder: list[Operations] = []
        metrics = CodeModeMetrics(code_mode, draining=lambda: bool(holder and holder[0].draining))
        code_mode.add_observer(metrics)
        ops = Operations(
            code_mode,
            metrics=metrics,
            public_health=config.public_health,
            metrics_token=config.metrics_token,
            public_metrics=config.public_metrics,
        )
        holder.append(ops)
        return ops
    return Operations(code_mode, public_health=config.public_health)


__all__ = ["OpsConfig", "add_arguments", "observers", "operations", "read"]
