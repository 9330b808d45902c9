"""`JobRecordStore.save_inprogress` / `save_success` write what Powertools' own versions of them write
through the store's `_put_record` / `_update_record` (the lock's deadline, the record's expiry, the
result's JSON), without building Powertools' DataRecord on every job."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.records import JobRecordStore, RunData


class Client:
    """The two calls a first run makes, recorded."""

    class exceptions:  # (as boto3 names it)
        class ConditionalCheckFailedException(Exception):
            pass

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def put_item(self, **request: Any) -> dict[str, Any]:
        self.calls.append(("put_item", request))
        return {}

    def update_item(self, **request: Any) -> dict[str, Any]:
        self.calls.append(("update_item", request))
        return {}


def store() -> tuple[JobRecordStore, Client]:
    client = Client()
    made = JobRecordStore(StackConfig(stack="t", region="us-east-1", table="t-jobs"), client=client)
    made.configure(IdempotencyConfig(expires_after_seconds=7 * 86_400))
    return made, client


def run(job_id: str) -> RunData:
    return RunData(job_id=job_id, job="send", attempt=1, max_attempts=3, redriven=False, about={})


@pytest.mark.parametrize("remaining_ms", [29_123, None])
def test_the_writes_are_powertools_own(remaining_ms):
    result = {"provider_id": "p-1", "n": Decimal("2"), "b": [1.5, "x"]}
    written = []
    for save_inprogress, save_success in (
        (JobRecordStore.save_inprogress, JobRecordStore.save_success),
        (BasePersistenceLayer.save_inprogress, BasePersistenceLayer.save_success),
    ):
        ours, client = store()
        with time_machine.travel(datetime(2026, 11, 29, 12, 0, 0, 250_000, tzinfo=UTC), tick=False):
            data = run("job-1")
            ours._local.run, ours._local.held, ours._local.lock = data, None, None
            with pytest.warns(UserWarning) if remaining_ms is None else _nothing():
                save_inprogress(ours, data, remaining_ms)
            save_success(ours, data, result)
        written.append(client.calls)
    assert written[0] == written[1]
    [(_, acquire), (_, success)] = written[0]
    lock = acquire["Item"].get("in_progress_expiration")
    expected = 1_795_953_600_250 + remaining_ms if remaining_ms is not None else None
    assert (int(lock["N"]) if lock else None) == expected
    assert acquire["Item"]["expiration"] == {"N": str(1_795_953_600 + 7 * 86_400)}
    stored = (
        success["Item"]["result"] if "Item" in success else success["ExpressionAttributeValues"][":result"]
    )
    assert stored == {"S": '{"b": [1.5, "x"], "n": "2", "provider_id": "p-1"}'}  # (Powertools' Encoder)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
