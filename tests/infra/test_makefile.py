"""`make test` on a fresh machine: it gets Debian's Chromium for the browser tests itself (apt-get,
with sudo when not root), or stops before any test with one line saying what to install; `.ci/run`
is then only `make test` and `make lint`.

The `chromium` target runs here with a stand-in apt-get (and sudo) on PATH that records its calls,
and a Debian path of the test's own: nothing is installed on this machine.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

APT_GET = """#!/bin/sh
echo "apt-get $*" >> "$STAND_IN_CALLS"
case "$*" in *install*) [ -n "$STAND_IN_INSTALLS" ] && mkdir -p "${STAND_IN_INSTALLS%/*}" \\
    && printf '#!/bin/sh\\n' > "$STAND_IN_INSTALLS" \\
    && chmod +x "$STAND_IN_INSTALLS" || { echo "E: Unable to locate package chromium" >&2; exit 100; } ;; esac
"""


@pytest.fixture
def machine(tmp_path):
    """(run `make -s chromium` with extra env / make variables, the calls apt-get got)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "apt-get").write_text(APT_GET)
    (tools / "sudo").write_text('#!/bin/sh\necho "sudo $*" >> "$STAND_IN_CALLS"\nexec "$@"\n')
    for tool in tools.iterdir():
        tool.chmod(0o755)
    calls = tmp_path / "calls"
    calls.touch()
    debian = tmp_path / "usr-bin" / "chromium"
    log = tmp_path / "build" / "chromium-install.log"

    def make(env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        # (MAKELEVEL and MAKEFLAGS: under `make test` this make would be a sub-make, `make[1]: ***`)
        environ = {
            k: v
            for k, v in os.environ.items()
            if k not in ("LAMBDAJOBS_CHROMIUM", "MAKELEVEL", "MAKEFLAGS", "MFLAGS")
        }
        environ.update(PATH=f"{tools}:/usr/bin:/bin", STAND_IN_CALLS=str(calls), **(env or {}))
        out = subprocess.run(
            ["make", "-s", "chromium", f"DEBIAN_CHROMIUM={debian}", f"CHROMIUM_LOG={log}"],
            cwd=ROOT,
            env=environ,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return out, [line for line in calls.read_text().splitlines() if line.startswith("apt-get")]

    make.debian = debian  # type: ignore[attr-defined]
    make.log = log  # type: ignore[attr-defined]
    return make


def errors(out: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in out.stderr.splitlines() if not re.match(r"make(\[\d+\])?: \*\*\*", line)]


def test_make_test_checks_chromium_before_pytest():
    assert re.search(r"^test: .*\bchromium\b", (ROOT / "Makefile").read_text(), re.M)
    ci = (ROOT / ".ci" / "run").read_text()
    assert [line for line in ci.splitlines() if line.startswith("make")] == ["make test", "make lint"]


def test_a_missing_chromium_is_installed_with_apt_get(machine):
    out, apt = machine({"STAND_IN_INSTALLS": str(machine.debian)})
    assert out.returncode == 0, out.stderr
    assert apt == ["apt-get update -qq", "apt-get install -y -qq chromium"]
    assert machine.debian.exists()


def test_when_apt_get_cannot_install_it_one_line_says_what_to_install(machine):
    out, apt = machine()
    assert out.returncode != 0 and len(apt) == 2
    assert errors(out) == [
        f"error: apt-get could not install chromium ({machine.log} says why): install "
        "Debian's chromium package, or set LAMBDAJOBS_CHROMIUM to a Chromium."
    ]
    assert "Unable to locate package chromium" in machine.log.read_text()


def test_a_chromium_that_is_there_is_left_alone(machine, tmp_path):
    chromium = tmp_path / "my-chromium"
    chromium.write_text("#!/bin/sh\n")
    chromium.chmod(0o755)
    out, apt = machine({"LAMBDAJOBS_CHROMIUM": str(chromium)})
    assert (out.returncode, out.stdout, out.stderr, apt) == (0, "", "", [])


def test_a_named_chromium_that_is_missing_is_one_line_and_not_installed(machine, tmp_path):
    out, apt = machine({"LAMBDAJOBS_CHROMIUM": str(tmp_path / "nowhere")})
    assert out.returncode != 0 and apt == []
    assert errors(out) == [
        f"error: no Chromium at {tmp_path / 'nowhere'} (LAMBDAJOBS_CHROMIUM); point it at one, or unset it "
        "for Debian's."
    ]
