"""Integers too long for Python's integer-to-text limit are unsupported, not a crash.

``json`` refuses to write an integer of more than ``sys.get_int_max_str_digits()``
digits with a raw ``ValueError``; ``normalize_schema`` promises ``SchemaUnsupported``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest

from codemodekit.schema import SchemaUnsupported, normalize_schema

LIMIT = sys.get_int_max_str_digits()
TOO_LONG = [10**LIMIT, -(10**LIMIT), 7 * 10 ** (LIMIT + 700), 2 ** (4 * LIMIT)]

PLACES: list[tuple[str, Callable[[int], Any]]] = [
    ("$.maximum", lambda n: {"maximum": n}),
    ("$.properties.n.minimum", lambda n: {"properties": {"n": {"minimum": n}}}),
    ("$.properties.n.const", lambda n: {"properties": {"n": {"const": n}}}),
    ("$.properties.n.enum[1]", lambda n: {"properties": {"n": {"enum": [1, n]}}}),
    ("$.properties.n.default", lambda n: {"properties": {"n": {"default": n}}}),
    ('$["$defs"].N.multipleOf', lambda n: {"$defs": {"N": {"multipleOf": n}}}),
    ("$.items.maxItems", lambda n: {"items": {"maxItems": n}}),
    ("$.examples[0][0]", lambda n: {"examples": [(n,)]}),  # a tuple: the slow path too
    ("$.properties.n.maximum", lambda n: {"properties": MappingProxyType({"n": {"maximum": n}})}),
]


@pytest.mark.parametrize("number", TOO_LONG, ids=lambda n: f"{n.bit_length()}bits")
@pytest.mark.parametrize(("path", "place"), PLACES, ids=[p for p, _ in PLACES])
def test_an_integer_too_long_to_write_is_unsupported_with_its_path(
    number: int, path: str, place: Callable[[int], Any]
) -> None:
    with pytest.raises(SchemaUnsupported) as caught:
        normalize_schema(place(number))
    assert caught.value.reason.startswith(path + ": ")
    assert f"more than {LIMIT} digits" in caught.value.reason
    assert len(caught.value.reason) < 200


@pytest.mark.parametrize("number", [10 ** (LIMIT - 1), -(10 ** (LIMIT - 1)), 2**64, 2**2100])
def test_long_integers_within_the_limit_are_kept(number: int) -> None:
    schema = {"properties": {"n": {"maximum": number, "enum": [number]}}}
    assert normalize_schema(schema)["properties"]["n"] == {"maximum": number, "enum": [number]}
