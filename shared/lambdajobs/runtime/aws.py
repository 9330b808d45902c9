"""boto3 clients, created lazily, one per service and connection, and injectable.

Never at import time: cold starts pay for eager clients, and moto can only intercept clients created
after it starts. A connection is what a `StackConfig` says about where AWS is (region, endpoint,
profile, credentials); with none of them set, boto3's own defaults apply (the Lambda environment).
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple


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
_lock = threading.Lock()
#: One botocore data loader for every session: each session would otherwise parse the service models,
#: endpoint rules and partitions again (about 0.1 s per client: a cold start's, and every test's).
_loader: Any = None


def _session(connection: Connection) -> Any:
    global _loader
    import boto3
    import botocore.session

    core = botocore.session.Session(profile=connection.profile)
    if _loader is None:
        _loader = core.get_component("data_loader")
    else:
        core.register_component("data_loader", _loader)
    return boto3.session.Session(botocore_session=core, region_name=connection.region)


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
