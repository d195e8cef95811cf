"""Sending one planned operation with httpx and turning the reply into a ``ToolOutput``.

Bounded by construction: the body is read as a stream and abandoned past
``CallContext.max_result_bytes`` (decoded bytes, so a compressed bomb is caught too);
redirects are followed by hand, at most ``MAX_REDIRECTS`` times and only to the base
URL's own scheme, host and port; cookies are never stored between calls; proxies and
``.netrc`` from the environment are ignored (``trust_env=False``). Every transport,
decoding and HTTP failure becomes a ``ToolError`` whose text was scrubbed of credentials.
"""

from __future__ import annotations

import base64
import contextlib
import http.cookiejar
import json
import logging
import re
import unicodedata
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote, urljoin

import httpx

from codemodekit.errors import ToolError
from codemodekit.nesting import NESTING_HINT
from codemodekit.providers.base import CallContext, ResultInvalid, ResultTooLarge, ToolOutput
from codemodekit.providers.openapi.bodies import body_request
from codemodekit.providers.openapi.operations import OperationPlan, origin_of
from codemodekit.providers.openapi.parameters import Wire, serialize
from codemodekit.providers.openapi.security import Credentials, MissingCredentials
from codemodekit.scrub import Scrubber

MAX_REDIRECTS = 3
MAX_EXCERPT = 500
USER_AGENT = "codemodekit-openapi"
_PATH_SAFE = "/:@!$&'()*+,;=%"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES = (
    "application/xml",
    "application/javascript",
    "application/x-www-form-urlencoded",
    "application/yaml",
    "application/x-yaml",
    "application/graphql",
)


def make_client(timeout_s: float, transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
    # A cookie policy that accepts nothing: no state leaks from one call into another.
    jar = http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s),
        follow_redirects=False,
        trust_env=False,
        cookies=jar,
        transport=transport,
        headers={"User-Agent": USER_AGENT},
    )


class _HttpxLogScrubber(logging.Filter):
    """httpx logs every request URL at INFO; a query-placed API key must not reach a log.

    One filter on the ``httpx`` logger consults the scrubbers of the running providers.
    """

    def __init__(self) -> None:
        super().__init__()
        self.active: list[Scrubber] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self.active:
            text = record.getMessage()
            for scrub in list(self.active):
                text = scrub(text)
            record.msg, record.args = text, ()
        return True


_HTTPX_FILTER = _HttpxLogScrubber()
logging.getLogger("httpx").addFilter(_HTTPX_FILTER)


def watch_logs(scrub: Scrubber) -> None:
    if scrub not in _HTTPX_FILTER.active:
        _HTTPX_FILTER.active.append(scrub)


def unwatch_logs(scrub: Scrubber) -> None:
    if scrub in _HTTPX_FILTER.active:
        _HTTPX_FILTER.active.remove(scrub)


def build_request(
    client: httpx.AsyncClient,
    plan: OperationPlan,
    base_url: str,
    arguments: Mapping[str, Any],
    credentials: Credentials,
) -> httpx.Request:
    wire = Wire(path_values={}, query=[], headers=[], cookies=[])
    for param in plan.params:
        if param.key not in arguments or arguments[param.key] is None:
            continue
        serialize(param, arguments[param.key], wire)
    try:
        credentials.apply(plan.security, wire)
    except MissingCredentials as exc:
        raise ToolError(
            f"{plan.method} {plan.path} was not called: it needs credentials that are not "
            f"available: {exc}"
        ) from None
    path = _expand_path(plan, wire.path_values)
    url = (plan.server or base_url) + path
    if wire.query:
        url += ("&" if "?" in url else "?") + "&".join(wire.query)
    headers: list[tuple[str, str]] = list(wire.headers)
    if plan.accept:
        headers.append(("Accept", plan.accept))
    if wire.cookies:
        headers.append(("Cookie", "; ".join(wire.cookies)))
    content: bytes | None = None
    if plan.body is not None and arguments.get(plan.body.key) is not None:
        content, media = body_request(plan.body, arguments[plan.body.key])
        headers.append(("Content-Type", media))
    try:
        return client.build_request(plan.method, url, headers=headers, content=content)
    except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
        raise ToolError(
            f"{plan.method} {plan.path}: the arguments do not form a valid request "
            f"({type(exc).__name__})"
        ) from None


