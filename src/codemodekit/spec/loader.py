"""``load_spec(path) -> Spec``: TOML → raw models → checks → the frozen ``Spec``.

Every problem becomes a located ``SpecIssue``; all of them are raised together as one
``SpecError`` so a user fixes a file in one pass. Nothing here reads the environment:
``${VAR}`` values stay ``SecretTemplate``s until a source connects.
"""

from __future__ import annotations

import ast
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from codemodekit.bounded_read import UnreadableFile, read_bounded
from codemodekit.limits import Limits
from codemodekit.runtime import RuntimeOptions
from codemodekit.spec.errors import SourceText, SpecError, SpecIssue, format_key
from codemodekit.spec.messages import describe_error, drop_shadowed_missing
from codemodekit.spec.model import (
    McpHttpSource,
    McpStdioSource,
    OpenApiSource,
    PolicyRule,
    PolicySpec,
    PythonSource,
    SecretTemplate,
    SourceSpec,
    Spec,
)
from codemodekit.spec.plugin import PluginProblem, plugin_sources
from codemodekit.spec.positions import KeyPath, Positions, parse_dotted_key, scan_positions
from codemodekit.spec.raw import (
    RawMcpSource,
    RawOpenApiSource,
    RawPluginSource,
    RawPythonSource,
    RawSpec,
)

MAX_SPEC_BYTES = 4 * 1024 * 1024
"""A longer ``codemode.toml`` is refused (a link to ``/dev/zero`` must not exhaust memory)."""
_TOML_POSITION = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")
_DECLARED_TWICE = re.compile(r"^Cannot declare (\(.*\)) twice$")
_HEADER = re.compile(r"^\s*\[\[?\s*(.+?)\s*\]\]?\s*(?:#.*)?$")


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read ``codemode.toml`` at ``path``; raise ``SpecError`` naming file, line and key."""
    file = Path(path)
    try:
        text = read_bounded(file, MAX_SPEC_BYTES).decode("utf-8-sig")
    except UnreadableFile as exc:
        if exc.missing:
            message = "file not found (create one with `codemode init`)"
        else:
            message = f"cannot read: the file {exc.reason}"
        raise SpecError(path, [SpecIssue(0, 0, "", message)]) from None
    except UnicodeDecodeError as exc:
        raise SpecError(
            path, [SpecIssue(0, 0, "", f"not UTF-8 text (byte {exc.start}); save it as UTF-8")]
        ) from None
    return parse_spec(text, file=path)


def parse_spec(text: str, *, file: str | os.PathLike[str] = "codemode.toml") -> Spec:
    """Parse spec ``text`` as if read from ``file`` (relative paths resolve beside it)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        source = SourceText(text, _scan(text))
        raise SpecError(file, [_syntax_issue(str(exc), text, source)]) from None
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively.
        raise SpecError(file, [_too_deep(text)]) from None
    try:
        raw = RawSpec.model_validate(data)
    except ValidationError as exc:
        # Positions are only needed to report problems: scan the text only then.
        source = SourceText(text, _scan(text))
        issues = [_describe(error, source) for error in drop_shadowed_missing(exc.errors())]
        raise SpecError(file, _ordered(issues)) from None
    locate = lambda: SourceText(text, _scan(text))  # noqa: E731
    issues = _cross_field_issues(raw, locate)
    if issues:
        raise SpecError(file, _ordered(issues))
    return _resolve(raw, Path(os.path.abspath(file)), locate, file)


def _describe(error: ErrorDetails, source: SourceText) -> SpecIssue:
    try:
        return describe_error(error, source)
    except Exception:  # an error shape the rewriter does not know: pydantic's own words
        return source.issue(tuple(error["loc"]), error["msg"])


def _scan(text: str) -> Positions:
    # Positions only decorate an error; a scanner bug must never replace the real report.
    try:
        return scan_positions(text)
    except Exception:
        return Positions()


def _ordered(issues: list[SpecIssue]) -> list[SpecIssue]:
    return sorted(issues, key=lambda issue: (issue.line, issue.column))


# --- TOML syntax errors -----------------------------------------------------------------


