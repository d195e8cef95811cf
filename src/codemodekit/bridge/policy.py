"""Host-side tool policy: every call is allowed or denied outside the sandbox.

There is no implicit allow-all. A policy is a callable (sync or async) that receives a
``ToolCallRequest`` after input validation and before dispatch, and returns ``"allow"``,
``"deny"`` or a ``PolicyDecision``. Anything else, an exception, or no answer within the
deadline denies the call (fail closed).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import fnmatch
import inspect
import logging
import re
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:  # the spec's models cost ~0.1 s to import; a CodeMode(...) never needs them
    from codemodekit.spec.model import PolicyRule, PolicySpec

log = logging.getLogger("codemodekit.bridge")

Decision = Literal["allow", "deny"]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """What a policy sees. ``annotations`` are untrusted hints from the tool's source."""

    address: str
    """Exact callable expression: ``tools.github.get_issue``."""
    source: str
    tool: str
    arguments: Mapping[str, Any]
    """Already validated against the tool's input schema."""
    annotations: Mapping[str, Any]
    execution_id: str = ""
    context: Any = None
    """The host's trusted per-run context (``CodeMode.run(code, context=...)``), if any."""

    @property
    def key(self) -> str:
        return f"{self.source}.{self.tool}"


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    decision: Decision
    reason: str | None = None
    """Model-visible when the call is denied: keep it short and free of secrets."""
    rule: str | None = None
    """Which rule decided, for the audit trail: ``rules[2]`` / ``default`` for
    ``[policy]``; whatever a host policy says (never shown to the model)."""

    def __post_init__(self) -> None:
        # Catch a typo where it is written; a policy that raises still fails closed.
        if self.decision not in ("allow", "deny"):
            raise ValueError(
                f"PolicyDecision: decision must be 'allow' or 'deny', got {self.decision!r}"
            )
        if self.reason is not None and not isinstance(self.reason, str):
            raise TypeError("PolicyDecision: reason must be a string or None")
        if self.rule is not None and not isinstance(self.rule, str):
            raise TypeError("PolicyDecision: rule must be a string or None")

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"


PolicyResult: TypeAlias = "Decision | PolicyDecision"
ToolPolicy: TypeAlias = Callable[[ToolCallRequest], "PolicyResult | Awaitable[PolicyResult]"]

ALLOW = PolicyDecision("allow")

_BUILTIN: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()
"""Policies of this module, which never keep or change a request's arguments."""


def _is_builtin(policy: ToolPolicy) -> bool:
    try:
        return policy in _BUILTIN
    except TypeError:  # an unhashable callable object is a host policy
        return False


def _private_request(policy: ToolPolicy, request: ToolCallRequest) -> ToolCallRequest:
    # A host policy gets its own copy of the validated arguments: whatever it does to
    # them, the provider receives exactly what was validated and approved.
    if isinstance(policy, RulesPolicy) or _is_builtin(policy):
        return request
    return dataclasses.replace(request, arguments=copy.deepcopy(dict(request.arguments)))


def fixed_verdict(policy: ToolPolicy, request: ToolCallRequest) -> PolicyDecision | None:
    """``policy``'s decision for every call of ``request``'s tool in one run, when it
    cannot depend on the arguments or the context (a ``[policy]`` table, this module's
    policies); ``None`` when it must be asked at each call (a host's callable)."""
    if not (type(policy) is RulesPolicy or _is_builtin(policy)):
        return None
    try:
        answer = policy(request)
    except Exception:  # pragma: no cover - this module's policies do not raise
        return None
    return answer if isinstance(answer, PolicyDecision) else None


def allow_all_tool_calls() -> ToolPolicy:
    """Allow every call. For examples and trusted environments: say so explicitly."""

    def allow_all(_request: ToolCallRequest) -> PolicyDecision:
        return ALLOW

    _BUILTIN.add(allow_all)
    return allow_all


