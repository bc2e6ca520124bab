"""Unpacking sdists, wheels and other archives safely (no path escapes the destination)."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

from knowbench.errors import UserError


def unpack(archive: Path, destination: Path) -> None:
    """Extract `archive` (.zip/.whl or any tar) into `destination`; `UserError` when it cannot."""
    destination.mkdir(parents=True, exist_ok=True)
    try:
        if archive.name.lower().endswith((".zip", ".whl")):
            with zipfile.ZipFile(archive) as bundle:
                for member in bundle.namelist():
                    if not (destination / member).resolve().is_relative_to(destination.resolve()):
                        raise UserError(f"{archive}: unsafe path in archive: {member}")
                bundle.extractall(destination)
        else:
            with tarfile.open(archive) as bundle:
                bundle.extractall(destination, filter="data")
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as error:
        raise UserError(f"{archive}: cannot unpack it ({error})") from None


def single_root(destination: Path) -> Path:
    """The one directory an archive unpacked into (an sdist's `name-version/`), else `destination`."""
    entries = [entry for entry in destination.iterdir() if not entry.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return destination
