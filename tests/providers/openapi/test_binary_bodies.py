"""Issue 13, item 5: OpenAPI ``application/octet-stream`` and ``multipart/form-data``
operations are callable with the tagged ``{ $bytes, mediaType }`` shape, end to end against
a real HTTP server on 127.0.0.1; a 429's Retry-After reaches code that catches it."""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
from pathlib import Path
from typing import Any

from codemodekit import CodeMode, ErrorCode, allow_all_tool_calls
from tests.providers.openapi.conftest import make_provider
from tests.providers.openapi.server import ServerThread

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "files", "version": "1"},
    "paths": {
        "/upload/{name}": {
            "put": {
                "operationId": "putFile",
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        }
                    },
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/photo": {
            "post": {
                "operationId": "postPhoto",
                "requestBody": {"content": {"image/png": {}}},
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/form": {
            "post": {
                "operationId": "submitForm",
                "requestBody": {
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "title": {"type": "string"},
                                    "count": {"type": "integer"},
                                    "meta": {"type": "object"},
                                    "file": {"type": "string", "format": "binary"},
                                    "more": {
                                        "type": "array",
                                        "items": {"type": "string", "format": "binary"},
                                    },
                                },
                                "required": ["file"],
                            }
                        }
                    }
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
    },
}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _code_mode(server: ServerThread, tmp_path: Path) -> CodeMode:
    path = tmp_path / "files.json"
    path.write_text(json.dumps(DOCUMENT))
    provider = make_provider(path, base_url=server.url, name="files")
    return CodeMode(sources=[provider], policy=allow_all_tool_calls())


async def test_octet_stream_and_image_bodies_send_the_raw_bytes(
    server: ServerThread, tmp_path: Path
) -> None:
    payload = bytes(range(256))
    async with await _code_mode(server, tmp_path) as cm:
        assert not cm.catalog.skipped
        r = await cm.run(
            f"await tools.files.putFile({{ name: 'a.bin', body: {{ $bytes: '{_b64(payload)}' }} }});\n"
            "await tools.files.postPhoto({ body: { $bytes: 'iVBORw==', mediaType: 'image/png' } });\n"
            "return 1;"
        )
        assert r.ok, r.diagnostic
        put, photo = server.app.requests[-2:]
        assert put.method == "PUT" and put.body == payload
        assert put.header("content-type") == "application/octet-stream"
        assert photo.body == base64.b64decode("iVBORw==")
        assert photo.header("content-type") == "image/png"

        bad = await cm.run("return await tools.files.putFile({ name: 'x', body: 'raw text' });")
        assert bad.diagnostic is not None
        assert bad.diagnostic.code is ErrorCode.TOOL_INPUT_INVALID


async def test_multipart_form_sends_files_and_fields(server: ServerThread, tmp_path: Path) -> None:
    async with await _code_mode(server, tmp_path) as cm:
        r = await cm.run(
            "return (await tools.files.submitForm({ body: {\n"
            "  title: 'report', count: 3, meta: { a: 1 },\n"
            f"  file: {{ $bytes: '{_b64(b'%PDF-1.7 data')}', mediaType: 'application/pdf' }},\n"
            "  more: [{ $bytes: 'AAE=' }, { $bytes: 'AgM=' }],\n"
            "} })).structuredContent.method;"
        )
        assert r.ok, r.diagnostic
        sent = server.app.last
        content_type = sent.header("content-type") or ""
        assert content_type.startswith("multipart/form-data; boundary=")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + sent.body
        )
        parts = [
            (
                p.get_param("name", header="content-disposition"),
                p.get_content_type(),
                p.get_payload(decode=True),
            )
            for p in message.iter_parts()
        ]
        assert parts == [
            ("title", "text/plain", b"report"),
            ("count", "text/plain", b"3"),
            ("meta", "application/json", b'{"a":1}'),
            ("file", "application/pdf", b"%PDF-1.7 data"),
            ("more", "application/octet-stream", b"\x00\x01"),
            ("more", "application/octet-stream", b"\x02\x03"),
        ]


async def test_a_header_injection_through_media_type_is_refused(
    server: ServerThread, tmp_path: Path
) -> None:
    async with await _code_mode(server, tmp_path) as cm:
        before = len(server.app.requests)
        r = await cm.run(
            "return await tools.files.postPhoto({ body: { $bytes: 'AA==', "
            "mediaType: 'image/png\\r\\nX-Evil: 1' } });"
        )
        assert r.diagnostic is not None
        # The value passes the input schema (a string of at most 255 characters); the
        # provider refuses it: a ToolError, TOOL_ERROR (docs/api.md), naming the field.
        assert r.diagnostic.code == ErrorCode.TOOL_ERROR
        assert "`mediaType` must be a media type" in r.diagnostic.message
        assert len(server.app.requests) == before  # nothing was sent
