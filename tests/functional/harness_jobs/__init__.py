"""Test-only jobs for the harness's own tests (tests/functional/test_harness_clock.py): a jobs package
of its own, so a stack of them provisions only what those tests run."""
