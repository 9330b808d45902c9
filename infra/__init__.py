"""This project's stack composition: the thin CDK app a lambdajobs user writes (see infra/app.py)."""

# First, before anything imports aws_cdk: lambdajobs.cdk points jsii at the virtualenv's Node.
import lambdajobs.cdk  # noqa: F401
