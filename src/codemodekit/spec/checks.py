"""Checks of a loaded ``Spec`` beyond its syntax: files that must exist, variables that
must be set, policy rules that can never match. ``load_spec`` stays pure (the same file loads anywhere); ``codemode check``
runs these and points each finding at its line.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from codemodekit.bounded_read import UnreadableFile, describe_mode, read_bounded
from codemodekit.spec.errors import SourceText, SpecIssue
from codemodekit.spec.loader import MAX_SPEC_BYTES
from codemodekit.spec.model import (
    McpStdioSource,
    OpenApiSource,
    PythonSource,
    SecretTemplate,
    Spec,
)
from codemodekit.spec.positions import KeyPath, scan_positions


@dataclass(frozen=True, slots=True)
class SpecFindings:
    errors: tuple[SpecIssue, ...]
    """Problems that stop a source from working (a missing document...)."""
    warnings: tuple[SpecIssue, ...]
    """Problems of this environment that a connect would hit (an unset ``${VAR}``)."""


def _not_a_document(path: Path) -> str | None:
    """Why ``path`` cannot be read as a document (``None``: a regular file), naming what it
    is: a FIFO or a device is not "not found"."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "file not found"
    except OSError as exc:
        return f"cannot be opened ({exc.strerror or type(exc).__name__})"
    if stat.S_ISREG(mode):
        return None
    return f"{describe_mode(mode)}, not a regular file"


def check_environment(spec: Spec, environ: Mapping[str, str] | None = None) -> SpecFindings:
    """Files and environment variables the sources of ``spec`` need, located in the file."""
    env = os.environ if environ is None else environ
    errors: list[tuple[KeyPath, str]] = []
    warnings: list[tuple[KeyPath, str]] = []
    for name, source in spec.sources.items():
        base: KeyPath = ("sources", name)
        if isinstance(source, OpenApiSource):
            problem = _not_a_document(source.document)
            if problem is not None:
                errors.append(((*base, "document"), f"{problem}: {_shown(spec, source.document)}"))
        if isinstance(source, McpStdioSource) and source.cwd and not source.cwd.is_dir():
            errors.append(((*base, "cwd"), f"folder not found: {_shown(spec, source.cwd)}"))
        if isinstance(source, PythonSource):
            for index, folder in enumerate(source.path):
                if not folder.is_dir():
                    errors.append(
                        ((*base, "path", index), f"folder not found: {_shown(spec, folder)}")
                    )
        for table, values in _secret_tables(source).items():
            for key, template in values.items():
                missing = [v for v in template.variables if v not in env]
                if missing:
                    # An OpenAPI source still lists its tools; only calls needing it fail.
                    effect = (
                        "calls that need this credential fail until it is"
                        if table == "auth"
                        else "this source cannot connect until it is"
                    )
                    warnings.append(
                        (
                            (*base, table, key),
                            f"environment variable {missing[0]} is not set; {effect} "
                            f"(export {missing[0]}=...)",
                        )
                    )
    warnings.extend(_policy_warnings(spec))
    return SpecFindings(errors=locate(spec, errors), warnings=locate(spec, warnings))


def locate(spec: Spec, found: Iterable[tuple[KeyPath, str]]) -> tuple[SpecIssue, ...]:
    """``(key path, message)`` pairs as issues located in ``spec``'s file, in file order."""
    text = _read(spec.path)
    located = SourceText(text, scan_positions(text))
    issues = [located.issue(path, message) for path, message in found]
    return tuple(sorted(issues, key=lambda issue: (issue.line, issue.column)))


def unmatched_rules(spec: Spec, addresses: Iterable[str]) -> list[tuple[KeyPath, str]]:
    """Policy rules whose glob matches none of ``addresses`` (``source.tool``) of sources
    that are up; a rule about a source that is down says nothing yet."""
    known = list(addresses)
    reported = {path for path, _ in _policy_warnings(spec)}  # already said, offline
    found: list[tuple[KeyPath, str]] = []
    for index, rule in enumerate(spec.policy.rules):
        if ("policy", "rules", index, "tools") in reported:
            continue
        if not any(fnmatch.fnmatchcase(address, rule.tools) for address in known):
            found.append(
                (
                    ("policy", "rules", index, "tools"),
                    f"matches none of the {len(known)} tools of the sources that are up",
                )
            )
    return found


def inert_read_only_rules(
    spec: Spec, tools: Iterable[tuple[str, str, Mapping[str, object]]]
) -> list[tuple[KeyPath, str]]:
    """``read_only = true`` rules that can match none of ``tools`` (``(source, address,
    annotations)`` of every source, all up): a read-only rule matches a tool only when its
    own source has ``trust_annotations = true`` and the tool says ``readOnlyHint: true``.
    A rule that matches no address at all is ``unmatched_rules``' to report."""
    listed = list(tools)
    found: list[tuple[KeyPath, str]] = []
    for index, rule in enumerate(spec.policy.rules):
        if not rule.read_only:
            continue
        matched = [t for t in listed if fnmatch.fnmatchcase(t[1], rule.tools)]
        trusted = [t for t in matched if spec.sources[t[0]].trust_annotations]
        if not matched or any(t[2].get("readOnlyHint") is True for t in trusted):
            continue
        if not trusted:
            why = (
                "none of the tools it matches comes from a source with "
                "trust_annotations = true, and readOnlyHint is believed only from those"
            )
        else:
            why = "none of the tools it matches from trusted sources says readOnlyHint: true"
        found.append((("policy", "rules", index, "read_only"), f"matches nothing: {why}"))
    return found


def _policy_warnings(spec: Spec) -> list[tuple[KeyPath, str]]:
    """Rules that can never match: almost always a typo in the source part of the glob."""
    found: list[tuple[KeyPath, str]] = []
    names = list(spec.sources)
    for index, rule in enumerate(spec.policy.rules):
        path: KeyPath = ("policy", "rules", index, "tools")
        source, dot, _ = rule.tools.partition(".")
        if any(c in source for c in "*?["):
            continue
        if not dot:
            hint = f"; did you mean `{source}.*`?" if source in spec.sources else ""
            found.append((path, f"matches no tool: globs match `source.tool` addresses{hint}"))
        elif source not in spec.sources:
            close = difflib.get_close_matches(source, names, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            found.append((path, f"matches no tool: there is no source `{source}`{hint}"))
    return found


def _secret_tables(source: object) -> dict[str, Mapping[str, SecretTemplate]]:
    tables: dict[str, Mapping[str, SecretTemplate]] = {}
    for table in ("env", "headers", "auth"):
        values = getattr(source, table, None)
        if isinstance(values, Mapping) and values:
            tables[table] = values
    return tables


def _shown(spec: Spec, path: Path) -> str:
    try:
        return path.relative_to(spec.root).as_posix()
    except ValueError:
        return str(path)


def _read(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return read_bounded(path, MAX_SPEC_BYTES).decode("utf-8-sig")
    except (UnreadableFile, UnicodeDecodeError):
        return ""
