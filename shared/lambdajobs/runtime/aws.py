"""boto3 clients, created lazily and injectable.

Never at import time: cold starts pay for eager clients, and moto can only intercept clients created
after it starts. Every client honours `AWS_ENDPOINT_URL`, which is how the local stack redirects them.
"""

from __future__ import annotations

import threading
from typing import Any

_clients: dict[str, Any] = {}
_lock = threading.Lock()


def client(service: str) -> Any:
    """A shared client for `service` ('sqs', 'dynamodb', 'ssm'), created on first use."""
    found = _clients.get(service)
    if found is not None:
        return found
    with _lock:
        if service not in _clients:
            import boto3
            from botocore.config import Config

            _clients[service] = boto3.session.Session().client(
                service, config=Config(retries={"mode": "standard", "max_attempts": 5})
            )
        return _clients[service]


def set_client(service: str, instance: Any) -> None:
    """Inject a client (tests, or a producer that manages its own session)."""
    with _lock:
        _clients[service] = instance


def reset_clients() -> None:
    """Forget every client, so the next call creates fresh ones (after credentials or endpoints change)."""
    with _lock:
        _clients.clear()
