"""Security requirements → what credentials each operation sends, failing closed.

The operation's ``security`` (or the document's, when the operation has none) lists
alternatives; each alternative is a set of schemes that must all be satisfied. Supported
schemes: ``apiKey`` in header/query/cookie (``auth.api_key``), ``http`` bearer
(``auth.bearer``) and basic (``auth.username`` + ``auth.password``), and
``oauth2``/``openIdConnect`` with a bearer token. A malformed scheme, a requirement naming
a scheme that is not declared, or requirements none of whose alternatives is supported
(only mutualTLS, say) skip the operation.

Which credentials are configured or set never changes the tool list (ADR 0021): the plan
keeps every supported alternative, and each call uses the first one, in document order,
whose credentials are all available; ``{}`` (anonymous) always is. When none is, the call
fails with a ``ToolError`` that names what is missing, and nothing is sent.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from codemodekit.providers.openapi.document import OpenApiDocument, UnresolvedRef
from codemodekit.providers.openapi.parameters import Unsupported, Wire

AUTH_KEYS = ("api_key", "bearer", "username", "password")


@dataclass(frozen=True, slots=True)
class Placement:
    location: str
    """``header``, ``query`` or ``cookie``."""
    name: str
    secret: str
    """``api_key``, ``bearer`` or ``basic``."""


@dataclass(frozen=True, slots=True)
class Need:
    """One scheme of an alternative: what it needs, in words a user can act on."""

    scheme: str
    """``'bearerAuth' (HTTP bearer)``."""
    keys: tuple[str, ...]
    """The ``auth`` keys it reads (``("username", "password")`` for basic)."""


@dataclass(frozen=True, slots=True)
class Alternative:
    placements: tuple[Placement, ...]
    needs: tuple[Need, ...]
    """Empty for the anonymous alternative ``{}``."""


SecurityPlan = tuple[Alternative, ...]
"""Supported alternatives in document order; ``()`` means the operation needs nothing."""


class MissingCredentials(Exception):
    """No alternative of an operation's security can be satisfied with what is set."""


def _scheme(document: OpenApiDocument, name: str) -> tuple[Placement, Need] | str:
    """(placement, need) when supported; the reason when never satisfiable. Raises when malformed."""
    components = document.root.get("components")
    schemes = components.get("securitySchemes") if isinstance(components, Mapping) else None
    if not isinstance(schemes, Mapping) or name not in schemes:
        raise Unsupported(f"security: scheme {name!r} is required but not declared")
    try:
        scheme, _ = document.deref(schemes[name], document.path)
    except UnresolvedRef as exc:
        raise Unsupported(f"security: scheme {name!r}: {exc.reason}") from None
    if not isinstance(scheme, Mapping):
        raise Unsupported(f"security: scheme {name!r} is not an object")
    kind = scheme.get("type")
    if kind == "apiKey":
        where, param = scheme.get("in"), scheme.get("name")
        if where not in ("header", "query", "cookie") or not isinstance(param, str) or not param:
            raise Unsupported(
                f"security: apiKey scheme {name!r} is malformed (needs 'in' and 'name')"
            )
        return Placement(where, param, "api_key"), Need(
            f"{name!r} (apiKey in {where})", ("api_key",)
        )
    if kind == "http":
        http_scheme = scheme.get("scheme")
        if not isinstance(http_scheme, str):
            raise Unsupported(f"security: http scheme {name!r} is malformed (needs 'scheme')")
        lowered = http_scheme.lower()
        if lowered == "bearer":
            return Placement("header", "Authorization", "bearer"), Need(
                f"{name!r} (HTTP bearer)", ("bearer",)
            )
        if lowered == "basic":
            return Placement("header", "Authorization", "basic"), Need(
                f"{name!r} (HTTP basic)", ("username", "password")
            )
        return f"{name!r} uses HTTP scheme {http_scheme!r}, which is not supported"
    if kind in ("oauth2", "openIdConnect"):
        return Placement("header", "Authorization", "bearer"), Need(
            f"{name!r} ({kind}, a token)", ("bearer",)
        )
    if kind == "mutualTLS":
        return f"{name!r} (mutualTLS) is not supported"
    raise Unsupported(f"security: scheme {name!r} has unknown type {kind!r}")


