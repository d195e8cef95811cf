"""A pydantic ``input_model`` takes exactly what its advertised JSON Schema accepts (found by a
review helper: with ``strict=True``, a date, UUID or enum written as a JSON string, and a
tuple written as a JSON array, matched the schema and were then refused as
``TOOL_INPUT_INVALID``). Each type JSON can only spell one way is enumerated, strict and lax."""

from __future__ import annotations

import datetime
import decimal
import enum
import uuid
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, create_model

from codemodekit import CodeMode, allow_all_tool_calls, define_tool, local


class Color(enum.Enum):
    RED = "red"


# A field type, the argument as the model's script writes it, and what the tool receives.
FIELDS: dict[str, tuple[Any, str, Any]] = {
    "date": (datetime.date, '"2024-01-02"', datetime.date(2024, 1, 2)),
    "datetime": (
        datetime.datetime,
        '"2024-01-02T03:04:05Z"',
        datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
    ),
    "time": (datetime.time, '"03:04:05"', datetime.time(3, 4, 5)),
    "uuid": (
        uuid.UUID,
        '"12345678-1234-5678-1234-567812345678"',
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
    ),
    "enum": (Color, '"red"', Color.RED),
    "tuple": (tuple[int, int], "[1, 2]", (1, 2)),
    "decimal": (decimal.Decimal, '"1.5"', decimal.Decimal("1.5")),
    "bytes": (bytes, '"abc"', b"abc"),
}


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "lax"])
@pytest.mark.parametrize("field", list(FIELDS))
async def test_an_argument_the_schema_accepts_reaches_the_tool(field: str, strict: bool) -> None:
    kind, written, expected = FIELDS[field]
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        "Args", __config__=ConfigDict(strict=strict), value=(kind, ...)
    )
    received: list[Any] = []

    def execute(args: Any) -> str:
        received.append(args.value)
        return "ok"

    tool = define_tool(description="d", input_model=model, execute=execute)
    async with CodeMode(
        sources=[local("app", {"take": tool})], policy=allow_all_tool_calls()
    ) as cm:
        result = await cm.run(f"return await tools.app.take({{ value: {written} }});")
    assert result.ok, result.diagnostic
    assert received == [expected]
    assert type(received[0]) is type(expected)
