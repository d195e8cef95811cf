"""The transactional writer: stage, swap, roll back, manifest last, authored files kept."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codemodekit.catalog.catalog import Catalog
from codemodekit.codegen import (
    BLOCK_BEGIN,
    BLOCK_END,
    EDITOR_FILES,
    LOCK_FILE,
    METADATA_FILE,
    ArtifactConflict,
    apply,
    artifact_kind,
    generate,
    generate_plugin,
    plan_write,
    skill_dir,
)
from codemodekit.codegen import writer as writer_module
from codemodekit.providers.base import Discovery, ToolSpec

OBJ = {"type": "object", "properties": {"id": {"type": "string"}}}


def _catalog(*sources: str, description: str = "Get one.") -> Catalog:
    return Catalog.build(
        {
            s: Discovery(tools=(ToolSpec(name="get", description=description, input_schema=OBJ),))
            for s in sources
        }
    )


def _write(root: Path, catalog: Catalog) -> None:
    apply(plan_write(root, generate(catalog, name="t"), manifest=LOCK_FILE))


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _age(root: Path) -> dict[str, int]:
    """Set every file's mtime to a fixed past instant and return them."""
    stamps = {}
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(1_000_000_000, 1_000_000_000))
            stamps[path.relative_to(root).as_posix()] = path.stat().st_mtime_ns
    return stamps


def test_first_write_creates_every_file_and_a_rerun_touches_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    files = generate(_catalog("a", "b"), name="t")
    _write(out, _catalog("a", "b"))
    assert _snapshot(out) == {k: v.encode() for k, v in files.items()}
    stamps = _age(out)
    plan = plan_write(out, files, manifest=LOCK_FILE)
    assert not plan.changed and plan.diff() == ""
    apply(plan)
    assert {p: (out / p).stat().st_mtime_ns for p in stamps} == stamps


def test_only_changed_files_are_rewritten(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, _catalog("a", "b"))
    stamps = _age(out)
    changed = Catalog.build(
        {
            "a": Discovery(
                tools=(ToolSpec(name="get", description="Now different.", input_schema=OBJ),)
            ),
            "b": Discovery(tools=(ToolSpec(name="get", description="Get one.", input_schema=OBJ),)),
        }
    )
    plan = plan_write(out, generate(changed, name="t"), manifest=LOCK_FILE)
    assert set(plan.writes) == {"tools.a.d.ts", "tools.d.ts", LOCK_FILE}
    assert list(plan.writes)[-1] == LOCK_FILE
    apply(plan)
    assert (out / "tools.b.d.ts").stat().st_mtime_ns == stamps["tools.b.d.ts"]
    assert "Now different." in (out / "tools.a.d.ts").read_text()


def test_stale_generated_files_go_and_authored_files_stay(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, _catalog("a", "b"))
    (out / "NOTES.md").write_text("mine\n")
    (out / "sub").mkdir()
    (out / "sub" / "keep.ts").write_text("// mine\n")
    _write(out, _catalog("a"))
    assert not (out / "tools.b.d.ts").exists()
    assert (out / "NOTES.md").read_text() == "mine\n"
    assert (out / "sub" / "keep.ts").read_text() == "// mine\n"
    assert set(_snapshot(out)) == {
        "NOTES.md",
        "sub/keep.ts",
        "tools.d.ts",
        "tools.a.d.ts",
        *EDITOR_FILES,
        LOCK_FILE,
    }


def test_a_file_the_generator_did_not_write_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "tools.d.ts").write_text("// written by a person\n")
    with pytest.raises(ArtifactConflict, match=r"tools\.d\.ts") as info:
        plan_write(out, generate(_catalog("a"), name="t"), manifest=LOCK_FILE)
    assert "Move or delete" in str(info.value)
    assert (out / "tools.d.ts").read_text() == "// written by a person\n"
    assert not (out / LOCK_FILE).exists()


def test_a_failure_mid_swap_leaves_the_previous_set_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    _write(out, _catalog("a", "b"))
    (out / "NOTES.md").write_text("mine\n")
    before = _snapshot(out)
    plan = plan_write(
        out, generate(_catalog("a", "c", description="New."), name="t"), manifest=LOCK_FILE
    )
    assert plan.deletes == ("tools.b.d.ts",) and "tools.c.d.ts" in plan.writes
    real_replace = os.replace
    calls = {"n": 0}

    def flaky(src: object, dst: object) -> None:
        calls["n"] += 1
        if calls["n"] == 4:  # after the stale file moved and some new files went in
            raise OSError(28, "No space left on device")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_module.os, "replace", flaky)
    with pytest.raises(OSError, match="No space"):
        apply(plan)
    monkeypatch.setattr(writer_module.os, "replace", real_replace)
    assert _snapshot(out) == before
    assert not (out / writer_module.TXN_DIR).exists()


