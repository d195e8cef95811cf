"""The source-size limit, checked before anything is parsed or sent (no parser import)."""

from __future__ import annotations

from codemodekit.errors import CompileFailure, Diagnostic, ErrorCode


def check_source_size(source: str, max_source_bytes: int) -> None:
    """Raise ``SOURCE_TOO_LARGE`` before a source is parsed or sent anywhere."""
    _check_size(source.encode("utf-8", "surrogatepass"), max_source_bytes)


def _check_size(data: bytes, max_source_bytes: int) -> None:
    # Checked before parsing, so an oversized input costs nothing but its encoding.
    if len(data) > max_source_bytes:
        raise CompileFailure(
            Diagnostic(
                ErrorCode.SOURCE_TOO_LARGE,
                f"code is {len(data)} bytes; the limit is {max_source_bytes} bytes: "
                "split the work into smaller runs",
            )
        )
