"""What producers ask of a job's spec, loaded the first time one does: the queue level a priority
names, and a run's job id (given and checked, or derived from the job's `idempotency_key`).

Split out of `lambdajobs.runtime.spec` (`JobSpec.level_for`, `job_id` and `derive_job_id` call these):
a worker's cold start, whose record carries its job id and no priority, does not compile them.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime.envelope import MAX_JOB_ID_LENGTH
from lambdajobs.runtime.errors import JobIdError, UnknownPriorityError
from lambdajobs.runtime.settings import RESERVED_ID_PREFIX

if TYPE_CHECKING:
    from lambdajobs.runtime.spec import JobSpec


def level_for(spec: JobSpec, priority: str | None) -> str | None:
    """`JobSpec.level_for`: the queue level of `priority` (None: the job's own queue).

    Raises:
        UnknownPriorityError: the job has no such level (or no levels at all).
    """
    if priority is None or (spec.priorities and priority == spec.priorities[-1]):
        return None
    if priority in spec.priorities:
        return priority
    choose = (
        f"choose one of {list(spec.priorities)}"
        if spec.priorities
        else "it has no priorities; leave priority unset, or declare @job(priorities=(...))"
    )
    raise UnknownPriorityError(f"job '{spec.name}' has no priority {priority!r}: {choose}.")


def derive_job_id(spec: JobSpec, payload: dict[str, Any]) -> str | None:
    """`JobSpec.derive_job_id`: the job id implied by `idempotency_key`, or None when the job declares
    none."""
    if not spec.idempotency_key:
        return None
    values = {name: payload.get(name) for name in spec.idempotency_key}
    digest = hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()
    return f"{spec.name}-{digest[:32]}"


def job_id(spec: JobSpec, data: dict[str, Any], given: str | None = None) -> str | None:
    """`JobSpec.job_id`: the one given (checked), else derived from `idempotency_key` over the
    validated payload data, else None.

    Raises:
        JobIdError: `given` is not a string of 1 to 256 characters.
    """
    if given is not None:
        if not isinstance(given, str) or not 0 < len(given) <= MAX_JOB_ID_LENGTH:
            raise JobIdError(f"job_id must be a string of 1 to {MAX_JOB_ID_LENGTH} characters, got {given!r}")
        if given.startswith(RESERVED_ID_PREFIX):
            raise JobIdError(f"job_id {given!r}: ids starting with {RESERVED_ID_PREFIX!r} are reserved")
        return given
    return spec.derive_job_id(data)
