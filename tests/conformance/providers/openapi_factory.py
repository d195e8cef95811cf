"""The OpenAPI provider in the conformance suite: echo/fail/slow served over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from codemodekit.limits import Limits
from codemodekit.providers.base import ToolProvider
from codemodekit.providers.openapi import OpenApiToolProvider
from codemodekit.spec.model import OpenApiSource
from tests.providers.openapi.server import ServerThread

DOCUMENT = {
    "openapi": "3.1.0",
    "info": {"title": "conformance", "version": "1"},
    "paths": {
        "/echo": {
            "get": {
                "operationId": "echo",
                "description": "Echo a message back.",
                "parameters": [
                    {
                        "name": "message",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"message": {"type": "string"}},
                                }
                            }
                        },
                    }
                },
            }
        },
        "/fail": {"get": {"operationId": "fail", "responses": {"200": {"description": "ok"}}}},
        "/slow": {
            "get": {
                "operationId": "slow",
                "parameters": [
                    {
                        "name": "seconds",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "number"},
                    }
                ],
                "responses": {"200": {"description": "ok"}},
            }
        },
    },
}


class _App:
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        status, body = 200, {}
        if scope["path"] == "/echo":
            body = {"message": query.get("message", "")}
        elif scope["path"] == "/slow":
            await asyncio.sleep(float(query.get("seconds", "0")))
            body = {"slept": float(query.get("seconds", "0"))}
        else:
            status, body = 409, {"error": "the tool refused: nothing to do"}
        data = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})


@contextlib.asynccontextmanager
async def openapi_factory(name: str) -> AsyncIterator[ToolProvider]:
    with tempfile.TemporaryDirectory() as folder, ServerThread(_App()) as server:  # type: ignore[arg-type]
        document = Path(folder) / "conformance.json"
        document.write_text(json.dumps(DOCUMENT))
        config = OpenApiSource(name=name, document=document, base_url=server.url)
        yield OpenApiToolProvider(config, limits=Limits(), environ={})
