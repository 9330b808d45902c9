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


@pytest.fixture
def fresh_loader(monkeypatch):
    monkeypatch.setattr(aws, "_loader", None)  # the next session makes the process's loader
    aws.reset_clients()
    yield
    aws.reset_clients()


def test_a_client_loads_its_service_without_listing_every_service(fresh_loader, monkeypatch):
    from botocore.loaders import Loader

    listed: list[str] = []
    real = Loader.list_available_services

    def counted(self, type_name):
        listed.append(type_name)
        return real(self, type_name)

    monkeypatch.setattr(Loader, "list_available_services", counted)
    here = aws.Connection(region="us-east-1")
    # WHEN a worker makes its clients
    dynamodb, sqs = aws.client("dynamodb", here), aws.client("sqs", here)
    # THEN no client listed botocore's ~420 service folders to find its own (a cold start's file calls)
    assert listed == []
    # AND the models are botocore's own: the same operations, endpoint rules, paginators (and their
    # extras), as a stock loader reads them
    stock = Loader()
    for service, client in (("dynamodb", dynamodb), ("sqs", sqs)):
        assert client.meta.service_model.operation_names == (
            botocore.session.get_session().get_service_model(service).operation_names
        )
        for kind in ("service-2", "endpoint-rule-set-1", "paginators-1"):
            assert aws._loader.load_service_model(service, kind) == stock.load_service_model(service, kind)
    assert aws._loader.load_service_model("dynamodb", "service-2", "2012-08-10") == stock.load_service_model(
        "dynamodb", "service-2", "2012-08-10"
    )
    assert dynamodb.can_paginate("scan") and sqs.can_paginate("list_queues")


def test_an_unknown_service_gets_botocores_own_error(fresh_loader):
    from botocore.exceptions import DataNotFoundError, UnknownServiceError

    # WHEN a client of a service botocore does not know is asked for
    with pytest.raises(UnknownServiceError) as raised:
        aws.client("dynamodbb", aws.Connection(region="us-east-1"))
    # THEN botocore's error, naming the services it knows (its full listing, on this rare path)
    assert "dynamodb" in str(raised.value) and "sqs" in str(raised.value)
    # AND an API version the service does not have is botocore's missing-data error
    with pytest.raises(DataNotFoundError):
        aws._loader.load_service_model("dynamodb", "service-2", "1999-01-01")


def test_the_loader_reads_extra_model_folders_from_aws_data_path(fresh_loader, monkeypatch, tmp_path):
    import json

    # GIVEN a model folder of its own, named by AWS_DATA_PATH as botocore documents
    folder = tmp_path / "models" / "dynamodb" / "2012-08-10"
    folder.mkdir(parents=True)
    stock = botocore.session.get_session().get_service_model("dynamodb")
    custom = {"version": "2.0", "metadata": stock.metadata, "operations": {}, "shapes": {}}
    (folder / "service-2.json").write_text(json.dumps(custom))
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path / "models"))
    # WHEN a client is made
    client = aws.client("dynamodb", aws.Connection(region="us-east-1"))
    # THEN the folder is searched first, as by botocore's own loader
    assert client.meta.service_model.operation_names == []
