"""Lambda's execution environments, locally: each function runs in worker processes of its own.

A `LocalFunction` is one function as synthesis builds it: its staged asset (`lambdajobs.staging.asset`),
the same handler, the same environment variables (`lambdajobs.staging.environment`) pointed at the local
endpoint, plus Lambda's own (`AWS_LAMBDA_FUNCTION_NAME`, `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, ...). Its
processes (`bootstrap.py` in an isolated interpreter, `python -I -S`) see on `sys.path` only the asset,
your dependencies built for this machine from the lock synth uses, and what Lambda provides (the
Powertools layer's packages and the runtime's boto3, linked from this environment): nothing else of
your project. A library your jobs import but do not declare fails here as it would on Lambda.

As on Lambda:
- an environment starts on demand (the init phase: the handler module is imported once), then serves
  one invocation at a time and is reused, warm; a function has at most as many as its event sources
  may have batches in flight (or its reserved concurrency);
- an invocation that runs past the function's timeout is killed with its process: the invocation
  fails ("Task timed out after N seconds"), and the next one starts a fresh environment; a process
  that dies (an `os._exit`, a crash) fails its invocation the same way;
- an init that fails (the handler module itself cannot be imported) fails the invocation and the
  environment is discarded. A job module that cannot be imported is the runtime's to handle
  (`lambdajobs.runtime.entry`): the environment starts and dead-letters the records with the reason,
  and `init_errors` keeps it for the live line.

The whole local stack keeps at most `Fleet.max_processes` processes (`LAMBDAJOBS_LOCAL_MAX_PROCESSES`,
default 4 per core, at least 8): an invocation beyond it takes an idle environment of another function
(stopped, least recently used first) or waits for one.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lambdajobs.runtime.errors import InvocationError, InvocationTimeoutError

log = logging.getLogger("lambdajobs.local")
BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
ENV_MAX_PROCESSES = "LAMBDAJOBS_LOCAL_MAX_PROCESSES"
#: Lambda's init phase may take 10 s (on demand); beyond it, it is retried within the invocation.
INIT_SECONDS = 10.0
ACCOUNT = "123456789012"  # moto's default account


def default_max_processes() -> int:
    given = os.environ.get(ENV_MAX_PROCESSES, "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return max(8, 4 * (os.cpu_count() or 1))


@dataclass(frozen=True)
class LocalFunction:
    """One function: its name, handler, `sys.path` (asset first), environment, timeout and memory;
    `max_environments` (its processes at most)."""

    name: str
    handler: str
    path: tuple[str, ...]
    environment: Mapping[str, str]
    timeout_seconds: float
    memory_mb: int
    max_environments: int
    region: str = "us-east-1"

    @property
    def asset(self) -> str:
        return self.path[0]

    def lambda_environment(self, endpoint: str, credentials: Mapping[str, str]) -> dict[str, str]:
        """The process environment: the function's variables, Lambda's own, pointed at `endpoint`."""
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "TZ": ":UTC",
            "LAMBDA_TASK_ROOT": self.asset,
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.14",
            "AWS_LAMBDA_FUNCTION_NAME": self.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{self.name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": "local",
            "AWS_LAMBDA_LOG_FORMAT": "JSON",
            "AWS_LAMBDA_LOG_LEVEL": "INFO",
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            **credentials,
            **self.environment,
            "AWS_ENDPOINT_URL": endpoint,
        }

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{self.name}"


class Environment:
    """One worker process of a function: started, initialised once, then one invocation at a time."""

    def __init__(self, function: LocalFunction, env: Mapping[str, str], log_stream: IO[str] | None) -> None:
        self.function = function
        to_child, self._requests = os.pipe()
        self._answers, from_child = os.pipe()
        out: Any = log_stream if log_stream is not None else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    str(BOOTSTRAP),
                    json.dumps(list(function.path)),
                    function.handler,
                    str(to_child),
                    str(from_child),
                ],
                env=dict(env),
                cwd=function.asset,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                pass_fds=(to_child, from_child),
                start_new_session=True,  # its own process group: a Ctrl-C reaches the parent only
            )
        except BaseException:
            os.close(self._requests)
            os.close(self._answers)
            raise
        finally:
            os.close(to_child)
            os.close(from_child)
        self._buffer = b""
        self._closed = False
        self.last_used = time.monotonic()
        #: Why the runtime could not load the job (`lambdajobs.runtime.entry.init_error`), if so.
        self.init_error: str | None = None

    def _read(self, timeout: float) -> dict[str, Any] | None:
        """The next answer line; None when `timeout` passed first. Raises EOFError when it died."""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self._answers, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(self._answers, 1 << 16)
                if not chunk:
                    raise EOFError
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def init(self) -> None:
        """Wait for the init phase (at most `INIT_SECONDS`, or the function's timeout if longer).

        Raises:
            InvocationError: the handler module could not be imported, the process died or hung.
        """
        try:
            answer = self._read(max(INIT_SECONDS, self.function.timeout_seconds))
        except EOFError:
            answer = {"init": "failed", "error": {"type": "Runtime.ExitError", "message": self._exit()}}
        if answer is None:
            self.kill()
            raise InvocationError(f"{self.function.name}: init timed out")
        if answer.get("init") != "ok":
            self.kill()
            error = answer.get("error") or {}
            raise InvocationError(f"init failed: {error.get('type')}: {error.get('message')}")
        self.init_error = answer.get("init_error")

    def invoke(self, event: dict[str, Any], timeout: float) -> Any:
        """Run one invocation within `timeout` seconds; its response.

        Raises:
            InvocationTimeoutError: it ran past `timeout`: the process is killed.
            InvocationError: the handler raised, or the process died.
        """
        request = {
            "event": event,
            "timeout_ms": int(timeout * 1000),
            "request_id": str(uuid.uuid4()),
            "function_arn": self.function.arn,
            "trace_id": f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Sampled=0",
        }
        try:
            data = memoryview((json.dumps(request) + "\n").encode())
            while data:  # a batch may be megabytes: more than one write takes
                data = data[os.write(self._requests, data) :]
            answer = self._read(timeout)
        except (EOFError, BrokenPipeError):
            raise InvocationError(f"Runtime.ExitError: {self._exit()}") from None
        finally:
            self.last_used = time.monotonic()
        if answer is None:
            self.kill()
            raise InvocationTimeoutError(f"Task timed out after {timeout:.2f} seconds")
        if "error" in answer:
            error = answer["error"]
            raise InvocationError(f"{error['type']}: {error['message']}")
        return answer["response"]

    def _exit(self) -> str:
        """How the process ended (it closed its end of the pipe: it is ending, or it is killed now)."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.returncode
        return f"the process exited with {'signal ' + str(-code) if code < 0 else 'code ' + str(code)}"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, grace: float = 2.0) -> None:
        """Ask the process to end (no more invocations), then kill it if it does not."""
        if not self._closed:
            self._closed = True
            os.close(self._requests)
            os.close(self._answers)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """End the process now (SIGKILL, as Lambda ends a timed-out environment)."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait()


@dataclass
class FunctionStats:
    cold_starts: int = 0
    timeouts: int = 0
    crashes: int = 0
    #: The last init error, said for the live line: the runtime could not load the function's job (it
    #: dead-letters the records with the reason), or the environment's init failed (every invocation).
    init_error: str | None = None
    init_errors: int = 0


@dataclass
class _Pool:
    function: LocalFunction
    idle: list[Environment] = field(default_factory=list)
    running: set[Environment] = field(default_factory=set)
    stats: FunctionStats = field(default_factory=FunctionStats)

    @property
    def busy(self) -> int:
        return len(self.running)

    @property
    def count(self) -> int:
        return len(self.idle) + self.busy


class Fleet:
    """Every execution environment of a local stack, at most `max_processes` at once."""

    def __init__(
        self,
        *,
        endpoint: str,
        credentials: Mapping[str, str],
        max_processes: int | None = None,
        log_stream: IO[str] | None = None,
    ) -> None:
        self.endpoint, self.credentials, self.log_stream = endpoint, dict(credentials), log_stream
        self.max_processes = max_processes or default_max_processes()
        self._pools: dict[str, _Pool] = {}
        self._starting = 0
        self._cond = threading.Condition()
        self._closed = False

    def add(self, function: LocalFunction) -> LocalFunction:
        self._pools[function.name] = _Pool(function)
        return function

    def function(self, name: str) -> LocalFunction:
        """The function named `name`, as added (its environment, timeout, path)."""
        return self._pools[name].function

    def stats(self, name: str) -> FunctionStats:
        return self._pools[name].stats

    @property
    def processes(self) -> int:
        with self._cond:
            return sum(p.count for p in self._pools.values())

    def handler(self, name: str) -> Any:
        """The function as the event source mapping calls it: `(event, context) -> response`."""

        def invoke(event: dict[str, Any], context: Any) -> Any:
            return self.invoke(name, event)

        return invoke

    def invoke(self, name: str, event: dict[str, Any]) -> Any:
        """Invoke function `name` with `event` in one of its environments (started if need be).

        Raises:
            InvocationError: the invocation failed as a whole (`InvocationTimeoutError` past its timeout).
        """
        pool = self._pools[name]
        env = self._acquire(pool)
        reusable = False
        try:
            result = env.invoke(event, pool.function.timeout_seconds)
            reusable = True
            return result
        except InvocationTimeoutError:
            pool.stats.timeouts += 1
            raise
        except InvocationError:
            reusable = env.alive  # the handler raised: the environment stays, as on Lambda
            if not reusable:
                pool.stats.crashes += 1
            raise
        finally:
            self._release(pool, env, reusable)

    def _acquire(self, pool: _Pool) -> Environment:
        victims: list[Environment] = []
        with self._cond:
            while True:
                if self._closed:
                    raise InvocationError("the local stack is stopping")
                while pool.idle:
                    env = pool.idle.pop()
                    if env.alive:
                        pool.running.add(env)
                        break
                    victims.append(env)
                else:
                    env = None
                if env is not None:
                    break
                total = sum(p.count for p in self._pools.values()) + self._starting
                if pool.count < pool.function.max_environments and total < self.max_processes:
                    self._starting += 1
                    break
                victim = self._least_recently_used(exclude=pool)
                if victim is not None and pool.count < pool.function.max_environments:
                    victims.append(victim)
                    continue
                self._cond.wait(1.0)
        for old in victims:
            old.close(grace=0.5)
        if env is not None:
            return env
        try:
            env = self._start(pool)
        finally:
            with self._cond:
                self._starting -= 1
                self._cond.notify_all()
        return env

    def _start(self, pool: _Pool) -> Environment:
        function = pool.function
        env = Environment(
            function, function.lambda_environment(self.endpoint, self.credentials), self.log_stream
        )
        try:
            env.init()
        except InvocationError as exc:  # the handler module itself: Lambda's Runtime.ImportModuleError
            pool.stats.crashes += 1
            pool.stats.init_errors += 1
            pool.stats.init_error = f"init failed, every invocation fails (the worker log has why): {exc}"
            raise
        pool.stats.cold_starts += 1
        if env.init_error:
            pool.stats.init_errors += 1
            pool.stats.init_error = f"cannot load its job, its records go to its DLQ: {env.init_error}"
        with self._cond:
            pool.running.add(env)
        return env

    def _least_recently_used(self, exclude: _Pool) -> Environment | None:
        """Take the idle environment of another function used longest ago (under the lock)."""
        candidates = [(e.last_used, p, e) for p in self._pools.values() if p is not exclude for e in p.idle]
        if not candidates:
            return None
        _, owner, env = min(candidates, key=lambda c: c[0])
        owner.idle.remove(env)
        return env

    def _release(self, pool: _Pool, env: Environment, reusable: bool) -> None:
        with self._cond:
            pool.running.discard(env)
            keep = reusable and env.alive and not self._closed
            if keep:
                pool.idle.append(env)
            self._cond.notify_all()
        if not keep:
            env.close(grace=0.5)

    def kill_running(self, name: str | None = None, pick: Any = None) -> str | None:
        """Kill the process of one environment that is running an invocation now (of function `name`,
        else of any function; `pick` chooses among them, default the first): the fault of a crash
        mid-invocation (the chaos soak's kill). Its invocation fails as a whole and the batch comes
        back, as on Lambda. Returns the function's name, or None when none was running."""
        with self._cond:
            running = [
                (pool.function.name, env)
                for pool in self._pools.values()
                if name is None or pool.function.name == name
                for env in pool.running
            ]
        if not running:
            return None
        function, env = pick(running) if pick is not None else running[0]
        env.kill()
        return str(function)

    def close(self) -> None:
        """Stop every idle environment (call once no invocation is in flight: the event sources are
        stopped first); one still busy is ended when its invocation returns."""
        with self._cond:
            self._closed = True
            idle = [env for pool in self._pools.values() for env in pool.idle]
            for pool in self._pools.values():
                pool.idle.clear()
            self._cond.notify_all()
        for env in idle:
            env.close()


def function_path(
    asset: Path, dependencies: Path | None, provided: Path, runtime_layer: Path | None = None
) -> tuple[str, ...]:
    """A function's `sys.path` on Lambda, in order: its code (/var/task), its layers (the lambdajobs
    runtime layer's and your dependencies' `python/`; the Powertools layer), the runtime's boto3.
    `provided` holds the last two."""
    path = [str(asset)]
    if runtime_layer is not None:
        path.append(str(runtime_layer / "python"))
    if dependencies is not None:
        path.append(str(dependencies / "python"))
    path.append(str(provided))
    return tuple(path)


def max_environments(concurrencies: Sequence[int], reserved: int | None) -> int:
    """A function's environments at most: its event sources' batches in flight together, capped by
    its reserved concurrency."""
    total = sum(concurrencies)
    return min(total, reserved) if reserved else total
