"""Every queue of a stack is found by the naming rule from where the stack is (a function's
LAMBDAJOBS_ACCOUNT, _PARTITION, _URL_SUFFIX and Lambda's AWS_REGION): no lookup, no AWS call."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.effects import Effects


class NoAWS(StackConfig):
    """A configuration that fails the test on any AWS call (a manifest read, a GetQueueUrl)."""

    def client(self, service: str):
        raise AssertionError(f"an AWS call ({service}) where the naming rule says it")


def deployed(**env: str) -> StackConfig:
    base = StackConfig.from_environment(
        {"LAMBDAJOBS_STACK": "orders", "LAMBDAJOBS_ACCOUNT": "123456789012", **env}
    )
    return NoAWS(**{f: getattr(base, f) for f in StackConfig.__dataclass_fields__})


def test_a_functions_environment_gives_every_queue_of_its_stack(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    config = deployed()
    high = config.queue("send_invoice", "high")
    assert high.url == "https://sqs.eu-west-1.amazonaws.com/123456789012/orders_send_invoice--high"
    assert high.arn == "arn:aws:sqs:eu-west-1:123456789012:orders_send_invoice--high"
    assert high.dlq_url == "https://sqs.eu-west-1.amazonaws.com/123456789012/orders_send_invoice--high-dlq"
    assert config.workflow_queue() == "https://sqs.eu-west-1.amazonaws.com/123456789012/orders--workflows"
    role = "arn:aws:iam::123456789012:role/r"
    assert deployed(LAMBDAJOBS_SCHEDULER_ROLE_ARN=role).scheduler_settings() == (
        role,
        "orders-once",
        "arn:aws:sqs:eu-west-1:123456789012:orders--scheduler-dlq",
    )


def test_another_partition_and_the_local_endpoint(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_REGION", "cn-north-1")
    china = deployed(LAMBDAJOBS_PARTITION="aws-cn", LAMBDAJOBS_URL_SUFFIX="amazonaws.com.cn")
    assert china.queue_url("a") == "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/orders_a"
    assert china.queue_arn("a") == "arn:aws-cn:sqs:cn-north-1:123456789012:orders_a"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566/")
    assert deployed().queue_url("a") == "http://127.0.0.1:4566/123456789012/orders_a"


def test_without_the_account_the_manifest_says(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    config = NoAWS(stack="orders")
    assert config.where() is None
    with pytest.raises(AssertionError, match="an AWS call"):
        config.queue_url("a")


def test_the_worker_finds_the_queue_a_record_came_from_by_its_name(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    effects = Effects(deployed(), store=None, metric=None, log=None)  # type: ignore[arg-type]
    delivery = SimpleNamespace(
        spec=SimpleNamespace(name="send_invoice"),
        source_level="high",
        record=SimpleNamespace(
            event_source_arn="arn:aws:sqs:eu-west-1:123456789012:orders_send_invoice--high"
        ),
    )
    assert (
        effects.queue_url(delivery)  # type: ignore[arg-type]
        == "https://sqs.eu-west-1.amazonaws.com/123456789012/orders_send_invoice--high"
    )
