"""`make bench` (`python -m bench`): lambdajobs measured against a hand-written Powertools worker, a
boto3 send loop and Celery, each comparison alternating its two sides on one backend. See
docs/reports/benchmarks.md for the method and the figures."""
