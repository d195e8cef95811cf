"""A secret is masked however a JSON encoder spelled it (a review found Go's HTML-safe
``\\u0026`` / ``\\u003c`` / ``\\u003e`` echoed to the model unmasked).

JSON lets any character of a string be written as ``\\uXXXX``, in either hex case, and
``/`` as ``\\/``; encoders differ in which they escape. Each case below spells every
character of a secret at random among what JSON allows, once or inside a second JSON
string, and checks the spelling is valid JSON for the secret before it checks the mask.
"""

from __future__ import annotations

import json
import random

import pytest

from codemodekit.scrub import MASK, Scrubber

SECRETS = [
    'Zq7"XkW9/pLm+2Vb N4r&<k8>Ty',
    "key=abc'def+ghi",
    "p\\ss\tw\u00e9rd\u00a7\U0001f600x",
    "plain-ascii-token-1234",
]
_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n"}
_SHORT.update({"\r": "\\r", "\t": "\\t"})


def _spell(secret: str, rng: random.Random) -> str:
    """The secret as some JSON encoder could write it inside a string."""
    out = []
    for char in secret:
        ways = []
        if char not in '"\\' and ord(char) >= 0x20:
            ways.append(char)
        if char in _SHORT:
            ways.append(_SHORT[char])
        units = char.encode("utf-16-be")
        hex_ = "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
        ways += [hex_, hex_.upper().replace("\\U", "\\u")]
        out.append(rng.choice(ways))
    return "".join(out)


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize("nested", [False, True], ids=["json", "json-in-json"])
def test_every_json_spelling_of_a_secret_is_masked(secret: str, nested: bool) -> None:
    scrub = Scrubber([secret])
    rng = random.Random(f"{secret}{nested}")
    for _ in range(200):
        spelled = _spell(secret, rng)
        assert json.loads(f'"{spelled}"') == secret  # a valid spelling of the secret
        if nested:
            spelled = json.dumps(spelled)[1:-1]
            assert json.loads(json.loads(f'"{spelled}"').join('""')) == secret
        text = f'{{"echo": "before {spelled} after"}}'
        assert scrub(text) == f'{{"echo": "before {MASK} after"}}', spelled


def test_text_that_only_looks_like_an_escape_is_kept() -> None:
    scrub = Scrubber(["s3cr3t-value"])
    # Another character escaped, an escape cut short, a backslash that escapes nothing.
    for text in ("s3cr3t-valu\\u0066", "s3cr3t-valu\\u006", "s3cr3t-valu\\e", "\\u0073"):
        assert scrub(text) == text
    assert scrub("s3cr3t-valu\\u0065") == MASK
