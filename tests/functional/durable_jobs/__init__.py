"""Durable jobs for the functional tests (tests/functional/test_durable.py): a jobs package."""