def _expand_path(plan: OperationPlan, values: Mapping[str, str]) -> str:
    out: list[str] = []
    for index, part in enumerate(re.split(r"\{([^{}]+)\}", plan.path)):
        if index % 2:
            if part not in values:
                raise ToolError(f"{plan.method} {plan.path}: path parameter {part!r} is missing")
            if values[part] == "":
                raise ToolError(
                    f"{plan.method} {plan.path}: path parameter {part!r} is empty; an empty "
                    "value would change which path is requested"
                )
            out.append(values[part])
        else:
            # Literal template text is sent as written; only characters that cannot
            # appear in a path (``#``, ``?``, spaces...) are percent-encoded.
            out.append(quote(part, safe=_PATH_SAFE))
    path = "".join(out)
    for segment in path.split("/"):
        if _normalizes_away(segment):
            raise ToolError(
                f"{plan.method} {plan.path}: a path parameter value would change which path "
                f"is requested (the segment {segment[:40]!r} is a dot segment once decoded); "
                "refused"
            )
    return path


def _normalizes_away(segment: str) -> bool:
    """True when a segment is, or decodes to, a ``.``/``..`` step some hop may collapse.

    The client collapses literal dot segments (RFC 3986 5.2.4); a normalizing proxy or
    server also decodes ``%2E`` (6.2.2.2), may decode twice, split on ``%2F`` or ``\\``,
    or fold Unicode compatibility dots (NFKC). Values that could become a dot step under
    any of these are refused rather than sent.
    """
    seen = segment
    for _ in range(4):
        folded = unicodedata.normalize("NFKC", seen)
        for text in (seen, folded):
            if any(part in (".", "..") for part in re.split(r"[/\\]", text)):
                return True
        decoded = unquote(seen)
        if decoded == seen:
            return False
        seen = decoded
    return False


async def send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    plan: OperationPlan,
    base_url: str,
    context: CallContext,
    scrub: Scrubber,
) -> ToolOutput:
    label = f"{plan.method} {plan.path}"
    timeout = httpx.Timeout(context.timeout_s)
    request.extensions["timeout"] = timeout.as_dict()
    allowed = origin_of(base_url)
    try:
        for _hop in range(MAX_REDIRECTS + 1):
            response = await client.send(request, stream=True)
            try:
                location = response.headers.get("location")
                if response.status_code not in _REDIRECTS or location is None:
                    return await _finish(response, label, context, scrub)
            finally:
                await response.aclose()
            target = urljoin(str(request.url), location)
            if origin_of(target) != allowed:
                raise ToolError(
                    f"{label}: refused a redirect to another host (HTTP {response.status_code})"
                )
            request = _redirected(client, request, response.status_code, target)
            request.extensions["timeout"] = timeout.as_dict()
        raise ToolError(f"{label}: more than {MAX_REDIRECTS} redirects")
    except httpx.TimeoutException:
        raise ToolError(f"{label}: the API did not answer within {context.timeout_s:g}s") from None
    except httpx.HTTPError as exc:
        reason = scrub(f"{type(exc).__name__}: {exc}")
        raise ToolError(
            f"{label}: the request failed ({type(exc).__name__})", cause=reason
        ) from None


def _redirected(
    client: httpx.AsyncClient, request: httpx.Request, status: int, target: str
) -> httpx.Request:
    method, content = request.method, request.content
    headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "host"]
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, content = "GET", b""
        headers = [
            (k, v)
            for k, v in headers
            if k.lower() not in ("content-type", "content-length", "transfer-encoding")
        ]
    return client.build_request(method, target, headers=headers, content=content or None)


