"""The jobs of this stack. Importing this package declares every job (fills the registry).

Add a module per domain and import it here; CDK, the worker and producers all read the registry.
"""

from handlers import emails, reports, video  # noqa: F401
