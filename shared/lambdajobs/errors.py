"""Every error lambdajobs raises, to catch by name: `from lambdajobs.errors import UnknownJobError`.

All of them derive from `LambdaJobsError`; those about a bad argument also derive from `ValueError`
(and lookups from `LookupError`), so code that catches the built-in kinds keeps working. The one a job
raises itself, `PermanentError`, is also in `lambdajobs`.

The classes live in `lambdajobs.runtime.errors`, which imports nothing else of lambdajobs: this module
adds nothing to what `import lambdajobs` loads.
"""

from lambdajobs.runtime.errors import *  # noqa: F403  (every error class, as its __all__ lists them)
from lambdajobs.runtime.errors import __all__ as __all__
