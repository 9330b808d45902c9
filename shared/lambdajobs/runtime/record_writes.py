"""What every write of a record's state shares but a job's first run and its success (which
`lambdajobs.runtime.lifecycle` writes with a PutItem each): the job index's attributes of a state
(`_index`), one conditional UpdateItem (`_landed`), and a state write with a workflow member's
outcome counted in its workflow's item, in one transaction (`_apply`, `_counted`).

Split out of `lambdajobs.runtime.lifecycle`, where these names are importable too, as before (loaded
on first use, then kept there): the transitions (`lambdajobs.runtime.transitions`) and the light mode
(`lambdajobs.runtime.light`) call them as `lifecycle._apply`, ..., so what replaces one there (a test's
mutation: chaos' `no_workflow_tally` replaces `lifecycle._apply`) applies to them all. A module of its
own, apart from `transitions`, so that the light mode does not load the transitions with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import table as codec
from lambdajobs.runtime.job_record import INDEXED_STATES, JobIndex, JobRecord, JobState, index_key

if TYPE_CHECKING:
    from lambdajobs.runtime.workflow_item import Tally


def _index(
    mode: str | None, job: str, state: JobState, sets: list[str], remove: list[str], values: dict[str, Any]
) -> None:
    """Add the job index's attributes to a state write: `ix`/`ix_at` when the mode indexes `state`,
    removed when it does not (a record leaving the index), or when the index is off (keys an earlier
    period with the index left behind would come back, stale, if it were turned on again; removing
    an attribute a record does not have writes nothing). Uses the write's `:now_iso` as the time the
    record entered the state. `mode` None (not known: no stack told the writer): nothing."""
    if not mode:
        return
    if job and state in INDEXED_STATES[JobIndex(mode)]:
        sets += ["ix = :ix", "ix_at = :now_iso"]
        values[":ix"] = index_key(job, state)
    else:
        remove += ["ix", "ix_at"]


def _landed(client: Any, request: dict[str, Any]) -> bool:
    """One conditional UpdateItem: whether it landed (False: its condition failed)."""
    try:
        client.update_item(**request)
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def _apply(
    client: Any,
    table: str,
    job_id: str,
    *,
    sets: list[str],
    remove: list[str],
    condition: str | None,
    names: dict[str, str],
    values: dict[str, Any],
    tally: Tally | None,
    outcome: JobState,
) -> bool:
    """One conditional UpdateItem of a job record (`values`: Python values); with `tally`, together
    with the count of its outcome in the workflow's item, in one TransactWriteItems. Returns whether
    the record's write landed (False: its condition failed, the record moved on).

    The counted write: the record gets `wf_counted = <outcome>` only if it has none. A record already
    counted `dead` that now succeeds (redriven from the DLQ) moves from dead to ok. Anything else
    already counted, or a workflow item that is gone (expired) or full, gets the plain write: the job's
    own record is never held back by its workflow.

    Raises:
        ClientError: TransactionCanceledException for a transaction conflict or a throttle (transient:
            the caller tries again), or any other error of the calls.
    """
    write = {"sets": sets, "remove": remove, "condition": condition, "names": names, "values": values}
    if tally is not None and _counted(client, table, job_id, write, tally, outcome):
        return True
    return _landed(
        client,
        codec.update(
            table, job_id, sets=sets, remove=remove, condition=condition, values=values, names=names
        ),
    )


def _counted(
    client: Any, table: str, job_id: str, write: dict[str, Any], tally: Tally, outcome: JobState
) -> bool:
    """The record's write (`write`: `_apply`'s clauses) with its outcome counted in the workflow's
    item, in one TransactWriteItems. True: both landed; False: write the record plainly (its
    condition failed, it was counted already, or the workflow item is gone or its stage full)."""
    tries = [(JobRecord.not_counted_condition(), tally.update(table, outcome))]
    if outcome is JobState.SUCCEEDED:
        tries.append(
            (
                JobRecord.counted_as_condition(JobState.DEAD),
                tally.update(table, outcome, from_dead=True),
            )
        )
    for counted, workflow_update in tries:
        member = codec.update(
            table,
            job_id,
            sets=[*write["sets"], "wf_counted = :wf_outcome"],
            remove=write["remove"],
            condition=codec.all_of(write["condition"], counted.expression),
            values={**write["values"], **counted.values, ":wf_outcome": outcome.value},
            names=write["names"],
        )
        try:
            client.transact_write_items(TransactItems=[{"Update": member}, {"Update": workflow_update}])
            return True
        except client.exceptions.TransactionCanceledException as exc:
            codes = codec.cancellation_codes(exc)
            if any(code not in ("None", "ConditionalCheckFailed") for code in codes):
                raise  # a conflict with another transaction, a throttle: try again later
            if codes[1:2] == ["ConditionalCheckFailed"] and codes[0] != "ConditionalCheckFailed":
                return False  # the workflow item is gone or the stage is full: not counted, plain write
    return False
