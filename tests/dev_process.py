"""`lambdajobs dev` as a subprocess, for the tests that drive it: started, read until it is ready,
stopped with SIGTERM (it must exit 0)."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class DevProcess:
    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            command,
            cwd=cwd,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(line)
            if "Ctrl-C" in line:  # the last line it prints once the stack is up
                self.ready.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        """SIGTERM, then wait (in-flight batches finish first); its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(10)
        return self.proc.returncode


@contextmanager
def running_dev(command: list[str], cwd: Path, env: dict[str, str]) -> Iterator[DevProcess]:
    """Start `lambdajobs dev`, wait until it is ready (60 s at most), yield it, stop it."""
    dev = DevProcess(command, cwd, env)
    try:
        assert dev.ready.wait(60), dev.output
        yield dev
    finally:
        dev.stop()
