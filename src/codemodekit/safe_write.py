"""Writing a file next to a user's file without trusting what is already there.

Every file this project writes into a user's folder (``codemode install``, ``generate``,
``lock``, ``init``) goes through ``write_file``:

- a target that is a symbolic link is refused (the link may have been committed to an
  untrusted repository and point at any file of the user's);
- so is a folder on the way that is a link, below the folder the user chose (``inside``);
- the new content is written to a file created new (``O_CREAT | O_EXCL | O_NOFOLLOW``)
  under a random name in the target's own folder, opened through a descriptor of that
  folder, with its final mode from the start (``0o600`` for a file that holds secrets),
  then renamed over the target in one step (a rename replaces a name, never follows it).

A planted link at any name we would create therefore cannot redirect the write, and no
reader ever sees half a file or a secret under a wider mode.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from codemodekit.bounded_read import describe_mode
from codemodekit.errors import CodeModeError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class UnsafeTarget(CodeModeError):
    """The target (or a folder on its way) is a symbolic link or not a regular file."""


def check_target(path: Path, inside: Path | None = None) -> None:
    """Refuse (``UnsafeTarget``) a ``path`` that is a link or not a regular file, or that
    has a link among the folders between ``inside`` and it."""
    checked = [path]
    if inside is not None:
        try:
            below = path.parent.relative_to(inside)
        except ValueError:
            below = None
        current = inside
        for part in below.parts if below is not None else ():
            current = current / part
            checked.append(current)
    for candidate in checked:
        if candidate.is_symlink():
            what = "" if candidate == path else f" (a folder on the way to {path})"
            try:
                mode = os.stat(candidate).st_mode
                points = "" if stat.S_ISREG(mode) else f" to {describe_mode(mode)}"
            except OSError:
                points = ""
            raise UnsafeTarget(
                f"{candidate}{what} is a symbolic link{points}; codemode never writes through a link "
                "(one committed to a repository could point at any file of yours). "
                "Remove the link and run the command again."
            )
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeTarget(
            f"{path} is {describe_mode(info.st_mode)}, not a regular file; move it away first"
        )


def write_file(
    path: str | os.PathLike[str],
    data: str | bytes,
    *,
    private: bool = False,
    inside: str | os.PathLike[str] | None = None,
    make_parents: bool = False,
) -> None:
    """Replace (or create) the regular file ``path`` with ``data`` in one step.

    ``private`` creates it ``0o600`` (it holds secrets); otherwise an existing file keeps
    its mode and a new one gets ``0o666`` minus the umask. ``inside`` is the folder the user
    chose: no folder between it and ``path`` may be a link (``make_parents`` creates the
    missing ones). Raises ``UnsafeTarget``, or ``OSError`` from the file system.
    """
    target = Path(path)
    root = Path(inside) if inside is not None else None
    if make_parents:
        check_target(target, root)
        target.parent.mkdir(parents=True, exist_ok=True)
    check_target(target, root)
    body = data.encode("utf-8") if isinstance(data, str) else data
    existing = _mode_of(target)
    mode = 0o600 if private else (existing if existing is not None else 0o666)
    # The folder itself may be a link the user chose (``inside`` says which part is ours);
    # everything below is opened through its descriptor, by name, never following a link.
    folder = os.open(target.parent, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        temp = f".{target.name[:64]}.{secrets.token_hex(8)}.codemode-tmp"
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
            mode,
            dir_fd=folder,
        )
        try:
            if existing is not None and not private:
                os.fchmod(fd, existing)  # an existing file keeps its mode, umask or not
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            raise
        os.close(fd)
        try:
            check_target(target, root)  # again, just before the swap
            os.rename(temp, target.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            raise
        with contextlib.suppress(OSError):
            os.fsync(folder)
    finally:
        os.close(folder)


def _mode_of(target: Path) -> int | None:
    """An existing regular file's permission bits (``None``: there is none yet)."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    return stat.S_IMODE(info.st_mode)


def create_new(path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o666) -> None:
    """Create ``path``, which must not exist (not even as a link), and write ``data``."""
    body = data.encode("utf-8") if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["UnsafeTarget", "check_target", "create_new", "write_file"]
