"""Test-only jobs: the jobs package the framework's own tests run (`TestStack("tests.jobs")`).

Small fixtures, not product code: each mirrors what the tests need from a kind of job (a message
sent through a pluggable sink, a job in stages with progress and a time budget, a cron job that
enqueues another job). This repository's example jobs (handlers/) have their own tests, in
tests/examples/.
"""
