"""The init phase of a Lambda function: the collector paused while modules load, what they built
frozen after, and the collector's state restored whatever happens."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from lambdajobs.runtime.startup import init_phase


@pytest.fixture(autouse=True)
def _restore_collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.unfreeze()
    if was:
        gc.enable()
    else:
        gc.disable()


class Node:
    def __init__(self) -> None:
        self.me = self


def test_the_collector_is_paused_inside_and_on_again_after_with_what_was_built_frozen():
    gc.enable()
    gc.unfreeze()
    with init_phase():
        paused = not gc.isenabled()
        built = [Node() for _ in range(1000)]
    assert paused
    assert gc.isenabled()
    # everything tracked at the end of the phase is in the permanent generation: no collection walks it
    assert gc.get_freeze_count() >= len(built)
    assert not any(obj is built[0] for obj in gc.get_objects())


def test_a_failing_init_still_restores_the_collector():
    gc.enable()
    with pytest.raises(ImportError), init_phase():
        raise ImportError("a job module failed to import")
    assert gc.isenabled()


def test_a_host_that_turned_the_collector_off_keeps_it_off():
    gc.disable()
    with init_phase():
        pass
    assert not gc.isenabled()