def test_the_lock_is_installed_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    installed: list[str] = []
    real_replace = os.replace

    def spy(src: object, dst: object) -> None:
        if writer_module.TXN_DIR not in Path(str(dst)).parts:
            installed.append(Path(str(dst)).name)
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_module.os, "replace", spy)
    _write(out, _catalog("a", "b"))
    assert installed[-1] == LOCK_FILE and len(installed) == 4 + len(EDITOR_FILES)


def test_a_killed_writer_is_rolled_back_by_the_next_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, _catalog("a", "b"))
    before = _snapshot(out)
    # A real process dies (os._exit: no cleanup, no exception handlers) in the middle of the swap.
    script = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from codemodekit.codegen import LOCK_FILE, apply, generate, plan_write, writer
        from tests.codegen.test_writer import _catalog
        plan = plan_write(Path({str(out)!r}), generate(_catalog("a", "c", description="New."), name="t"), manifest=LOCK_FILE)
        real, calls = os.replace, [0]
        def dying(src, dst):
            calls[0] += 1
            if calls[0] == 3:
                os._exit(9)
            real(src, dst)
        writer.os.replace = dying
        apply(plan)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 9, done.stderr
    assert (out / writer_module.TXN_DIR).exists()
    assert _snapshot(out) != before
    with pytest.raises(ArtifactConflict, match="interrupted"):
        plan_write(out, generate(_catalog("a", "b"), name="t"), manifest=LOCK_FILE, recover=False)
    plan = plan_write(out, generate(_catalog("a", "b"), name="t"), manifest=LOCK_FILE)
    assert plan.recovered and not plan.changed
    assert _snapshot(out) == before


def test_unsafe_paths_in_a_hand_edited_manifest_are_ignored(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, _catalog("a"))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    lock = (out / LOCK_FILE).read_text()
    (out / LOCK_FILE).write_text(lock.replace('"files": [', '"files": [\n    "../victim.txt",'))
    _write(out, _catalog("a"))
    assert victim.read_text() == "keep"


def _plugin(root: Path, catalog: Catalog) -> None:
    files = generate_plugin(catalog, name="ops")
    manifest = f"{skill_dir('ops')}/references/{METADATA_FILE}"
    apply(plan_write(root, files, manifest=manifest, kind=artifact_kind))


def test_regenerating_a_plugin_keeps_authored_skill_text_and_seed_files(tmp_path: Path) -> None:
    root = tmp_path / "plugin"
    _plugin(root, _catalog("a"))
    skill = root / skill_dir("ops") / "SKILL.md"
    text = skill.read_text()
    assert BLOCK_BEGIN in text and BLOCK_END in text
    authored = (
        text.replace(
            "# Use ops through Code Mode\n",
            "# Use ops through Code Mode\n\nAlways dry-run first.\n",
        )
        + "\n## My workflow\n\nStep one.\n"
    )
    skill.write_text(authored)
    examples = root / skill_dir("ops") / "references" / "examples.md"
    examples.write_text("# My examples\n")
    (root / "plugin.json").write_text('{"name": "custom"}\n')

    _plugin(root, _catalog("a", "b"))
    after = skill.read_text()
    assert "Always dry-run first.\n" in after and after.endswith("## My workflow\n\nStep one.\n")
    assert "`tools.b.get`" in after  # the generated block was refreshed
    assert after.count(BLOCK_BEGIN) == 1
    assert examples.read_text() == "# My examples\n"
    assert (root / "plugin.json").read_text() == '{"name": "custom"}\n'
    assert (root / skill_dir("ops") / "references" / "tools.b.d.ts").exists()

    _plugin(root, _catalog("a"))
    assert not (root / skill_dir("ops") / "references" / "tools.b.d.ts").exists()
    assert "Always dry-run first." in skill.read_text()


def test_a_transaction_of_a_live_writer_is_not_rolled_back(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, _catalog("a"))
    before = _snapshot(out)
    # Another (live) process holds the transaction folder.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        txn = out / writer_module.TXN_DIR
        txn.mkdir()
        (txn / "pid").write_text(str(sleeper.pid))
        with pytest.raises(ArtifactConflict, match=f"process {sleeper.pid} is writing"):
            plan_write(out, generate(_catalog("a", "b"), name="t"), manifest=LOCK_FILE)
        assert txn.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    plan = plan_write(out, generate(_catalog("a"), name="t"), manifest=LOCK_FILE)
    assert plan.recovered and not plan.changed
    assert _snapshot(out) == before