def _too_deep(text: str) -> SpecIssue:
    """Point at the first bracket past a depth no spec needs (strings are skipped)."""
    depth = 0
    quote = ""
    for number, line in enumerate(text.splitlines(), start=1):
        for index, char in enumerate(line):
            if quote:
                quote = "" if char == quote else quote
            elif char in "\"'":
                quote = char
            elif char == "#":
                break
            elif char in "[{":
                depth += 1
                if depth > MAX_NESTING:
                    return SpecIssue(
                        number,
                        index + 1,
                        "",
                        f"arrays or inline tables nest more than {MAX_NESTING} levels deep",
                    )
            elif char in "]}":
                depth = max(0, depth - 1)
        quote = ""
    return SpecIssue(1, 1, "", "arrays or inline tables nest too deeply")


MAX_NESTING = 50


def _syntax_issue(message: str, text: str, source: SourceText) -> SpecIssue:
    match = _TOML_POSITION.search(message)
    lines = text.splitlines() or [""]
    if match is None:
        line, column = 1, 1
    elif match.group(1) is None:  # "at end of document": point after the last content
        line = max(1, len(lines))
        column = len(lines[line - 1]) + 1
    else:
        line, column = int(match.group(1)), int(match.group(2))
    detail = message[: match.start()] if match else message
    current = lines[line - 1] if line <= len(lines) else ""
    indent = len(current) - len(current.lstrip())

    declared = _DECLARED_TWICE.match(detail)
    twice: tuple[str, ...] | None = None
    if declared:
        try:
            twice = tuple(str(part) for part in ast.literal_eval(declared.group(1)))
        except (ValueError, SyntaxError, TypeError):
            twice = None
    elif detail == "Cannot overwrite a value":
        twice = _assigned_key(lines, line)
    if twice is not None:
        first = source.positions.key(twice)
        where = f" (first on line {first.line})" if first is not None and first.line < line else ""
        return source.at(
            line,
            indent + 1,
            len(current.strip()),
            format_key(twice),
            f"defined twice{where}; TOML allows each key and table once: merge the two",
        )
    if detail == "Illegal character '\\n'" and current.count('"') % 2 == 1:
        detail = (
            'unterminated string: close the "..." on the same line '
            '(use """...""" for text over several lines)'
        )
    elif detail.startswith("Duplicate inline table key"):
        detail = "a key is set twice in this inline table"
    elif detail:
        detail = detail[0].lower() + detail[1:]
    return source.at(line, column, 1, "", detail)


def _assigned_key(lines: list[str], line: int) -> tuple[str, ...] | None:
    """The full key path of a ``key = value`` (or ``[key]``) line that redefines a key."""
    current = lines[line - 1].strip() if line <= len(lines) else ""
    header = _HEADER.match(current)
    if header:
        return parse_dotted_key(header.group(1))
    if "=" not in current:
        return None
    key = parse_dotted_key(current.split("=", 1)[0])
    for previous in reversed(lines[: line - 1]):
        found = _HEADER.match(previous.strip())
        if found:
            return parse_dotted_key(found.group(1)) + key
    return key


# --- checks across fields ---------------------------------------------------------------


def _cross_field_issues(raw: RawSpec, locate: Callable[[], SourceText]) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    cached: list[SourceText] = []

    def source() -> SourceText:
        if not cached:
            cached.append(locate())
        return cached[0]

    for name, item in raw.sources.items():
        base: KeyPath = ("sources", name)
        if isinstance(item, RawMcpSource):
            issues.extend(_mcp_issues(base, item, source))
        elif isinstance(item, RawOpenApiSource):
            auth = item.auth
            if item.base_url is None and auth.model_fields_set:
                # The document is input (SECURITY.md): its `servers` must not choose where a
                # credential goes.
                issues.append(
                    source().issue(
                        (*base, "auth"),
                        "`auth` needs `base_url`: a credential is sent only to a server this "
                        "file names, never to one the OpenAPI document chooses; add, for "
                        'example, `base_url = "https://api.example.com"`',
                        anchor="key",
                    )
                )
            for present, absent in (("username", "password"), ("password", "username")):
                if getattr(auth, present) is not None and getattr(auth, absent) is None:
                    issues.append(
                        source().issue(
                            (*base, "auth", present),
                            f"`{present}` needs `{absent}` too (HTTP basic authentication)",
                            anchor="key",
                        )
                    )
    return issues


_STDIO_ONLY = ("args", "env", "cwd")
_HTTP_ONLY = ("transport", "headers")


