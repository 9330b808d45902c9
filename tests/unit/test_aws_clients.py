"""boto3 clients: one per service and connection, made from one session per connection (a botocore
session registers its event handlers when it is made: a cold start pays for each one)."""

from __future__ import annotations

import botocore.session
import pytest

from lambdajobs.runtime import aws


@pytest.fixture
def sessions_made(monkeypatch):
    made: list[object] = []
    real = botocore.session.Session

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            made.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(botocore.session, "Session", Counted)
    aws.reset_clients()
    yield made
    aws.reset_clients()


def test_the_clients_of_one_connection_share_one_session(sessions_made):
    here = aws.Connection(region="us-east-1")
    # WHEN a worker makes its clients, twice over
    sqs, dynamodb = aws.client("sqs", here), aws.client("dynamodb", here)
    assert aws.client("sqs", here) is sqs and aws.client("ssm", here) is not None and dynamodb is not None
    # THEN one session made them all; another connection gets its own, and a reset starts again
    assert len(sessions_made) == 1
    aws.client("sqs", aws.Connection(region="eu-west-1"))
    assert len(sessions_made) == 2
    aws.reset_clients()
    assert aws.client("sqs", here) is not sqs and len(sessions_made) == 3
