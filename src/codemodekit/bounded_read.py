"""Reading a file the user points at (``codemode.toml``, an OpenAPI document, a script,
a committed lock) without trusting what it is.

``read_bounded`` opens without blocking (a FIFO would otherwise wait for a writer forever),
checks what the descriptor really is with ``fstat`` (a symlink to ``/dev/zero`` is a
character device, whatever ``lstat`` says about the link), refuses anything but a regular
file, and never reads more than ``limit`` bytes, even if the file grows meanwhile.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UnreadableFile(OSError):
    """The file is missing, not a regular file, unreadable or over the byte bound.

    ``reason`` is a short clause safe to show (``"is a FIFO (named pipe), not a regular
    file"``); ``missing`` tells a plain "not found" apart.
    """

    def __init__(self, reason: str, *, missing: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.missing = missing


def describe_mode(mode: int) -> str:
    """What a non-regular file is, for a message: ``"a FIFO (named pipe)"``."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at ``path``; ``UnreadableFile`` otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(Path(path), flags)
    except FileNotFoundError:
        raise UnreadableFile("not found", missing=True) from None
    except IsADirectoryError:
        raise UnreadableFile("is a directory, not a regular file") from None
    except OSError as exc:
        raise UnreadableFile(f"cannot be opened ({exc.strerror or type(exc).__name__})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = describe_mode(info.st_mode)
            raise UnreadableFile(f"is {kind}, not a regular file")
        if info.st_size > limit:
            raise UnreadableFile(f"is {info.st_size} bytes, over the {limit} byte limit")
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise UnreadableFile(f"grew past the {limit} byte limit while being read")
        return b"".join(chunks)
    except UnreadableFile:
        raise
    except OSError as exc:
        raise UnreadableFile(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)


__all__ = ["UnreadableFile", "describe_mode", "read_bounded"]
