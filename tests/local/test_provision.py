"""Local provisioning (`lambdajobs.local.provision`): what TestStack and the local stack make before
any test runs. It learns the ARN prefix of the connection's queues from the first queue it makes and
writes the others' ARNs from it: those must be the ARNs moto gives, and each DLQ must allow redrive
from its own queue alone, as the stack's do."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends

from lambdajobs.local.provision import provision
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.spec import load_jobs
from lambdajobs.testing import TestStack

JOBS = "tests.jobs"
REGION = "us-east-1"


def _moto_queue(name: str) -> Any:
    """moto's own queue object: its API does not answer RedriveAllowPolicy."""
    return sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues[name]


def _real_arn(sqs: Any, url: str) -> str:
    return str(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


@pytest.fixture
def stack():
    with TestStack(JOBS, stack="prov") as test_stack:
        yield test_stack


def test_every_pairs_arns_are_the_ones_sqs_gives(stack):
    sqs = stack.config.client("sqs")
    pairs = list(stack.provisioned.queues.values())
    assert len(pairs) >= 5  # the first pair asks for its ARN; every later one is written
    for pair in pairs:
        assert pair.queue_arn == _real_arn(sqs, pair.queue_url), pair.key
        assert pair.dlq_arn == _real_arn(sqs, pair.dlq_url), pair.key
        attributes = sqs.get_queue_attributes(QueueUrl=pair.queue_url, AttributeNames=["RedrivePolicy"])
        assert json.loads(attributes["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"] == pair.dlq_arn
    made = stack.provisioned
    assert made.workflow_queue_arn == _real_arn(sqs, made.workflow_queue_url)
    assert made.scheduler_dlq_arn == _real_arn(sqs, made.scheduler_dlq_url)
    assert made.scheduler_role_arn.startswith(f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/")


def test_each_dlq_allows_redrive_from_its_own_queue_alone(stack):
    for pair in stack.provisioned.queues.values():
        dlq_name = pair.dlq_arn.rsplit(":", 1)[1]
        policy = json.loads(_moto_queue(dlq_name).redrive_allow_policy)
        assert policy == {"redrivePermission": "byQueue", "sourceQueueArns": [pair.queue_arn]}, pair.key


def test_provisioning_asks_for_one_queue_arn_and_sets_no_attribute_after_the_first_pair():
    # GIVEN the test jobs, provisioned on moto in-process with every SQS call counted
    specs = load_jobs(JOBS)
    calls: Counter[str] = Counter()
    with TestStack(JOBS, stack="count") as test_stack:
        sqs = test_stack.config.client("sqs")
        sqs.meta.events.register("before-call.sqs.*", lambda model, **_: calls.update([model.name]))
        # WHEN the stack's resources are made again under another name
        made = provision(specs, stack="again", config=StackConfig(stack="again"))
    # THEN one queue's ARN was asked for (the first DLQ's), and the first pair's DLQ alone had its
    # redrive permission set after its queue existed: every other pair took its two CreateQueue calls
    pairs = len(made.queues) + 1  # and the workflow queue's pair
    assert calls["CreateQueue"] == 2 * pairs + 1, calls  # and the Scheduler's DLQ
    assert (calls["GetQueueAttributes"], calls["SetQueueAttributes"]) == (1, 1), calls
