"""Credentials: placement per scheme, selection per requirement, fail-closed, no leaks."""

from __future__ import annotations

import base64
import logging
from urllib.parse import quote

import pytest

from codemodekit.errors import ToolError
from codemodekit.providers.base import Discovery
from codemodekit.providers.openapi import OpenApiToolProvider
from tests.providers.openapi.conftest import context, make_provider, started
from tests.providers.openapi.server import ServerThread

KEY = "k3y-S3cret/+="
TOKEN = "tok-Very-Secret"
PASSWORD = "pa55-w0rd!"
AUTH = {"api_key": "${API_KEY}", "bearer": "${TOKEN}", "username": "alice", "password": "${PW}"}
ENV = {"API_KEY": KEY, "TOKEN": TOKEN, "PW": PASSWORD}


async def secured(
    server: ServerThread, auth: dict[str, str] = AUTH
) -> tuple[OpenApiToolProvider, Discovery]:
    provider = make_provider("secure.yaml", base_url=server.url, auth=auth, environ=ENV)
    return provider, await started(provider)


async def test_placements(server: ServerThread) -> None:
    provider, _ = await secured(server)
    try:
        await provider.call_tool("headerKey", {}, context())
        assert server.app.last.header("x-api-key") == KEY
        await provider.call_tool("queryKey", {"other": "1"}, context())
        assert server.app.last.query == "other=1&api_key=k3y-S3cret%2F%2B%3D"
        await provider.call_tool("cookieKey", {}, context())
        assert server.app.last.header("cookie") == "token=k3y-S3cret%2F%2B%3D"
        await provider.call_tool("bearer", {}, context())
        assert server.app.last.header("authorization") == f"Bearer {TOKEN}"
        await provider.call_tool("oauth", {}, context())
        assert server.app.last.header("authorization") == f"Bearer {TOKEN}"
        await provider.call_tool("basic", {}, context())
        expected = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
        assert server.app.last.header("authorization") == f"Basic {expected}"
        await provider.call_tool("public", {}, context())
        assert server.app.last.header("authorization") is None
        assert server.app.last.header("x-api-key") is None
    finally:
        await provider.aclose()


async def test_credential_parameter_is_not_model_input(server: ServerThread) -> None:
    _, discovery = await secured(server)
    tool = next(t for t in discovery.tools if t.name == "queryKey")
    assert list(tool.input_schema["properties"]) == ["other"]


async def test_first_satisfiable_alternative_or_anonymous(server: ServerThread) -> None:
    provider, _ = await secured(server, auth={"api_key": "${API_KEY}"})
    try:
        # [{mtls}, {basicAuth}, {}]: neither credential is available, {} allows anonymous.
        await provider.call_tool("either", {}, context())
        assert server.app.last.header("authorization") is None
    finally:
        await provider.aclose()


ALL_SUPPORTED = {
    "headerKey",
    "queryKey",
    "cookieKey",
    "bearer",
    "oauth",
    "basic",
    "either",
    "public",
    "status",
}


async def test_unsupported_or_malformed_security_is_skipped_with_reasons(
    server: ServerThread,
) -> None:
    provider, discovery = await secured(server, auth={"api_key": "${API_KEY}"})
    await provider.aclose()
    reasons = {s.name: s.reason for s in discovery.skipped}
    assert "'mtls' (mutualTLS) is not supported" in reasons["mtls"]
    assert "'digestAuth' uses HTTP scheme 'digest'" in reasons["digest"]
    assert reasons["undeclared"].endswith("scheme 'nope' is required but not declared")
    assert "'#/components/securitySchemes/missing' does not exist" in reasons["malformed"]
    assert {t.name for t in discovery.tools} == ALL_SUPPORTED


@pytest.mark.parametrize(
    ("auth", "environ"),
    [
        ({}, {}),
        ({"api_key": "${API_KEY}"}, {}),
        ({"api_key": "${API_KEY}"}, {"API_KEY": KEY}),
        (AUTH, {}),
        (AUTH, ENV),
        (AUTH, {"TOKEN": TOKEN}),
    ],
    ids=["no-auth", "configured-unset", "api-key", "all-unset", "all-set", "token-only"],
)
async def test_the_tool_list_never_depends_on_credentials(
    server: ServerThread, auth: dict[str, str], environ: dict[str, str]
) -> None:
    provider = make_provider("secure.yaml", base_url=server.url, auth=auth, environ=environ)
    discovery = await started(provider)
    try:
        assert {t.name for t in discovery.tools} == ALL_SUPPORTED
        assert provider.health().status == "ok"
    finally:
        await provider.aclose()


async def test_a_call_without_its_credentials_fails_clearly_and_sends_nothing(
    server: ServerThread,
) -> None:
    provider, _ = await secured(server, auth={"api_key": "${API_KEY}"})
    before = len(server.app.requests)
    try:
        with pytest.raises(ToolError) as caught:
            await provider.call_tool("bearer", {}, context())
        assert caught.value.message == (
            "GET /bearer was not called: it needs credentials that are not available: "
            "'bearerAuth' (HTTP bearer) needs auth.bearer, which the source's auth does "
            "not configure"
        )
        assert len(server.app.requests) == before  # nothing was sent
        with pytest.raises(ToolError, match=r"'oauth' \(oauth2, a token\) needs auth\.bearer"):
            await provider.call_tool("oauth", {}, context())
    finally:
        await provider.aclose()


async def test_missing_variable_names_the_variable_at_call_time(server: ServerThread) -> None:
    provider = make_provider("secure.yaml", base_url=server.url, auth={"bearer": "${NOPE}"})
    await started(provider)
    try:
        assert provider.health().status == "ok"
        with pytest.raises(ToolError) as caught:
            await provider.call_tool("bearer", {}, context())
        assert "sources.api.auth.bearer: environment variable NOPE is not set" in (
            caught.value.message
        )
        await provider.call_tool("public", {}, context())  # what needs nothing still works
    finally:
        await provider.aclose()


async def test_credentials_never_leak(
    server: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider, discovery = await secured(server)
    secrets = [
        KEY,
        quote(KEY, safe=""),
        TOKEN,
        PASSWORD,
        base64.b64encode(f"alice:{PASSWORD}".encode()).decode(),
    ]
    try:
        # The error body echoes every request header and the query (with the key).
        with pytest.raises(ToolError) as caught:
            await provider.call_tool("status", {"code": 401}, context())
        error = caught.value
        assert error.code == "401"
        assert error.message.startswith("GET /status/{code} failed: HTTP 401 Unauthorized: {")
        # A 200 echo is scrubbed as well: the sandbox never receives a credential.
        ok = await provider.call_tool("headerKey", {}, context())
        await provider.call_tool("queryKey", {}, context())  # httpx logs the URL at INFO
        visible = [
            repr(discovery),
            repr(provider),
            repr(provider.health()),
            error.message,
            str(error.cause),
            repr(ok),
            caplog.text,
        ]
        for text in visible:
            for secret in secrets:
                assert secret not in text
        assert ok.structured_content["headers"]["x-api-key"] == "***"
    finally:
        await provider.aclose()
