"""The run the worker hands Powertools' idempotency utility is not deep-copied on every call."""

from __future__ import annotations

import copy

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
from aws_lambda_powertools.utilities.idempotency.base import IdempotencyHandler

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.records import JobRecordStore, RunData, Uncopied


def test_the_handler_keeps_the_run_itself():
    # GIVEN a run as the worker builds it
    run = RunData(job_id="j-1", job="send", attempt=1, about={"tenant": "t"}, payload=Uncopied({"a": 1}))
    assert copy.deepcopy(run) is run and run == {**run}
    # WHEN Powertools' idempotency utility takes it
    config = StackConfig(stack="t", region="us-east-1", table="t-jobs")
    handler = IdempotencyHandler(
        function=lambda run: None,
        function_payload=run,
        config=IdempotencyConfig(),
        persistence_store=JobRecordStore(config, client=object()),
        function_kwargs={"run": run},
    )
    # THEN the store's `data` is the worker's run, not a copy of it
    assert handler.data is run
