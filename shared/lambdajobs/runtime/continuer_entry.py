"""The Lambda entry point of the workflow continuer: `lambdajobs.runtime.continuer_entry.lambda_handler`.

Importing it is the cold start: it builds the continuer from the function's environment.
"""

from __future__ import annotations

from lambdajobs.runtime.continuer import from_environment

lambda_handler = from_environment()
