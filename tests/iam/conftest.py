"""IAM-enforced functional tests: the example jobs, their producer, the CLI's read paths and the
schedules run on moto under the IAM policies of the synthesized CDK template.

Each test gets `deployment`: a `TestStack` named like the synthesized stack (so queue names, the SSM
manifest and the schedule groups are the template's), every principal of the template created as a
moto role with the template's policies (resolved by `tests.iam.template_policies`), the harness as
an IAM user allowed everything, and moto's IAM authorization on (`tests.iam.enforcement`) for the
whole test. A call the template does not allow fails the test with `IAMDenied`, naming the action,
the resource and the principal with its policies, even when the code under test swallowed the error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from handlers import video
from lambdajobs.testing import TestStack
from tests.example_fakes import RecordingSender, recording_sender
from tests.iam import enforcement
from tests.iam.deployment import Deployment
from tests.iam.enforcement import IAMDenied, enforced
from tests.infra.conftest import synthesize

JOBS = "handlers"


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Any, Any, Any]:
    return synthesize(tmp_path_factory)  # one synthesis per session, shared with tests/infra


@pytest.fixture(scope="session")
def template(synthesized) -> dict[str, Any]:
    return synthesized[0]


@pytest.fixture(scope="session")
def constructs(synthesized) -> Any:
    """The `LambdaJobs` construct the template was synthesized from."""
    return synthesized[2].lambdajobs


@pytest.fixture(scope="package", autouse=True)
def _one_botocore_loader() -> Iterator[None]:
    """Every boto3 session of these tests shares one botocore loader. `lambdajobs.runtime.aws` makes
    a session per client, and each new session reads the service models' JSON from disk again; with a
    client per service and principal, that was most of each test's time. (Read-only data: sharing
    it changes nothing else.)"""
    import botocore.session
    from botocore.loaders import create_loader

    loaders: dict[Any, Any] = {}

    def shared_loader(search_paths_string: Any = None) -> Any:
        if search_paths_string not in loaders:
            loaders[search_paths_string] = create_loader(search_paths_string)
        return loaders[search_paths_string]

    botocore.session.create_loader = shared_loader
    try:
        yield
    finally:
        botocore.session.create_loader = create_loader


@pytest.fixture
def deployment(template, constructs) -> Iterator[Deployment]:
    with TestStack(JOBS, stack=constructs.stack_name) as stack:
        deployed = Deployment(template, constructs, stack).start()
        with enforced(deployed.recorder):
            yield deployed


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    """Fail the test (in its call phase, so `xfail(raises=IAMDenied)` applies) when IAM denied any
    call during it, whether or not the code under test let the error through."""
    try:
        result = yield
    except BaseException as exc:
        recorder = enforcement.ACTIVE
        denied = recorder.take_denials() if recorder else []
        if denied and not isinstance(exc, IAMDenied):
            raise IAMDenied(recorder.report(denied)) from exc
        raise
    recorder = enforcement.ACTIVE
    denied = recorder.take_denials() if recorder else []
    if denied:
        raise IAMDenied(recorder.report(denied))
    return result


@pytest.fixture
def sender() -> Iterator[RecordingSender]:
    with recording_sender() as recording:
        yield recording


class InstantEncoder:
    def encode(self, source_uri: str, fmt: str, duration_seconds: float, budget_seconds: float) -> str:
        return f"{source_uri.rsplit('.', 1)[0]}-{fmt}.mp4"


@pytest.fixture
def encoder() -> Iterator[InstantEncoder]:
    instant = InstantEncoder()
    previous = video.set_encoder(instant)
    yield instant
    video.set_encoder(previous)
