"""Concurrent deliveries of one job id on in-process moto (`TestStack`) run the job exactly once.

moto's conditional writes are check-then-write without a lock; `TestStack` installs
`lambdajobs.local.atomic` (each DynamoDB and SQS request atomic), the same mechanism as the local
stack, so concurrency tests here cannot pass by luck. Shown to fail without it: with the mechanism off
(`atomic._patch` made a no-op by a pytest plugin), five runs counted 27 to 37 of the 50 ids run more
than once (up to 5 times). The low-level tests are in `tests/local/test_atomic.py`.
"""

from __future__ import annotations

from lambdajobs.local.emulator import EventSourceMapping
from tests.concurrent_deliveries import Deliveries


def test_five_concurrent_deliveries_of_each_of_fifty_job_ids_run_each_job_exactly_once(stack, declare):
    # GIVEN a job that counts its runs per job id, on in-process moto
    deliveries = Deliveries()
    runner = declare(deliveries.job(), name="counted", timeout_seconds=30, max_attempts=5)
    mapping = EventSourceMapping(
        queue_url=runner.queues.queue_url,
        queue_arn=runner.queues.queue_arn,
        handler=runner.handler,
        function_name="test-counted",
        timeout_seconds=30,
        config=stack.config,
    )
    # WHEN 5 copies of each of 50 job ids are delivered, the copies of an id at the same time
    deliveries.deliver(mapping, "counted")
    # THEN every job ran exactly once, the copies of each id overlapping, and every job reads succeeded
    deliveries.assert_each_ran_once(stack.config)
