"""Fetch the official JSON-Schema-Test-Suite into .cache/corpora (idempotent).

The suite ships inside the ``jsonschema`` sdist under ``json/``; PyPI is the only
registry this project may reach, so the sdist is downloaded with pip and only
``json/tests/`` (plus the suite's README and LICENSE) is extracted.

    python tests/corpora/fetch_jsonschema_suite.py [--dest DIR] [--version 4.26.0]

Exit status 0 when the suite is present afterwards.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DEST = ROOT / ".cache" / "corpora" / "JSON-Schema-Test-Suite"
DEFAULT_VERSION = "4.26.0"
MARKER = ".complete"


def suite_dir(dest: Path = DEFAULT_DEST) -> Path | None:
    """The extracted suite, or ``None`` when it has not been fetched (completely)."""
    return dest if (dest / MARKER).exists() and (dest / "tests").is_dir() else None


def _wanted(name: str) -> str | None:
    """Path inside the suite for a member of the sdist, or ``None`` to leave it out."""
    parts = name.split("/")
    if len(parts) < 3 or parts[1] != "json":
        return None
    inner = "/".join(parts[2:])
    if inner.startswith("tests/") or inner in ("README.md", "LICENSE"):
        return inner
    return None


def fetch(dest: Path = DEFAULT_DEST, version: str = DEFAULT_VERSION) -> Path:
    if suite_dir(dest) is not None:
        return dest
    with tempfile.TemporaryDirectory(prefix="jsts-") as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"jsonschema=={version}",
                "-d",
                tmp,
            ],
            check=True,
        )
        archives = sorted(Path(tmp).glob("jsonschema-*.tar.gz"))
        if not archives:
            raise SystemExit(f"pip downloaded no jsonschema sdist into {tmp}")
        staging = dest.with_name(dest.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        with tarfile.open(archives[0]) as archive:
            for member in archive.getmembers():
                inner = _wanted(member.name)
                if inner is None or not member.isfile():
                    continue
                target = staging / inner
                # Refuse anything that would escape the destination.
                if not target.resolve().is_relative_to(staging.resolve()):
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                source = archive.extractfile(member)
                if source is not None:
                    target.write_bytes(source.read())
        (staging / MARKER).write_text(f"jsonschema=={version}\n")
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    parser.add_argument("--version", default=DEFAULT_VERSION)
    args = parser.parse_args(argv)
    try:
        path = fetch(args.dest, args.version)
    except (subprocess.CalledProcessError, OSError, tarfile.TarError) as exc:
        print(
            f"could not fetch the JSON-Schema-Test-Suite (jsonschema=={args.version} sdist): "
            f"{exc}; the tests that read it skip (on CI they fail)",
            file=sys.stderr,
        )
        return 1
    print(f"JSON-Schema-Test-Suite: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