async def _read_bounded(response: httpx.Response, limit: int) -> bytes:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ResultTooLarge(limit)
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if total > limit:
            raise ResultTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_prefix(response: httpx.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of the body; the rest is never read (error excerpts)."""
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk[: limit - total])
        total += len(chunks[-1])
        if total >= limit:
            break
    return b"".join(chunks)


def _media(response: httpx.Response) -> tuple[str, str | None]:
    raw = response.headers.get("content-type", "")
    media = raw.split(";", 1)[0].strip().lower()
    match = re.search(r"charset=\"?([A-Za-z0-9_.:-]+)", raw, re.IGNORECASE)
    return media, match.group(1) if match else None


def _text(data: bytes, charset: str | None) -> str:
    try:
        return data.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


MAX_REASON = 100
"""Most characters of an HTTP reason phrase shown."""
_RETRY_AFTER = re.compile(r"\d{1,10}|[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT")


def _one_line(text: str, limit: int) -> str:
    """An upstream's (scrubbed) text as shown in an error: control characters and runs of
    spaces made one space, cut to ``limit`` with ``…``."""
    text = re.sub(r" {2,}", " ", re.sub(r"[\x00-\x1f\x7f]+", " ", text)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_text(media: str) -> bool:
    return media.startswith("text/") or media in _TEXT_TYPES or media.endswith("+xml")


async def _finish(
    response: httpx.Response, label: str, context: CallContext, scrub: Scrubber
) -> ToolOutput:
    if not 200 <= response.status_code < 300:
        await _raise_status(response, label, context, scrub)
    data = await _read_bounded(response, context.max_result_bytes)
    media, charset = _media(response)
    if not data:
        return ToolOutput()
    if _is_json(media):
        try:
            value = json.loads(_text(data, charset))
        except ValueError:
            raise ToolError(f"{label}: the API sent invalid JSON") from None
        except RecursionError:
            raise ResultInvalid(f"{label}: the API's JSON {NESTING_HINT}") from None
        return ToolOutput(structured_content=scrub.value(value))
    if _is_text(media):
        return ToolOutput(content=({"type": "text", "text": scrub(_text(data, charset))},))
    if not media:
        try:
            return ToolOutput(content=({"type": "text", "text": scrub(data.decode("utf-8"))},))
        except UnicodeDecodeError:
            media = "application/octet-stream"
    # Bytes are scrubbed too: a body of any type may echo a credential (raw, or in any
    # encoding the scrubber knows), and base64 would only hide it from a reader, not from
    # the model. Byte for byte as Latin-1, so the rest of the data is unchanged; then the
    # base64 text itself, for a secret that is not Latin-1.
    encoded = scrub(base64.b64encode(scrub(data.decode("latin-1")).encode("latin-1")).decode())
    if media.startswith(("image/", "audio/")):
        return ToolOutput(
            content=({"type": media.split("/")[0], "mimeType": media, "data": encoded},)
        )
    # The path may be the upstream's choice (a redirect on the same origin), in any
    # encoding: shown decoded, so that the scrubber sees what it encodes.
    uri = scrub(unquote(str(response.request.url.copy_with(query=None, fragment=None))))
    return ToolOutput(
        content=(
            {"type": "resource", "resource": {"uri": uri, "mimeType": media, "blob": encoded}},
        )
    )


async def _raise_status(
    response: httpx.Response, label: str, context: CallContext, scrub: Scrubber
) -> None:
    status = response.status_code
    # The reason phrase is the upstream's text like the body: scrubbed, one line, bounded.
    reason = _one_line(scrub(response.reason_phrase or ""), MAX_REASON)
    excerpt = ""
    bound = min(context.max_result_bytes, 16 * 1024)
    try:
        data = await _read_prefix(response, bound)
    except httpx.HTTPError:
        data = b""
    if data:
        media, charset = _media(response)
        # Scrub before anything is cut; the read bound may itself have cut through a secret.
        text = scrub.mask_edges(scrub(_text(data, charset)), end=len(data) >= bound)
        if _is_json(media):
            with contextlib.suppress(ValueError, RecursionError):
                value = scrub.value(json.loads(text))  # strings decoded: escapes are gone
                text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if media == "text/html":
            # Tags, comments, scripts and a tag cut open by the prefix bound go.
            text = re.sub(
                r"(?is)<(script|style)\b.*?</\1>|<!--.*?(?:-->|\Z)|<[^>]*(?:>|\Z)", " ", text
            )
        if _is_json(media) or _is_text(media) or not media:
            excerpt = _one_line(scrub(text), MAX_EXCERPT)
    message = f"{label} failed: HTTP {status}{(' ' + reason) if reason else ''}"
    if excerpt:
        message += f": {excerpt}"
    # Retry-After lets code that catches a 429/503 wait the right time.
    # Only in one of the two forms the header has (seconds, or an HTTP date): any other
    # value is the upstream's free text, which may carry anything.
    retry_after = response.headers.get("retry-after", "").strip()
    details = {"retry_after": retry_after} if _RETRY_AFTER.fullmatch(retry_after) else None
    raise ToolError(message, code=str(status), details=details)