def _mcp_issues(
    base: KeyPath, item: RawMcpSource, source: Callable[[], SourceText]
) -> list[SpecIssue]:
    given = item.model_fields_set
    if item.command is not None and item.url is not None:
        return [
            source().issue(
                (*base, "url"),
                "set either `command` (a stdio server) or `url` (an HTTP server), not both",
                anchor="key",
            )
        ]
    if item.command is None and item.url is None:
        return [
            source().issue(
                base,
                "an mcp source needs `command` (a stdio server, e.g. "
                '`command = "github-mcp-server"`) or `url` (an HTTP server)',
                anchor="key",
            )
        ]
    wrong, kind, uses = (
        (_HTTP_ONLY, "HTTP servers (`url`)", "`command`")
        if item.command is not None
        else (_STDIO_ONLY, "stdio servers (`command`)", "`url`")
    )
    return [
        source().issue(
            (*base, key),
            f"`{key}` applies only to {kind}; this source uses {uses}",
            anchor="key",
        )
        for key in wrong
        if key in given
    ]


# --- raw → frozen -----------------------------------------------------------------------


def _resolve(
    raw: RawSpec,
    file: Path,
    locate: Callable[[], SourceText],
    shown: str | os.PathLike[str],
) -> Spec:
    root = file.parent
    sources: dict[str, SourceSpec] = {}
    issues: list[SpecIssue] = []
    for name, item in raw.sources.items():
        if not isinstance(item, RawPluginSource):
            sources[name] = _source(name, item, root)
            continue
        try:
            expanded = plugin_sources(
                name,
                _path(root, item.path),
                root,
                timeout_ms=item.timeout_ms,
                trust_annotations=item.trust_annotations,
            )
        except PluginProblem as exc:
            issues.append(locate().issue(("sources", name, "path"), str(exc)))
            continue
        for source_name, source in expanded.items():
            if (source_name in raw.sources and source_name != name) or source_name in sources:
                issues.append(
                    locate().issue(
                        ("sources", name, "path"),
                        f"the plugin's server makes a source {source_name!r}, a name "
                        "already taken: rename one of the two tables",
                    )
                )
            sources[source_name] = source
    if issues:
        raise SpecError(shown, _ordered(issues))
    return Spec(
        path=file,
        version=raw.version,
        name=raw.name,
        limits=Limits(**cast(BaseModel, raw.limits).model_dump()),
        runtime=RuntimeOptions(**cast(BaseModel, raw.runtime).model_dump()),
        policy=PolicySpec(
            default=raw.policy.default,
            rules=tuple(
                PolicyRule(tools=r.tools, decision=r.decision, read_only=r.read_only)
                for r in raw.policy.rules
            ),
        ),
        sources=MappingProxyType(sources),
    )


def _source(
    name: str, item: RawMcpSource | RawOpenApiSource | RawPythonSource, root: Path
) -> SourceSpec:
    if isinstance(item, RawMcpSource):
        if item.command is not None:
            return McpStdioSource(
                name=name,
                command=item.command,
                args=tuple(item.args),
                env=_secrets(name, "env", item.env),
                # Not the caller's folder: a client may start `serve -c /abs/codemode.toml` anywhere.
                cwd=root if item.cwd is None else _path(root, item.cwd),
                timeout_ms=item.timeout_ms,
                trust_annotations=item.trust_annotations,
                description=item.description,
            )
        assert item.url is not None  # checked by _mcp_issues
        return McpHttpSource(
            name=name,
            url=item.url,
            transport=item.transport,
            headers=_secrets(name, "headers", item.headers),
            timeout_ms=item.timeout_ms,
            trust_annotations=item.trust_annotations,
            description=item.description,
        )
    if isinstance(item, RawOpenApiSource):
        auth = {k: v for k, v in item.auth.model_dump().items() if v is not None}
        return OpenApiSource(
            name=name,
            document=_path(root, item.document),
            base_url=item.base_url,
            auth=_secrets(name, "auth", auth),
            include=tuple(item.include),
            exclude=tuple(item.exclude),
            timeout_ms=item.timeout_ms,
            trust_annotations=item.trust_annotations,
            description=item.description,
        )
    return PythonSource(
        name=name,
        module=item.module,
        path=tuple(_path(root, p) for p in item.path),
        trust_annotations=item.trust_annotations,
        description=item.description,
    )


def _secrets(name: str, table: str, values: Mapping[str, Any]) -> Mapping[str, SecretTemplate]:
    return MappingProxyType(
        {
            key: SecretTemplate(str(value), key=format_key(("sources", name, table, key)))
            for key, value in values.items()
        }
    )


def _path(root: Path, value: str) -> Path:
    path = Path(value)
    return Path(os.path.normpath(path if path.is_absolute() else root / path))
