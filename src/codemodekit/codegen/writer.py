"""Write a generated file set as one transaction; the only part of codegen that does I/O.

``plan_write`` compares ``{path: text}`` with the directory: it decides what changes, which
stale generated files go, and refuses to overwrite a file a person wrote. ``apply`` then:

1. stages every new text under ``<root>/.codemode-txn/new``;
2. records a journal, then swaps file by file, moving each replaced or stale file into
   ``.codemode-txn/old``; the manifest (``catalog.json``) is installed last and is the
   commit point;
3. on any failure restores every moved file and removes every installed one.

A process killed mid-swap leaves the journal behind; the next ``plan_write`` on that
directory rolls it back first, so readers only ever see a complete old or new set.
Files whose content is unchanged are never touched (their mtime stays).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from codemodekit.bounded_read import UnreadableFile, read_bounded
from codemodekit.codegen.lockfile import manifest_files
from codemodekit.codegen.plugin import ArtifactKind, merge_generated_block
from codemodekit.errors import CodeModeError
from codemodekit.safe_write import create_new

TXN_DIR = ".codemode-txn"
_JOURNAL = "journal.json"
_COMMITTED = "committed"
_OWNER = "pid"


class ArtifactConflict(CodeModeError):
    """A generated path is occupied by a file the generator did not write."""


def _all_generated(_path: str) -> ArtifactKind:
    return "generated"


@dataclass(frozen=True, slots=True)
class WritePlan:
    root: Path
    manifest: str
    writes: Mapping[str, str]
    """Path → final text, for every file that is new or changes (manifest last)."""
    deletes: tuple[str, ...]
    """Stale files a previous run generated."""
    unchanged: tuple[str, ...]
    current: Mapping[str, str | None] = field(repr=False)
    """What is on disk now for every path in ``writes`` and ``deletes`` (``None``: absent)."""
    recovered: bool = False
    """An interrupted transaction was found and rolled back while planning."""

    @property
    def changed(self) -> bool:
        return bool(self.writes or self.deletes)

    def diff(self) -> str:
        """A unified diff from the directory to the generated set (empty when in sync)."""
        chunks: list[str] = []
        shown = self.root.as_posix()
        for path in sorted({*self.writes, *self.deletes}):
            old = self.current.get(path)
            new = self.writes.get(path)
            chunks.append(
                "".join(
                    difflib.unified_diff(
                        (old or "").splitlines(keepends=True),
                        (new or "").splitlines(keepends=True),
                        fromfile="/dev/null" if old is None else f"{shown}/{path}",
                        tofile="/dev/null" if new is None else f"{shown}/{path} (generated)",
                    )
                )
            )
        return "".join(c if c.endswith("\n") else c + "\n" for c in chunks if c)


def _safe_relative(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or "\\" in path:
        raise ValueError(f"generated path {path!r} must be relative and inside the output")
    if pure.parts[0] == TXN_DIR:
        raise ValueError(f"generated path {path!r} uses the reserved {TXN_DIR} folder")
    return pure.as_posix()


MAX_GENERATED_FILE_BYTES = 64 * 1024 * 1024
"""A file in the output folder larger than this is never read (it cannot be ours)."""


def _read(path: Path) -> str | None:
    try:
        return read_bounded(path, MAX_GENERATED_FILE_BYTES).decode("utf-8")
    except UnreadableFile as exc:
        if exc.missing:
            return None
        return "\ufffd"  # never equal to generated text: the path is treated as occupied
    except UnicodeDecodeError:
        return "\ufffd"


def _no_links(root: Path, path: str) -> None:
    """Refuse a path below ``root`` that goes through (or is) a symbolic link.

    ``catalog.json`` is committed, so its ``files`` list is input: ``link/x`` with ``link``
    pointing out of the folder would make a delete or a write land outside it. Nothing
    below the output folder is followed; the folder itself may be a link the user chose.
    """
    current = root
    for part in PurePosixPath(path).parts:
        current = current / part
        if current.is_symlink():
            shown = current.relative_to(root).as_posix()
            raise ArtifactConflict(
                f"{root}: {shown} is a symbolic link; codemode generate never follows a "
                "link inside its output folder (a write or delete could land outside it). "
                "Remove the link, or choose another output directory."
            )


def plan_write(
    root: Path,
    files: Mapping[str, str],
    *,
    manifest: str,
    kind: Callable[[str], ArtifactKind] = _all_generated,
    recover: bool = True,
) -> WritePlan:
    """What writing ``files`` under ``root`` would change. Raises ``ArtifactConflict``.

    ``manifest`` is the generated JSON file (with a ``files`` list) that records which
    files are the generator's own; it is written last. With ``recover=False`` an
    interrupted transaction is reported instead of rolled back (for ``--check``).
    """
    root = Path(root)
    recovered = False
    _no_links(root, TXN_DIR)
    _no_links(root, manifest)
    if (root / TXN_DIR).exists():
        if not recover:
            raise ArtifactConflict(
                f"{root / TXN_DIR} holds an interrupted write; run `codemode generate` "
                "to roll it back"
            )
        recovered = recover_interrupted(root)
    owned = {p for p in manifest_files(_read(root / manifest)) if _is_safe(p)}
    writes: dict[str, str] = {}
    current: dict[str, str | None] = {}
    unchanged: list[str] = []
    conflicts: list[str] = []
    for raw_path in sorted(files, key=lambda p: (p == manifest, p)):
        path = _safe_relative(raw_path)
        _no_links(root, path)
        text = files[raw_path]
        on_disk = _read(root / path)
        how = kind(path)
        if how == "block":
            text = merge_generated_block(on_disk, text)
        elif how == "seed" and on_disk is not None:
            unchanged.append(path)
            continue
        if on_disk == text:
            unchanged.append(path)
            continue
        if on_disk is not None and how == "generated" and path not in owned and path != manifest:
            conflicts.append(path)
            continue
        writes[path] = text
        current[path] = on_disk
    if conflicts:
        listed = ", ".join(conflicts[:5]) + (" …" if len(conflicts) > 5 else "")
        raise ArtifactConflict(
            f"{root}: {len(conflicts)} file(s) would be overwritten but were not generated "
            f"by codemode (not listed in {manifest}): {listed}. Move or delete them, or "
            "choose another output directory."
        )
    generated_now = {p for p in files if kind(p) == "generated"}
    deletes = []
    for path in sorted(owned - generated_now - {manifest}):
        _no_links(root, path)
        on_disk = _read(root / path)
        if on_disk is not None:
            deletes.append(path)
            current[path] = on_disk
    return WritePlan(root, manifest, writes, tuple(deletes), tuple(unchanged), current, recovered)


def _links_through(root: Path, path: str) -> bool:
    try:
        _no_links(root, path)
    except ArtifactConflict:
        return True
    return False


def _is_safe(path: str) -> bool:
    try:
        _safe_relative(path)
    except ValueError:
        return False
    return True


def apply(plan: WritePlan) -> None:
    """Perform ``plan`` atomically as a set (see the module docstring)."""
    if not plan.changed:
        return
    root = plan.root
    root.mkdir(parents=True, exist_ok=True)
    for path in (TXN_DIR, *plan.deletes, *plan.writes):
        _no_links(root, path)  # again: the folder may have changed since planning
    txn = root / TXN_DIR
    try:
        txn.mkdir()  # also the lock: a second writer on the same folder stops here
    except FileExistsError:
        raise ArtifactConflict(
            f"{txn} exists: another `codemode generate` is writing this folder, or one was "
            "interrupted; run `codemode generate` again once it has finished"
        ) from None
    try:
        # Everything staged is created new in the folder made above (never through a link).
        create_new(txn / _OWNER, str(os.getpid()))
        for path, text in plan.writes.items():
            staged = txn / "new" / path
            staged.parent.mkdir(parents=True, exist_ok=True)
            create_new(staged, text)
        journal = {
            "writes": [[p, plan.current.get(p) is not None] for p in plan.writes],
            "deletes": list(plan.deletes),
        }
        _write_json(txn / _JOURNAL, journal)
        for path in plan.deletes:
            _move(root / path, txn / "old" / path)
        for path in plan.writes:  # manifest is last: it is the commit point
            target = root / path
            if target.exists():
                _move(target, txn / "old" / path)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(txn / "new" / path, target)
        (txn / _COMMITTED).touch()
    except BaseException:
        _rollback(root)
        raise
    shutil.rmtree(txn, ignore_errors=True)
    for path in plan.deletes:
        _prune_empty_parents(root, root / path)


def recover_interrupted(root: Path) -> bool:
    """Finish (if committed) or roll back a transaction a killed process left behind."""
    txn = Path(root) / TXN_DIR
    _no_links(Path(root), TXN_DIR)
    if not txn.exists():
        return False
    owner = _owner(txn)
    if owner is not None and owner != os.getpid() and _alive(owner):
        raise ArtifactConflict(
            f"{txn}: process {owner} is writing this folder now; run `codemode generate` "
            "again once it has finished"
        )
    if (txn / _COMMITTED).exists():
        shutil.rmtree(txn, ignore_errors=True)
        return True
    _rollback(Path(root))
    return True


def _owner(txn: Path) -> int | None:
    try:
        return int(read_bounded(txn / _OWNER, 64).decode("ascii"))
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists but belongs to someone else
    return True


def _rollback(root: Path) -> None:
    txn = root / TXN_DIR
    try:
        journal = json.loads(read_bounded(txn / _JOURNAL, MAX_GENERATED_FILE_BYTES))
    except (OSError, ValueError, RecursionError):
        journal = None  # failed while staging: nothing in the output was touched yet
    if isinstance(journal, dict):
        for path, existed in reversed(journal.get("writes", [])):
            if not _is_safe(path) or _links_through(root, path):
                continue
            backup, target = txn / "old" / path, root / path
            if backup.exists():
                os.replace(backup, target)
            elif not existed and target.exists():
                target.unlink()
                _prune_empty_parents(root, target)
        for path in journal.get("deletes", []):
            backup = txn / "old" / path
            if _is_safe(path) and not _links_through(root, path) and backup.exists():
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                os.replace(backup, root / path)
    shutil.rmtree(txn, ignore_errors=True)


def _move(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, destination)


def _write_json(path: Path, value: object) -> None:
    create_new(path, json.dumps(value))


def _prune_empty_parents(root: Path, path: Path) -> None:
    parent = path.parent
    while parent != root and root in parent.parents:
        with contextlib.suppress(OSError):
            parent.rmdir()  # fails (and stops) at the first non-empty folder
        if parent.exists():
            return
        parent = parent.parent
