"""Two releases of a library from PyPI, downloaded but never installed.

`resolve_versions` turns `--old/--new` or `--cutoff DATE` into two versions, using the upload
times that PyPI's JSON API (`https://pypi.org/pypi/<name>/json`) gives for every file of every
release: the *old* version is the newest final release whose first file was uploaded before
the cutoff, the *new* one the newest final release uploaded after it (or the `--new` given).
Pre-releases and yanked releases are never chosen by date.

`fetch_release` downloads one file of a release (the sdist by default: it usually carries the
tests and the docs that stage 2 mines for examples; the pure-Python wheel, else any wheel,
when there is no sdist or `prefer="wheel"`), checks its sha256 against the index, and unpacks
it under `knowbench_home()/novel/dists/` where later runs find it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urljoin

import httpx

from knowbench.archives import single_root, unpack
from knowbench.errors import UserError
from knowbench.jsonl import load_json
from knowbench.paths import knowbench_home

INDEX_ENV = "KNOWBENCH_PYPI_URL"
DEFAULT_INDEX = "https://pypi.org/pypi"
Prefer = Literal["sdist", "wheel"]
_FINAL = re.compile(r"^\d+(\.\d+)*(\.post\d+)?$")


@dataclass(frozen=True)
class Release:
    """One downloaded and unpacked release."""

    name: str
    version: str
    uploaded: str | None
    filename: str
    packagetype: str
    sha256: str
    root: Path

    def describe(self) -> dict[str, Any]:
        data = asdict(self)
        data["root"] = str(self.root)
        return data


def cache_dir() -> Path:
    return knowbench_home() / "novel"


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def project_json(name: str, *, refresh: bool = False) -> dict[str, Any]:
    """PyPI's JSON record of project `name` (cached for a day under the novel cache)."""
    path = cache_dir() / "index" / f"{normalise(name)}.json"
    if not refresh and path.is_file() and (datetime.now().timestamp() - path.stat().st_mtime) < 86400:
        return load_json(path.read_text())
    url = f"{os.environ.get(INDEX_ENV, DEFAULT_INDEX).rstrip('/')}/{name}/json"
    try:
        response = httpx.get(url, timeout=60, follow_redirects=True)
    except httpx.HTTPError as error:
        if path.is_file():
            return load_json(path.read_text())
        raise UserError(f"cannot reach the package index for {name!r} ({error})\n"
                        f"  fix: check the network, or set {INDEX_ENV} to a reachable JSON API") from None
    if response.status_code == 404:
        raise UserError(f"{name!r} is not on the package index ({url})\n  fix: check the project's name")
    if response.status_code != 200:
        raise UserError(f"the package index answered {response.status_code} for {url}")
    data = load_json(response.content)
    data["_json_url"] = str(response.url)  # file URLs may be relative to it (mirrors)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return data


def upload_times(data: dict[str, Any]) -> dict[str, datetime]:
    """version -> first upload time of its files (releases without files are left out)."""
    times: dict[str, datetime] = {}
    for version, files in (data.get("releases") or {}).items():
        stamps = [_parse_time(f.get("upload_time_iso_8601") or f.get("upload_time")) for f in files
                  if not f.get("yanked")]
        stamps = [stamp for stamp in stamps if stamp is not None]
        if stamps:
            times[version] = min(stamps)
    return times


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split(".post")[0]))


