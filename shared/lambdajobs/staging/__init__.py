"""What builds a function, without CDK: its asset (`asset`), the import check (`imports`), your jobs'
dependencies (`dependencies`, for Lambda's platform or for this machine), Lambda's platform facts
(`platform`) and each function's environment (`environment`). The CDK constructs and the local stack
both use them; nothing here imports `aws_cdk`."""
