"""Lambda's platform for lambdajobs' functions, as facts synthesis can check against offline.

Every function runs on python3.14, arm64 (Amazon Linux 2023, glibc 2.34), with the official Powertools
layer of the pinned version. What a function can import there, beside its asset and dependencies:
- the Lambda runtime's own packages: boto3 and what it needs (botocore, s3transfer, dateutil, urllib3,
  six, jmespath);
- the Powertools layer: `aws-lambda-powertools[all]` as AWS builds it, with those runtime packages
  removed (pydantic, pydantic_core, aws_xray_sdk, ... : `lambda_platform.json`, recorded here for the
  pinned version by `python -m lambdajobs.staging.platform`, the way the layer is built);
- Python 3.14's standard library, as a recorded list: this machine's Python may be older, and modules
  that 3.11 has and 3.12 or 3.13 removed (`cgi`, `imghdr`, `telnetlib`, `distutils`, ...) are missing
  on Lambda.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

#: The functions' Python and architecture (cdk.job_worker.RUNTIME, ARCHITECTURE).
PYTHON_VERSION = "3.14"
IMPLEMENTATION = "cp"
ABI = "cp314"
#: Wheel platform tags Lambda's arm64 Amazon Linux 2023 (glibc 2.34) runs; pure-Python wheels too.
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_34_aarch64")
#: Lambda's limit on a function's code and layers together, unzipped (250 MB).
MAX_UNZIPPED_BYTES = 250 * 1024 * 1024

#: The Lambda Python runtime's own packages (distribution -> top-level module). The Powertools layer
#: is built without them (AWS's layer build removes them: the runtime provides them).
RUNTIME_PACKAGES = {
    "boto3": "boto3",
    "botocore": "botocore",
    "s3transfer": "s3transfer",
    "python-dateutil": "dateutil",
    "urllib3": "urllib3",
    "six": "six",
    "jmespath": "jmespath",
}

_MANIFEST = Path(__file__).with_name("lambda_platform.json")

#: Top-level standard library modules this machine's Python has and 3.14 does not: removed in 3.12
#: (PEP 632, PEP 623's follow-ups: distutils, imp, asynchat, asyncore, smtpd) and 3.13 (PEP 594's
#: dead batteries, and lib2to3).
REMOVED_BY_314 = frozenset(
    {
        "asynchat",
        "asyncore",
        "distutils",
        "imp",
        "smtpd",
        "aifc",
        "audioop",
        "cgi",
        "cgitb",
        "chunk",
        "crypt",
        "imghdr",
        "mailcap",
        "msilib",
        "nis",
        "nntplib",
        "ossaudiodev",
        "pipes",
        "sndhdr",
        "spwd",
        "sunau",
        "telnetlib",
        "uu",
        "xdrlib",
        "lib2to3",
        "_crypt",
        "_msi",
    }
)
#: Top-level modules 3.12 to 3.14 added (3.14: annotationlib, compression; 3.13: the new REPL's).
ADDED_BY_314 = frozenset({"annotationlib", "compression", "_colorize", "_pyrepl", "_interpreters", "_zstd"})


@cache
def manifest() -> dict[str, Any]:
    """The recorded Powertools layer contents (`lambda_platform.json`)."""
    return json.loads(_MANIFEST.read_text())


def layer_version() -> str:
    """The Powertools version the recorded layer manifest describes."""
    return str(manifest()["powertools_version"])


def layer_modules() -> frozenset[str]:
    return frozenset(manifest()["layer"]["modules"])


def layer_distributions() -> dict[str, str]:
    """Distribution name (normalized) -> version, in the recorded Powertools layer."""
    return dict(manifest()["layer"]["distributions"])


def layer_unzipped_bytes() -> int:
    return int(manifest()["layer"]["unzipped_bytes"])


def runtime_modules() -> frozenset[str]:
    return frozenset(RUNTIME_PACKAGES.values())


def stdlib_modules() -> frozenset[str]:
    """Top-level modules of Lambda's Python's (3.14) standard library."""
    names = manifest().get("stdlib")
    if names:
        return frozenset(names)
    return frozenset(sys.stdlib_module_names) - REMOVED_BY_314 | ADDED_BY_314


def pip_platform_args() -> list[str]:
    """pip's options selecting wheels for Lambda's platform only (never a local build)."""
    args = ["--only-binary=:all:", "--implementation", IMPLEMENTATION, "--python-version", PYTHON_VERSION]
    args += ["--abi", ABI]
    for tag in PLATFORMS:
        args += ["--platform", tag]
    return args


def platform_label() -> str:
    return f"python{PYTHON_VERSION}, arm64 ({', '.join(PLATFORMS)}, abi {ABI}, or pure Python)"


def normalize(name: str) -> str:
    """A distribution name as the package index compares them (PEP 503)."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def record_manifest(version: str, out: Path = _MANIFEST) -> dict[str, Any]:
    """Record the Powertools layer's contents for `version`, built as AWS builds the layer: pip
    installs `aws-lambda-powertools[all]` for the functions' platform, and the runtime's packages are
    removed. Needs the package index (run by a maintainer when the Powertools pin moves)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "layer"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--target",
                str(target),
                *pip_platform_args(),
                f"aws-lambda-powertools[all]=={version}",
            ],
            check=True,
        )
        distributions: dict[str, str] = {}
        removed: set[str] = set()
        for info in target.glob("*.dist-info"):
            meta = {}
            for line in (info / "METADATA").read_text().splitlines():
                key, _, value = line.partition(": ")
                if key in ("Name", "Version") and key not in meta:
                    meta[key] = value
            name = normalize(meta["Name"])
            if name in RUNTIME_PACKAGES:
                for row in (info / "RECORD").read_text().splitlines():
                    removed.add(row.split(",")[0].split("/")[0])
                continue
            distributions[name] = meta["Version"]
        from lambdajobs.staging.imports import top_level_modules

        modules = sorted(top_level_modules(target) - {m.split(".")[0] for m in removed} - {"bin"})
        size = sum(
            p.stat().st_size
            for p in target.rglob("*")
            if p.is_file() and p.relative_to(target).parts[0] not in removed
        )
    stdlib = sorted(frozenset(sys.stdlib_module_names) - REMOVED_BY_314 | ADDED_BY_314)
    data = {
        "powertools_version": version,
        "python": PYTHON_VERSION,
        "platforms": list(PLATFORMS),
        "layer": {
            "distributions": dict(sorted(distributions.items())),
            "modules": [m for m in modules if not m.endswith("-stubs")],
            "unzipped_bytes": size,
        },
        "runtime": sorted(RUNTIME_PACKAGES),
        "stdlib": stdlib,
    }
    out.write_text(json.dumps(data, indent=1) + "\n")
    manifest.cache_clear()
    return data


if __name__ == "__main__":  # python -m lambdajobs.staging.platform 3.37.0
    from importlib.metadata import version as installed

    record_manifest(sys.argv[1] if len(sys.argv) > 1 else installed("aws-lambda-powertools"))
    print(f"wrote {_MANIFEST}")


def link_provided(folder: Path) -> Path:
    """Link into `folder` every package of the recorded layer and the Lambda runtime that is installed
    here: what a function imports on Lambda beside its asset and dependencies, from this environment
    (the local stack's functions, and the cold starts of the tests). A layer package not installed
    here is one nothing of lambdajobs imports; the import check vouches for the rest. Returns
    `folder`."""
    import importlib.util

    folder.mkdir(parents=True, exist_ok=True)
    for name in sorted(layer_modules() | runtime_modules()):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or (folder / name).exists():
            continue
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        link = folder / source.name
        if not link.exists():
            link.symlink_to(source)
    return folder
