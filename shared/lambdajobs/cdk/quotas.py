"""The account's Lambda concurrency quota, as synth knows it, and what it leaves to reserve.

Lambda's concurrency quota is per account and region: 1,000 concurrent executions by default, more
after an increase (Service Quotas: AWS Lambda, "Concurrent executions", L-B99A9384). "New AWS
accounts have reduced concurrency and memory quotas. AWS raises these quotas automatically based on
your usage" (Lambda quotas): accounts have started as low as 10. A function may reserve "up to the
unreserved account concurrency value minus 100", so the reservations of all functions together stay
at most `quota - 100`, and an account at 100 or less can reserve nothing.

Synth cannot ask AWS (constructs never call AWS), so the quota is CDK context,
`lambdajobs:accountConcurrency` (default 1000): `-c lambdajobs:accountConcurrency=3000`, or in
cdk.json's "context". The dashboard compares the claimed concurrency with the live quota
(`SERVICE_QUOTA()`, lambdajobs.cdk.monitoring); this value is what synth checks reservations against.
"""

from __future__ import annotations

from typing import Any

from constructs import IConstruct

from lambdajobs.runtime.errors import ConfigurationError

#: The CDK context key of the account's Lambda concurrency quota in the stack's region.
ACCOUNT_CONCURRENCY_CONTEXT = "lambdajobs:accountConcurrency"
#: Lambda's default concurrency quota per account and region.
DEFAULT_ACCOUNT_CONCURRENCY = 1000
#: Lambda keeps this much of the quota unreserved: reservations may take the rest.
UNRESERVED_CONCURRENCY = 100


def account_concurrency_quota(scope: IConstruct) -> int:
    """The account's Lambda concurrency quota, from CDK context `lambdajobs:accountConcurrency`
    (default 1000), as seen from `scope`.

    Raises:
        ConfigurationError: the value is not a whole number of at least 1.

    Example:
        >>> app = App(context={"lambdajobs:accountConcurrency": "3000"})
        >>> account_concurrency_quota(Stack(app, "orders"))
        3000
    """
    value: Any = scope.node.try_get_context(ACCOUNT_CONCURRENCY_CONTEXT)
    if value is None or value == "":
        return DEFAULT_ACCOUNT_CONCURRENCY
    # `-c key=value` gives a string, cdk.json a number
    quota = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str) and value.strip().isdigit():
        quota = int(value.strip())
    if quota is None or quota < 1:
        raise ConfigurationError(
            f"context {ACCOUNT_CONCURRENCY_CONTEXT}={value!r} is not a concurrency quota; give your "
            f"account's Lambda concurrent executions quota in this region as a whole number, e.g. "
            f"-c {ACCOUNT_CONCURRENCY_CONTEXT}={DEFAULT_ACCOUNT_CONCURRENCY} (Service Quotas: AWS Lambda, "
            f"Concurrent executions)."
        )
    return quota


def max_reserved_concurrency(quota: int) -> int:
    """What all reservations together may take of `quota`: all but the 100 Lambda keeps unreserved
    (0 for a new account's quota of 100 or less)."""
    return max(0, quota - UNRESERVED_CONCURRENCY)
