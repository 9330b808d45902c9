"""Build the CDK app from the registry: `app.py` and the tests both call `build_app`."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from aws_cdk import App, Aspects, Environment
from aws_cdk import aws_logs as logs

from lambdajobs.cdk.stack import LambdaJobsStack
from lambdajobs.runtime.settings import DEFAULT_STACK_NAME
from lambdajobs.runtime.spec import registered_jobs

ROOT = Path(__file__).resolve().parent.parent
#: Only runtime code goes into the Lambda asset: the `shared` library and the `handlers` package, plus
#: the pure-Python packages `@cron` validates with and Powertools data masking needs (the Powertools
#: layer has Powertools and pydantic; the Lambda runtime has boto3 and dateutil). Copied from this
#: virtualenv: synth stays offline.
RUNTIME_PACKAGES = ("shared", "handlers")
VENDORED_PACKAGES = ("aws_cron_expression_validator", "pyawscron", "tzdata", "jsonpath_ng")
DEFAULT_POWERTOOLS_LAYER_VERSION = 27


def stage_asset(out_dir: Path) -> Path:
    """Copy the runtime packages (Python sources only) into `out_dir` for `Code.from_asset`."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in RUNTIME_PACKAGES:
        shutil.copytree(ROOT / package, out_dir / package, ignore=ignore)
    for package in VENDORED_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{package} is not installed; run `make install` before synthesizing.")
        shutil.copytree(Path(spec.origin).parent, out_dir / package, ignore=ignore)
    return out_dir


def build_app(
    outdir: str | None = None, context: dict[str, str] | None = None
) -> tuple[App, LambdaJobsStack]:
    import handlers  # noqa: F401  (declares every job)

    app = App(outdir=outdir, context=context) if outdir else App(context=context)
    stack_name = app.node.try_get_context("stack_name") or DEFAULT_STACK_NAME
    layer_version = int(
        app.node.try_get_context("powertools_layer_version") or DEFAULT_POWERTOOLS_LAYER_VERSION
    )
    retention_days = int(app.node.try_get_context("log_retention_days") or 30)
    asset = stage_asset(ROOT / "build" / "lambda-asset")
    stack = LambdaJobsStack(
        app,
        stack_name,
        stack_name=stack_name,
        jobs=registered_jobs(),
        asset_dir=str(asset),
        powertools_layer_version=layer_version,
        log_retention=_retention(retention_days),
        alarm_email=app.node.try_get_context("alarm_email") or None,
        env=Environment(),  # account/region from the deploying profile
        description="lambdajobs: background jobs on SQS + Lambda",
    )
    # cdk-nag's AwsSolutions rules run on every synth (here and in the tests); suppressions live
    # next to the resources they concern (infra/nag.py), each with its reason.
    from cdk_nag import AwsSolutionsChecks

    from lambdajobs.cdk.nag import suppress

    suppress(stack)
    Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return app, stack


def nag_errors(assembly: object) -> list[str]:
    """Unsuppressed cdk-nag errors (and any other synth errors) in a synthesized assembly."""
    found = []
    for artifact in assembly.stacks:  # type: ignore[attr-defined]
        for message in artifact.messages:
            if str(message.entry.type) == "aws:cdk:error":
                found.append(f"{message.id}: {message.entry.data}")
    return found


_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def _retention(days: int) -> logs.RetentionDays:
    if days not in _RETENTION:
        raise ValueError(
            f"cdk.json log_retention_days={days} is not supported; use one of {sorted(_RETENTION)}."
        )
    return _RETENTION[days]
