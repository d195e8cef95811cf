"""Nothing the CLI prints can drive the terminal (found by review helpers: an upstream's
description in ``codemode search``, the model's console lines and errors in ``codemode
run``). Every control character but tab and newline, C0, DEL and C1, is enumerated: each
reaches the output only as a visible ``\\xNN`` escape."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import codemode_cli

CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))]
EVERY = "".join(CONTROLS)


def _assert_inert(done: subprocess.CompletedProcess[str]) -> None:
    for name, text in (("stdout", done.stdout), ("stderr", done.stderr)):
        raw = sorted({hex(ord(c)) for c in text if c in CONTROLS})
        assert not raw, (name, raw, text[-2000:])


def _project(tmp_path: Path) -> Path:
    module = f"cm_inert_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(
        "from codemodekit.providers.python.local import define_tool\n"
        f"lookup = define_tool(description='Finds things ' + {EVERY!a} + ' here',\n"
        "    execute=lambda a: 1, input_schema={'type': 'object'})\n",
        encoding="utf-8",
    )
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "n"\n[policy]\ndefault = "allow"\n'
        f'[sources.local]\ntype = "python"\nmodule = "{module}"\n',
        encoding="utf-8",
    )
    return tmp_path


def test_run_prints_the_models_control_characters_as_escapes(tmp_path: Path) -> None:
    every = json.dumps(EVERY)
    script = _project(tmp_path) / "evil.ts"
    script.write_text(
        f"const every: string = {every};\n"
        "console.log('line', every);\nconsole.error(every);\n"
        "if (every.length > 0) { throw new Error('failed ' + every); }\nreturn every;\n",
        encoding="utf-8",
    )
    done = codemode_cli(tmp_path, "run", str(script))
    assert done.returncode != 0
    _assert_inert(done)
    assert "\\x1b" in done.stdout + done.stderr and "\\x9b" in done.stdout + done.stderr


def test_run_prints_a_returned_value_with_control_characters_as_escapes(tmp_path: Path) -> None:
    script = _project(tmp_path) / "value.ts"
    script.write_text(f"return {json.dumps(EVERY)};\n", encoding="utf-8")
    done = codemode_cli(tmp_path, "run", str(script))
    assert done.returncode == 0, done.stderr
    _assert_inert(done)


def test_search_prints_an_upstream_description_with_control_characters_as_escapes(
    tmp_path: Path,
) -> None:
    done = codemode_cli(_project(tmp_path), "search", "finds things")
    assert done.returncode == 0, done.stderr
    assert "local.lookup" in done.stdout
    _assert_inert(done)


# -- the excerpt under an error -------------------------------------------------------------
# Characters str.splitlines breaks at and JavaScript does not: the excerpt showed another
# line than the one the location names.
NOT_LINE_ENDS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85"]


def test_the_excerpt_is_the_line_the_error_names(tmp_path: Path) -> None:
    project = _project(tmp_path)
    for index, char in enumerate(NOT_LINE_ENDS):
        script = project / f"excerpt{index}.ts"
        script.write_text(
            f"// one{char}comment\nconst a = 1;\nconst b = ;\nreturn a;\n", encoding="utf-8"
        )
        done = codemode_cli(tmp_path, "run", str(script))
        assert done.returncode != 0
        assert "3 | const b = ;" in done.stderr, (repr(char), done.stderr)


def test_json_output_stays_json_and_holds_every_control_character(tmp_path: Path) -> None:
    script = _project(tmp_path) / "value.ts"
    script.write_text(f"return {json.dumps(EVERY)};\n", encoding="utf-8")
    for argv in (("run", str(script), "--json"), ("search", "finds things", "--json")):
        done = codemode_cli(tmp_path, *argv)
        assert done.returncode == 0, done.stderr
        _assert_inert(done)
        document = json.loads(done.stdout)  # valid JSON: nothing written as \xNN
        if argv[0] == "run":
            assert document["value"] == EVERY
        else:  # search makes a description one line: what is not whitespace stays, as data
            texts = [t for t in _strings(document) if "Finds things" in t]
            assert texts and all("\x1b" in t and "\x9b" in t for t in texts), texts


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
