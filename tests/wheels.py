"""Wheels made by hand for the tests' own package index (a folder pip reads with --find-links), so
that tests which install dependencies for Lambda's platform stay offline and fast."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def make_wheel(
    folder: Path,
    name: str,
    version: str = "1.0",
    *,
    tag: str = "py3-none-any",
    files: dict[str, str] | None = None,
    requires: tuple[str, ...] = (),
) -> Path:
    """A wheel of distribution `name` (its module is `name` with `_`), tagged `tag`, holding `files`
    (default: a module `<name>/__init__.py` with `VERSION`), depending on `requires`."""
    module = name.replace("-", "_")
    files = files if files is not None else {f"{module}/__init__.py": f"VERSION = {version!r}\n"}
    info = f"{module}-{version}.dist-info"
    metadata = "".join(
        [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
        + [f"Requires-Dist: {r}\n" for r in requires]
    )
    abi = tag.split("-")[1]
    purelib = "true" if abi == "none" else "false"
    wheel = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: {purelib}\nTag: {tag}\n"
    entries = {**files, f"{info}/METADATA": metadata, f"{info}/WHEEL": wheel}
    record = []
    for path, text in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{module}-{version}-{tag}.whl"
    with zipfile.ZipFile(out, "w") as archive:
        for path, text in entries.items():
            archive.writestr(path, text)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return out


def offline_index(monkeypatch, wheelhouse: Path) -> None:
    """pip reads only `wheelhouse` (no index, no pip.conf), as a project's own index would be."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
