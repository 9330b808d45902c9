"""lambdajobs: serverless background jobs on AWS (SQS + Lambda + DynamoDB), declared once in Python.

    from lambdajobs import job, cron, enqueue, get_status, JobContext, PermanentError

This module ships inside every Lambda function, so it imports only `lambdajobs.runtime`. The parts
that never ship live beside it: `lambdajobs.cdk` (constructs), `lambdajobs.local` (the local stack),
`lambdajobs.testing` (a harness for your tests), `lambdajobs.cli` and `lambdajobs.ops` (operators).
"""

from lambdajobs.runtime import *  # noqa: F403
from lambdajobs.runtime import __all__ as __all__
from lambdajobs.runtime import __getattr__ as __getattr__
