"""The lambdajobs stack: a job table, and one `JobWorker` per declared job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Aws, CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.job_worker import JobWorker
from shared.spec import JobSpec

#: The official public Powertools layer (v3, Python 3.13, arm64). It carries Powertools and pydantic,
#: so the function asset holds only our code and synth needs no network. Override the version with
#: the `powertools_layer_version` context value in cdk.json.
POWERTOOLS_ACCOUNT = "017000801446"
POWERTOOLS_LAYER = "AWSLambdaPowertoolsPythonV3-python313-arm64"


def construct_id(job: str) -> str:
    return "".join(part.capitalize() for part in job.split("_")) + "Job"


class LambdaJobsStack(Stack):
    """Attributes: `table`, `workers` (job name -> JobWorker)."""

    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        jobs: Sequence[JobSpec],
        asset_dir: str,
        powertools_layer_version: int,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id_, **kwargs)
        self.table = dynamodb.Table(
            self,
            "JobTable",
            partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            # TTL deletion is lazy (up to days): correctness comes from the conditions on `expiration`.
            time_to_live_attribute="expiration",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.RETAIN,
        )
        layer = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "Powertools",
            f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{POWERTOOLS_ACCOUNT}:layer:"
            f"{POWERTOOLS_LAYER}:{powertools_layer_version}",
        )
        code = lambda_.Code.from_asset(asset_dir)
        self.workers = {
            spec.name: JobWorker(
                self,
                construct_id(spec.name),
                spec=spec,
                table=self.table,
                code=code,
                layers=[layer],
                log_retention=log_retention,
            )
            for spec in jobs
        }
        CfnOutput(self, "JobTableName", value=self.table.table_name, description="lambdajobs job table")
