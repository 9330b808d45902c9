"""The kill soak's jobs package (`chaos.kills`). Its functions run in worker processes of their own,
from their staged assets, where only the lambdajobs runtime, pydantic, boto3 and the standard library
can be imported (and `chaos/__init__.py`, its parent package, with what it imports at module level:
`chaos.plan`, `chaos.report` and `chaos.jobs`, all within those)."""
