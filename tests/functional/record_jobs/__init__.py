"""Test-only jobs for the job history and search tests (tests/functional/test_job_history.py,
test_search.py): a jobs package of its own, so a stack of them provisions only what those tests run."""
