"""boto3 clients, created lazily, one per service and connection, and injectable.

Never at import time: cold starts pay for eager clients, and moto can only intercept clients created
after it starts. A connection is what a `StackConfig` says about where AWS is (region, endpoint,
profile, credentials); with none of them set, boto3's own defaults apply (the Lambda environment).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

logger = logging.getLogger(__name__)


class Connection(NamedTuple):
    """Where a client talks to. All None: boto3's defaults (environment, profile, instance role)."""

    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None


DEFAULT = Connection()

_clients: dict[tuple[str, Connection], Any] = {}
#: One session per connection, its clients made from it: a botocore session registers some 700 event
#: handlers when it is made (about 20 ms; a worker's cold start makes two or three clients). A session is
#: not thread-safe, so clients are made from it under `_lock` only; the clients themselves are.
_sessions: dict[Connection, Any] = {}
_lock = threading.Lock()
#: One botocore data loader for every session: each session would otherwise parse the service models,
#: endpoint rules and partitions again (about 0.1 s per client: a cold start's, and every test's).
_loader: Any = None


def _data_loader(core: Any) -> Any:
    """botocore's data loader for `core`'s data path (`AWS_DATA_PATH`), except that it tells a service
    exists by its own folder.

    botocore's `Loader.load_service_model` first lists every service it knows (some 420 folders, a
    directory listing and a few file checks each: thousands of file-system calls, once for the service
    model and once for the endpoint rules) only to check that the one asked for is among them: a good
    part of the time a cold start spends making its first client. Here a service's own
    folder answers (`list_api_versions`: the same rule, for one service); a name with no folder gets
    botocore's own `UnknownServiceError`, naming the services it knows.
    """
    import os

    from botocore.exceptions import DataNotFoundError
    from botocore.loaders import Loader, instance_cache

    class ServiceLoader(Loader):
        @instance_cache
        def load_service_model(
            self, service_name: str, type_name: str, api_version: str | None = None
        ) -> Any:
            try:  # the service's own versions (botocore's rule: a folder holding a `type_name` file)
                versions = self.list_api_versions(service_name, type_name)
            except DataNotFoundError:  # botocore's walk, and its error naming the known services
                return super().load_service_model(service_name, type_name, api_version)
            version = api_version or max(versions)  # botocore's determine_latest_version
            model = self.load_data(os.path.join(service_name, version, type_name))
            self._extras_processor.process(model, self._find_extras(service_name, type_name, version))
            return model

    paths = core.get_config_variable("data_path")
    extra = [os.path.expanduser(os.path.expandvars(p)) for p in paths.split(os.pathsep)] if paths else None
    return ServiceLoader(extra_search_paths=extra)


def _session(connection: Connection) -> Any:
    """The session of `connection` (call with `_lock` held)."""
    global _loader
    found = _sessions.get(connection)
    if found is not None:
        return found
    import boto3
    import botocore.session

    core = botocore.session.Session(profile=connection.profile)
    if _loader is None:
        _loader = _data_loader(core)
    core.register_component("data_loader", _loader)
    _sessions[connection] = boto3.session.Session(botocore_session=core, region_name=connection.region)
    return _sessions[connection]


def client(service: str, connection: Connection = DEFAULT) -> Any:
    """A shared client for `service` ('sqs', 'dynamodb', 'ssm', ...) on `connection`, created on first use."""
    key = (service, connection)
    found = _clients.get(key)
    if found is not None:
        return found
    with _lock:
        if key not in _clients:
            from botocore.config import Config

            _clients[key] = _session(connection).client(
                service,
                endpoint_url=connection.endpoint_url,
                aws_access_key_id=connection.access_key_id,
                aws_secret_access_key=connection.secret_access_key,
                aws_session_token=connection.session_token,
                # one client is shared by every thread of a process (the local stack's pollers, the
                # board): a pool above urllib3's default 10 keeps them from opening and dropping sockets
                config=Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=32),
            )
        return _clients[key]


def set_client(service: str, instance: Any, connection: Connection = DEFAULT) -> None:
    """Inject a client (tests, or a producer that manages its own session)."""
    with _lock:
        _clients[(service, connection)] = instance


def reset_clients() -> None:
    """Forget every client, so the next call creates fresh ones (after credentials or endpoints change)."""
    with _lock:
        _clients.clear()
        _sessions.clear()


# -- failures that pass by waiting --------------------------------------------------------------------

#: Error codes that pass by waiting: throttles and service-side failures.
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "LimitExceededException",
        "TransactionInProgressException",
        "InternalServerError",
        "InternalFailure",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "KMSThrottlingException",
        "TransactionConflictException",
    }
)
#: Why a transaction was cancelled, when waiting helps: another transaction held an item, a throttle.
TRANSIENT_REASONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})
#: A bookkeeping call that failed (after the SDK's own retries) is tried this many times in all, with
#: jittered pauses from this base, before the caller falls back (the worker: handing the message back).
TRIES = 3
PAUSE_SECONDS = 0.05


def _client_error_transient(exc: Any) -> bool:
    error = exc.response.get("Error", {})
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    if error.get("Code") == "TransactionCanceledException":  # a workflow member's counted write
        reasons = exc.response.get("CancellationReasons") or []
        return any(r.get("Code") in TRANSIENT_REASONS for r in reasons)
    return error.get("Code") in TRANSIENT_CODES or status >= 500


def _wrapped(exc: BaseException) -> BaseException | None:
    """The error Powertools' persistence error wraps (its second argument), if any."""
    if type(exc).__name__ == "IdempotencyPersistenceLayerError" and len(exc.args) > 1:
        inner = exc.args[1]
        return inner if isinstance(inner, BaseException) else None
    return None


def transient(exc: BaseException) -> bool:
    """Whether an error (or the error it wraps: Powertools wraps the SDK's) is a throttle, a
    service-side failure or a connection problem, which may pass on its own."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectTimeoutError,
        HTTPClientError,
        ReadTimeoutError,
    )

    connection = (ConnectionError, HTTPClientError, ConnectTimeoutError, ReadTimeoutError)
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ClientError):
            return _client_error_transient(current)
        if isinstance(current, BotoCoreError) and isinstance(current, connection):
            return True
        current = _wrapped(current) or current.__cause__ or current.__context__
    return False


def retrying(call: Callable[..., Any], *args: Any, rng: random.Random | None = None) -> Exception | None:
    """Run a bookkeeping call (a record write, an SQS send), trying again on failure with a short
    jittered pause. None when it went through, else the last error (logged). The SDK already retried
    each call; an error that will not pass by waiting (access denied, a missing queue, a failed
    condition) is not tried again."""
    try:
        read_retrying(call, *args, rng=rng)
    except Exception as exc:
        error = {"type": type(exc).__name__, "message": str(exc)[:300]}
        logger.warning("bookkeeping call failed", extra={"error": error})
        return exc
    return None


def read_retrying(call: Callable[..., Any], *args: Any, rng: random.Random | None = None) -> Any:
    """`call(*args)`'s answer, tried again (TRIES in all, jittered pauses from PAUSE_SECONDS) while it
    fails with an error that passes by waiting; the last error raises."""
    pick = rng or random
    for n in range(TRIES):
        try:
            return call(*args)
        except Exception as exc:
            if n == TRIES - 1 or not transient(exc):
                raise
            time.sleep((0.5 + 0.5 * pick.random()) * PAUSE_SECONDS * 2**n)
    raise AssertionError("unreachable")  # pragma: no cover
