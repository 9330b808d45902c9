"""A plain envelope (no workflow, resume or debounce) is checked by hand and built without pydantic's
validators (`envelope._plain`): exactly what the model decides, and a cold start that only sees plain
envelopes never builds the envelope models (about 13 ms of CPU of a worker's cold start)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from lambdajobs.runtime import envelope
from lambdajobs.runtime.errors import EnvelopeError

ROOT = Path(__file__).resolve().parents[2]

#: Values each key may take: valid ones and every way to be wrong the model distinguishes.
VALUES: dict[str, list[Any]] = {
    "v": [1, 1.0, True, "1", 2, 0, None],
    "job": ["a", "", 1, None, "x" * 300],
    "id": ["x", "", None, "lambdajobs#x", "y" * 256, "y" * 257, 5, "é" * 256],
    "payload": [{}, {"a": 1}, [], None, "s"],
    "enqueued_at": [
        "2026-12-02T17:00:00Z",
        "2026-12-02T17:00:00.123456Z",
        "2026-12-02T17:00:00+02:00",
        "2026-13-02T17:00:00Z",
        "2026-12-02T25:00:00Z",
        "2026-12-02",
        1700000000,
        None,
        "x",
        "2026-12-02T17:00:00",
    ],
    "scheduled_at": ["2026-12-02T17:00:00Z", None, "2026-02-30T17:00:00Z"],
    "priority": ["high", "", None, "p" * 65, 3],
    "workflow": [{"id": "w", "stage": 0, "index": 1}],
}


def bodies(count: int) -> list[dict[str, Any]]:
    draw = random.Random(31)
    out = []
    for _ in range(count):
        body = {}
        for key, values in VALUES.items():
            if key in ("v", "job", "payload"):
                if draw.random() < 0.9:
                    body[key] = values[0] if draw.random() < 0.7 else draw.choice(values)
            elif draw.random() < (0.1 if key == "workflow" else 0.5):
                body[key] = draw.choice(values)
        if draw.random() < 0.05:
            body["extra"] = 1
        out.append(body)
    return out


def test_a_plain_envelope_decodes_to_what_the_model_validates_and_fails_where_it_fails():
    # GIVEN 3000 bodies, valid and invalid in every way the envelope's model checks
    for body in bodies(3000):
        # WHEN the worker decodes each, and the model validates it
        try:
            got: envelope.Envelope | None = envelope.decode(json.dumps(body))
        except EnvelopeError:
            got = None
        try:
            expected: envelope.Envelope | None = envelope.Envelope.model_validate(body)
        except Exception:
            expected = None
        # THEN both accept the same bodies, with the same fields, values and fields set
        assert (got is None) == (expected is None), body
        if got is not None and expected is not None:
            assert got == expected and got.model_fields_set == expected.model_fields_set, body
            assert (got.enqueued_at, got.scheduled_at) == (expected.enqueued_at, expected.scheduled_at)


COLD = """
import json, sys
import lambdajobs.runtime.entry
from lambdajobs.runtime import envelope
got = envelope.decode(json.dumps(
    {"v": 1, "job": "send_email", "id": "j1", "payload": {}, "enqueued_at": "2026-12-02T17:00:00Z"}
))
print(json.dumps({"job": got.job, "built": [m.__name__ for m in (envelope.Envelope, envelope.WorkflowField,
    envelope.ParentCounts, envelope.ResumeField, envelope.DebounceField) if m.__pydantic_complete__]}))
"""


def test_a_cold_start_that_decodes_a_plain_envelope_builds_no_envelope_model():
    # GIVEN a worker function's cold start (the environment CDK gives send_email's)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAMBDAJOBS_")}
    env.update(
        LAMBDAJOBS_JOB="send_email",
        LAMBDAJOBS_JOBS="handlers",
        LAMBDAJOBS_MODULES="handlers.emails",
        AWS_DEFAULT_REGION="us-east-1",
    )
    # WHEN it decodes a plain envelope
    done = subprocess.run([sys.executable, "-c", COLD], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # THEN the envelope is read, and none of the envelope's models was built
    assert result == {"job": "send_email", "built": []}