def resolve_versions(name: str, old: str | None, new: str | None, cutoff: str | None) -> dict[str, Any]:
    """The two versions to compare, and how each was chosen.

    With `cutoff`: old = newest final release first uploaded before the date; new = `new` if
    given (it must exist), else the newest final release uploaded after the date. Without:
    both `old` and `new` are required and must exist. Raises `UserError` otherwise.
    """
    data = project_json(name)
    times = upload_times(data)
    canonical = data.get("info", {}).get("name") or name

    def known(version: str, which: str) -> str:
        if version not in times:
            close = sorted((v for v in times if _FINAL.match(v)), key=_version_key)[-5:]
            raise UserError(f"{canonical} has no release {version!r} ({which})\n"
                            f"  fix: pick one of the releases on the index, e.g. {', '.join(close)}")
        return version

    if cutoff is None:
        if not (old and new):
            raise UserError("give both --old and --new, or --cutoff DATE (YYYY-MM-DD)")
        return {"name": canonical, "old": known(old, "--old"), "new": known(new, "--new"),
                "how": "explicit", "uploaded": {"old": _iso(times[old]), "new": _iso(times[new])}}
    try:
        boundary = datetime.fromisoformat(cutoff)
    except ValueError:
        raise UserError(f"--cutoff {cutoff!r} is not a date\n  fix: write it as YYYY-MM-DD") from None
    boundary = boundary if boundary.tzinfo else boundary.replace(tzinfo=UTC)
    finals = {v: t for v, t in times.items() if _FINAL.match(v)}
    before = [v for v, t in finals.items() if t < boundary]
    after = [v for v, t in finals.items() if t >= boundary]
    if old is None:
        if not before:
            raise UserError(f"{canonical} has no final release before {cutoff}\n"
                            "  fix: pick a later --cutoff or give --old")
        old = max(before, key=_version_key)
    if new is None:
        if not after:
            raise UserError(f"{canonical} has no final release after {cutoff}\n"
                            "  fix: pick an earlier --cutoff or give --new")
        new = max(after, key=_version_key)
    known(old, "--old")
    known(new, "--new")
    if times[new] < boundary:
        raise UserError(f"{canonical} {new} was uploaded on {_iso(times[new])}, before the cutoff {cutoff}\n"
                        "  fix: give a --new released after the cutoff")
    return {"name": canonical, "old": old, "new": new, "how": f"cutoff {cutoff}",
            "uploaded": {"old": _iso(times[old]), "new": _iso(times[new])}}


def _iso(stamp: datetime) -> str:
    return stamp.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _pick_file(files: list[dict[str, Any]], prefer: Prefer) -> dict[str, Any] | None:
    files = [f for f in files if not f.get("yanked")]
    sdists = [f for f in files if f.get("packagetype") == "sdist"]
    wheels = [f for f in files if f.get("packagetype") == "bdist_wheel"]
    pure = [f for f in wheels if f["filename"].endswith("-none-any.whl")]
    linux = sorted((f for f in wheels if "manylinux" in f["filename"] and "x86_64" in f["filename"]),
                   key=lambda f: f["filename"], reverse=True)
    order = (sdists + pure + linux + wheels) if prefer == "sdist" else (pure + linux + wheels + sdists)
    return order[0] if order else None


def fetch_release(name: str, version: str, prefer: Prefer = "sdist") -> Release:
    """Download (or find in the cache) one file of `name==version` and unpack it.

    Raises `UserError` when the release has no sdist or wheel, or the download fails or does
    not match the index's sha256.
    """
    data = project_json(name)
    files = (data.get("releases") or {}).get(version)
    if not files:
        data = project_json(name, refresh=True)
        files = (data.get("releases") or {}).get(version)
    if not files:
        raise UserError(f"{name} {version}: no files on the package index")
    chosen = _pick_file(files, prefer)
    if chosen is None:
        raise UserError(f"{name} {version}: neither an sdist nor a wheel on the package index")
    digest = chosen.get("digests", {}).get("sha256", "")
    base = cache_dir() / "dists" / normalise(name) / version
    archive = base / chosen["filename"]
    unpacked = base / ("unpacked-" + chosen["filename"])
    if not archive.is_file() or (digest and _sha256(archive) != digest):
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_name(archive.name + ".part")
        try:
            url = urljoin(data.get("_json_url") or DEFAULT_INDEX + "/", chosen["url"])
            with httpx.stream("GET", url, timeout=120, follow_redirects=True) as response:
                if response.status_code != 200:
                    raise UserError(f"downloading {url} answered {response.status_code}")
                with partial.open("wb") as handle:
                    for chunk in response.iter_bytes():
                        handle.write(chunk)
        except httpx.HTTPError as error:
            raise UserError(f"cannot download {chosen['filename']} ({error})") from None
        if digest and _sha256(partial) != digest:
            partial.unlink()
            raise UserError(f"{chosen['filename']}: sha256 differs from the package index's")
        partial.replace(archive)
        shutil.rmtree(unpacked, ignore_errors=True)
    if not (unpacked / ".complete").is_file():
        shutil.rmtree(unpacked, ignore_errors=True)
        unpack(archive, unpacked)
        (unpacked / ".complete").write_text(digest)
    root = single_root(unpacked) if chosen["packagetype"] == "sdist" else unpacked
    times = upload_times(data)
    return Release(name=data.get("info", {}).get("name") or name, version=version,
                   uploaded=_iso(times[version]) if version in times else None,
                   filename=chosen["filename"], packagetype=chosen["packagetype"],
                   sha256=digest or _sha256(archive), root=root)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
