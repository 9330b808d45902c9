"""This project's jobs package, named once in pyproject.toml: `[tool.lambdajobs] jobs = "handlers"`.

One module per domain. lambdajobs imports every module of the package itself (`load_jobs`), so this
file imports nothing: each Lambda function then ships only its own job's module and what it needs.
"""
