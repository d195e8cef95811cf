"""Security requirements → what credentials each operation sends, failing closed.

The operation's ``security`` (or the document's, when the operation has none) lists
alternatives; each alternative is a set of schemes that must all be satisfied. The first
alternative, in document order, whose every scheme can be satisfied from the source's
``auth`` is used; ``{}`` (anonymous) is satisfiable by definition. Supported schemes:
``apiKey`` in header/query/cookie (``auth.api_key``), ``http`` bearer (``auth.bearer``) and
basic (``auth.username`` + ``auth.password``), and ``oauth2``/``openIdConnect`` when a
bearer token is configured. A malformed scheme, or a requirement naming a scheme that is
not declared, skips the operation: it is never called without the credentials it asks for.
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


SecurityPlan = tuple[Placement, ...]


def _scheme(
    document: OpenApiDocument, name: str, configured: frozenset[str]
) -> tuple[Placement | None, str | None]:
    """(placement, None) when satisfiable; (None, why-not) when not. Raises when malformed."""
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
        if "api_key" not in configured:
            return None, f"{name!r} (apiKey in {where}) needs auth.api_key"
        return Placement(where, param, "api_key"), None
    if kind == "http":
        http_scheme = scheme.get("scheme")
        if not isinstance(http_scheme, str):
            raise Unsupported(f"security: http scheme {name!r} is malformed (needs 'scheme')")
        lowered = http_scheme.lower()
        if lowered == "bearer":
            if "bearer" not in configured:
                return None, f"{name!r} (HTTP bearer) needs auth.bearer"
            return Placement("header", "Authorization", "bearer"), None
        if lowered == "basic":
            if not {"username", "password"} <= configured:
                return None, f"{name!r} (HTTP basic) needs auth.username and auth.password"
            return Placement("header", "Authorization", "basic"), None
        return None, f"{name!r} uses HTTP scheme {http_scheme!r}, which is not supported"
    if kind in ("oauth2", "openIdConnect"):
        if "bearer" not in configured:
            return None, f"{name!r} ({kind}) needs a token in auth.bearer"
        return Placement("header", "Authorization", "bearer"), None
    if kind == "mutualTLS":
        return None, f"{name!r} (mutualTLS) is not supported"
    raise Unsupported(f"security: scheme {name!r} has unknown type {kind!r}")


def plan_security(
    document: OpenApiDocument, operation: Mapping[str, Any], configured: frozenset[str]
) -> SecurityPlan:
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
    for alternative in requirements:
        if not isinstance(alternative, Mapping):
            raise Unsupported("security: a requirement alternative is not an object")
        placements: list[Placement] = []
        missing: list[str] = []
        for name, scopes in alternative.items():
            if not isinstance(scopes, list):
                raise Unsupported(f"security: scopes of {name!r} are not a list")
            placement, why = _scheme(document, name, configured)
            if placement is None:
                missing.append(why or name)
            else:
                placements.append(placement)
        if missing:
            reasons.extend(missing)
            continue
        seen = {
            (p.location, p.name.lower() if p.location == "header" else p.name) for p in placements
        }
        if len(seen) != len(placements):
            reasons.append("two schemes of one alternative would send the same credential slot")
            continue
        return tuple(dict.fromkeys(placements))
    unique = list(dict.fromkeys(reasons))
    raise Unsupported("security: no accepted alternative can be satisfied: " + "; ".join(unique))


def shadowed(plan: SecurityPlan) -> set[tuple[str, str]]:
    """Parameters the credentials replace (an apiKey also declared as a parameter)."""
    return {(p.location, p.name.lower() if p.location == "header" else p.name) for p in plan}


class Credentials:
    """Resolved ``auth`` values. Never printed; ``secrets`` feeds the error sanitizer."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

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

    def apply(self, plan: SecurityPlan, wire: Wire) -> None:
        for placement in plan:
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


def configured_keys(auth: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(k for k in auth if k in AUTH_KEYS)


__all__ = ["Credentials", "Placement", "SecurityPlan", "plan_security", "shadowed"]