def plan_security(document: OpenApiDocument, operation: Mapping[str, Any]) -> SecurityPlan:
    requirements = (
        operation["security"] if "security" in operation else document.root.get("security")
    )
    if requirements is None:
        return ()
    if not isinstance(requirements, list):
        raise Unsupported("security: requirement is not a list")
    if not requirements:
        return ()  # `security: []` explicitly removes the requirement
    reasons: list[str] = []
    plan: list[Alternative] = []
    for alternative in requirements:
        if not isinstance(alternative, Mapping):
            raise Unsupported("security: a requirement alternative is not an object")
        placements: list[Placement] = []
        needs: list[Need] = []
        unsupported: list[str] = []
        for name, scopes in alternative.items():
            if not isinstance(scopes, list):
                raise Unsupported(f"security: scopes of {name!r} are not a list")
            found = _scheme(document, name)
            if isinstance(found, str):
                unsupported.append(found)
            else:
                placements.append(found[0])
                needs.append(found[1])
        if unsupported:
            reasons.extend(unsupported)
            continue
        seen = {
            (p.location, p.name.lower() if p.location == "header" else p.name) for p in placements
        }
        if len(seen) != len(placements):
            reasons.append("two schemes of one alternative would send the same credential slot")
            continue
        plan.append(Alternative(tuple(dict.fromkeys(placements)), tuple(needs)))
    if not plan:
        unique = list(dict.fromkeys(reasons))
        raise Unsupported("security: no accepted alternative is supported: " + "; ".join(unique))
    return tuple(plan)


def shadowed(plan: SecurityPlan) -> set[tuple[str, str]]:
    """Parameters the credentials replace (an apiKey also declared as a parameter).

    Every alternative's slots are the credentials' own, so the tool's input schema does not
    depend on which alternative a call ends up using.
    """
    return {
        (p.location, p.name.lower() if p.location == "header" else p.name)
        for alternative in plan
        for p in alternative.placements
    }


class Credentials:
    """Resolved ``auth`` values. Never printed; ``secrets`` feeds the error sanitizer.

    ``unset`` maps an ``auth`` key the spec configures but whose ``${VAR}`` is not set to
    the message saying so (it names the variable, never a value).
    """

    __slots__ = ("_unset", "_values")

    def __init__(self, values: Mapping[str, str], unset: Mapping[str, str] | None = None) -> None:
        self._values = dict(values)
        self._unset = dict(unset or {})

    def __repr__(self) -> str:
        return f"Credentials(keys={sorted(self._values)})"

    __str__ = __repr__

    def _basic(self) -> str:
        raw = f"{self._values.get('username', '')}:{self._values.get('password', '')}"
        return base64.b64encode(raw.encode()).decode()

    def secrets(self) -> list[str]:
        """Every form in which a credential could be echoed back."""
        out: set[str] = set()
        for key, value in self._values.items():
            if not value or (key == "username" and len(value) < 4):
                continue
            out.update({value, quote(value, safe=""), quote(value)})
        if "username" in self._values or "password" in self._values:
            out.add(self._basic())
        return sorted((s for s in out if len(s) >= 3), key=len, reverse=True)

    def choose(self, plan: SecurityPlan) -> tuple[Placement, ...]:
        """The first alternative whose credentials are all available, else ``MissingCredentials``."""
        if not plan:
            return ()
        missing: list[str] = []
        for alternative in plan:
            lacking = [
                need for need in alternative.needs if any(k not in self._values for k in need.keys)
            ]
            if not lacking:
                return alternative.placements
            missing.extend(self._why(need) for need in lacking)
        raise MissingCredentials("; ".join(dict.fromkeys(missing)))

    def _why(self, need: Need) -> str:
        absent = [k for k in need.keys if k not in self._values]
        unset = [self._unset[k] for k in absent if k in self._unset]
        if unset:
            return f"{need.scheme} needs {' and '.join(unset)}"
        keys = " and ".join(f"auth.{k}" for k in absent)
        return f"{need.scheme} needs {keys}, which the source's auth does not configure"

    def apply(self, plan: SecurityPlan, wire: Wire) -> None:
        for placement in self.choose(plan):
            if placement.secret == "api_key":
                value = self._values["api_key"]
            elif placement.secret == "bearer":
                value = f"Bearer {self._values['bearer']}"
            else:
                value = f"Basic {self._basic()}"
            if placement.location == "header":
                wire.headers.append((placement.name, value))
            elif placement.location == "query":
                wire.query.append(f"{quote(placement.name, safe='')}={quote(value, safe='')}")
            else:
                wire.cookies.append(f"{quote(placement.name, safe='')}={quote(value, safe='')}")


__all__ = [
    "Alternative",
    "Credentials",
    "MissingCredentials",
    "Need",
    "Placement",
    "SecurityPlan",
    "plan_security",
    "shadowed",
]