def deny_all_tool_calls(reason: str = "tool calls are disabled by policy") -> ToolPolicy:
    decision = PolicyDecision("deny", reason)

    def deny_all(_request: ToolCallRequest) -> PolicyDecision:
        return decision

    _BUILTIN.add(deny_all)
    return deny_all


def _compile_glob(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


class RulesPolicy:
    """``[policy]`` of codemode.toml: ordered rules, first match wins, then ``default``.

    A rule with ``read_only = true`` matches only tools annotated ``readOnlyHint: true`` by
    a source listed in ``trusted_sources`` (``trust_annotations = true``): annotations are
    the upstream's own claims, hints and never authority, unless the operator says so.
    """

    def __init__(self, spec: PolicySpec, *, trusted_sources: Iterable[str] = ()) -> None:
        self.spec = spec
        self.trusted_sources = frozenset(trusted_sources)
        # Each rule's decision is built once; it names the rule for the audit trail.
        self._rules: tuple[tuple[re.Pattern[str], PolicyRule, PolicyDecision], ...] = tuple(
            (_compile_glob(rule.tools), rule, _rule_decision(index, rule))
            for index, rule in enumerate(spec.rules)
        )
        self._allow_by_default = PolicyDecision("allow", rule="default")

    def __call__(self, request: ToolCallRequest) -> PolicyDecision:
        key = request.key
        read_only = (
            request.source in self.trusted_sources
            and request.annotations.get("readOnlyHint") is True
        )
        for pattern, rule, decision in self._rules:
            if not pattern.match(key):
                continue
            if rule.read_only and not read_only:
                continue
            return decision
        if self.spec.default == "allow":
            return self._allow_by_default
        return PolicyDecision(
            "deny", f"no policy rule allows {key} (default is deny)", rule="default"
        )


def _rule_decision(index: int, rule: PolicyRule) -> PolicyDecision:
    name = f"rules[{index}]"
    if rule.decision == "allow":
        return PolicyDecision("allow", rule=name)
    return PolicyDecision("deny", f"denied by policy rule tools = {rule.tools!r}", rule=name)


def rules_policy(spec: PolicySpec, *, trusted_sources: Iterable[str] = ()) -> ToolPolicy:
    """The ``[policy]`` rules; ``trusted_sources`` are those whose annotations are believed."""
    return RulesPolicy(spec, trusted_sources=trusted_sources)


async def decide(
    policy: ToolPolicy, request: ToolCallRequest, *, timeout_s: float
) -> PolicyDecision:
    """Ask ``policy``; fail closed on anything but a valid decision."""
    try:
        answer: Any = policy(_private_request(policy, request))
        if inspect.isawaitable(answer):
            async with asyncio.timeout(timeout_s):
                answer = await answer
    except TimeoutError:
        return PolicyDecision("deny", "the tool policy did not answer in time", rule="(timeout)")
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("tool policy raised for %s; denying", request.key)
        return PolicyDecision("deny", "the tool policy failed", rule="(error)")
    if isinstance(answer, PolicyDecision) and answer.decision in ("allow", "deny"):
        return answer
    if answer == "allow" and isinstance(answer, str):
        return ALLOW
    if answer == "deny" and isinstance(answer, str):
        return PolicyDecision("deny", "denied by the tool policy")
    log.error("tool policy returned %r for %s; denying", type(answer).__name__, request.key)
    return PolicyDecision(
        "deny", "the tool policy returned no valid decision", rule="(invalid decision)"
    )


def describe(policy: ToolPolicy) -> Mapping[str, Any]:
    """A loggable summary (never the arguments of any call)."""
    if isinstance(policy, RulesPolicy):
        return {
            "default": policy.spec.default,
            "rules": [
                {"tools": r.tools, "decision": r.decision, "read_only": r.read_only}
                for r in policy.spec.rules
            ],
        }
    return {"callable": getattr(policy, "__qualname__", type(policy).__name__)}
