"""The continuer: the small function on the stack's workflow queue that sends a workflow's next stage.

A job worker sends a notice (`{"workflow": <id>, "stage": <n>}`) when the member it just finished may
have completed its stage (see `lambdajobs.runtime.workflow`). For each notice the continuer:

1. reads the workflow's item (consistently); a stage not complete, or already advanced, ends here;
2. claims the stage: a conditional write of the notice's message id with a lease. One notice of the
   many a stage can get wins; a notice that comes back (its invocation crashed) holds the same id and
   goes on; another takes over only after the lease;
3. sends the next stage's jobs (their payloads were validated by the producer and kept in the item),
   each with its deterministic job id and the counts of the stage before (`parents`); or, after the
   last stage (or a stage with dead members whose rule is `stop`), records how the workflow ended;
4. marks the stage advanced. A crash between 3 and 4 sends the stage again when the notice returns,
   but only the members that have no job record yet (the others were delivered); their job ids are
   the same, so each still runs once, and a dead member is not run again (see `lifecycle.acquire`).

It imports no job module: it needs only the job table, the workflow queue and the job queues' URLs.
"""

from __future__ import annotations

import contextlib
import random
import time
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from lambdajobs.runtime import config as configuration
from lambdajobs.runtime import table
from lambdajobs.runtime.aws import transient
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.envelope import parse_body
from lambdajobs.runtime.errors import EnqueueError, EnvelopeError
from lambdajobs.runtime.lifecycle import now_iso
from lambdajobs.runtime.settings import ATTR_TRACEPARENT, CONTINUER_TIMEOUT_SECONDS, SERVICE_NAME
from lambdajobs.runtime.workflow import _body, member_job_id
from lambdajobs.runtime.workflow_item import LaterItem, WorkflowItem, WorkflowState, later_key, workflow_key

logger = Logger(service=SERVICE_NAME)

#: How long a claim on a stage holds: longer than the continuer's timeout (120 s), so a live
#: continuer is never overtaken; a crashed one's stage is taken over after it.
CLAIM_SECONDS = CONTINUER_TIMEOUT_SECONDS + 30
#: A notice whose handling failed on a throttle or a service error is tried this many times in all,
#: with jittered pauses from this base, before its receive counts as failed.
TRIES = 4
PAUSE_SECONDS = 0.1


class Continuer:
    """Handles the workflow queue's records (a partial batch response: a notice that failed comes back).

    Example:
        >>> Continuer(config=StackConfig.from_environment()).handle(sqs_event, lambda_context)
        {'batchItemFailures': []}
    """

    def __init__(self, *, config: StackConfig | None = None) -> None:
        self.config = configuration.resolve(config)

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with configuration.using(self.config):
            processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
            response: dict[str, Any] = process_partial_response(  # type: ignore[assignment]
                event=event, record_handler=self._handler(event), processor=processor, context=context
            )
            return response

    def _handler(self, event: dict[str, Any]) -> Any:
        """`_process`, under a span per notice when the stack's tracing is on or a notice carries a
        trace context (its member was traced: `lambdajobs.runtime.tracing`, imported only then)."""
        records = event.get("Records") or []
        if not (
            self.config.tracing
            or any((r.get("messageAttributes") or {}).get(ATTR_TRACEPARENT) for r in records)
        ):
            return self._process
        from lambdajobs.runtime import tracing

        return tracing.notice_handler(self._process, on=self.config.tracing)

    def _process(self, record: SQSRecord) -> str:
        try:
            notice = parse_body(record.body)
            workflow_id, stage = str(notice["workflow"]), int(notice["stage"])
        except (EnvelopeError, KeyError, TypeError, ValueError) as exc:
            # never from a worker: dropping it loses nothing, retrying it would never succeed
            logger.error("not a workflow notice; dropped", extra={"error": str(exc)[:300]})
            return "invalid"
        for attempt in range(TRIES):
            try:
                outcome = advance(self.config, workflow_id, stage, token=record.message_id)
                break
            except Exception as exc:
                # A throttle or a service error is tried again here (advance is idempotent under its
                # claim): every failed receive brings the notice closer to the workflow DLQ.
                if attempt == TRIES - 1 or not transient(exc):
                    raise
                time.sleep((0.5 + random.random() / 2) * PAUSE_SECONDS * 2**attempt)
        logger.info("workflow notice", extra={"workflow": workflow_id, "stage": stage, "outcome": outcome})
        return outcome


def advance(config: StackConfig, workflow_id: str, stage: int, *, token: str) -> str:
    """Act on a notice that `stage` of `workflow_id` may be complete; returns what was done: `gone`,
    `not complete`, `claimed elsewhere`, `sent` (the next stage), `succeeded` or `dead` (ended).

    Raises:
        EnqueueError: some jobs of the next stage could not be sent (the notice comes back).
        ClientError: the item could not be read or written (the notice comes back).
    """
    from lambdajobs.runtime.records import JobRecordStore

    store = JobRecordStore(config)
    found = store.client.get_item(
        TableName=store.table, Key=table.key(workflow_key(workflow_id)), ConsistentRead=True
    ).get("Item")
    if not found:
        logger.warning("a notice for a workflow with no record (expired?)", extra={"workflow": workflow_id})
        return "gone"
    item = WorkflowItem.from_item(found)
    if not item.stage_complete(stage):
        return "not complete"
    try:
        again = _claim(store, workflow_id, stage, token)
    except store.client.exceptions.ConditionalCheckFailedException:
        return "claimed elsewhere"
    ended = _ending(item, stage)
    if ended is not None:
        state, reason = ended
        fields = {"wf_state": state, "ended_at": now_iso(), **({"reason": reason} if reason else {})}
        _finish_stage(store, workflow_id, stage, fields, config.record_ttl_seconds)
        return state
    _send_next(config, store, item, workflow_id, stage, again=again)
    _finish_stage(store, workflow_id, stage, {f"sent_{stage + 1}": now_iso()}, config.record_ttl_seconds)
    return "sent"


def _claim(store: Any, workflow_id: str, stage: int, token: str) -> bool:
    """Claim `stage` for the notice `token` until `CLAIM_SECONDS` from now (`WorkflowItem.may_claim`).
    Returns whether a claim was there before: this stage's sending started once and stopped (a crash,
    a failed send).

    Raises:
        ConditionalCheckFailedException: another notice holds the stage, or it was advanced.
    """
    now = time.time()
    claimed = store.client.update_item(
        **table.update(
            store.table,
            workflow_key(workflow_id),
            sets=[f"claim_{stage} = :token", f"claim_until_{stage} = :until"],
            adds=[f"claims_{stage} :one"],
            condition=WorkflowItem.may_claim_condition(stage),
            values={":token": token, ":until": int(now + CLAIM_SECONDS), ":now": int(now), ":one": 1},
            ReturnValues="UPDATED_OLD",
        )
    )
    before = WorkflowItem.from_item(claimed.get("Attributes"))
    return before.stage(stage).claims is not None  # (a count: always changes, so always returned)


def _ending(item: WorkflowItem, stage: int) -> tuple[WorkflowState, str] | None:
    """How the workflow ends with `stage` (its state and reason), or None: it goes on. It ends after
    its last stage, or after a stage with dead members whose rule is `stop`."""
    plan, counts = item.outline_stages, item.stage(stage)
    last = stage == len(plan) - 1
    if not last and not (counts.dead and plan[stage].on_dead == "stop"):
        return None
    if not counts.dead:
        return WorkflowState.SUCCEEDED, ""
    described = ", ".join(f"{job} x{n}" for job, n in plan[stage].jobs.items())
    reason = f"stage {stage} ({described}): {counts.dead} of {counts.total} dead"
    if not last:
        reason += f"; the workflow stopped before stage {stage + 1}"
    return WorkflowState.DEAD, reason


def _send_next(
    config: StackConfig, store: Any, item: WorkflowItem, workflow_id: str, stage: int, *, again: bool
) -> None:
    """Send the stage after `stage`, each member with the counts of `stage` (`parents`); `again`: only
    the members that have no record yet.

    Raises:
        EnqueueError: some were not sent.
    """
    from lambdajobs.runtime.producer import send_bodies

    following, counts = stage + 1, item.stage(stage)
    parents = {"total": counts.total or 0, "succeeded": counts.ok, "dead": counts.dead}
    later = store.client.get_item(
        TableName=store.table, Key=table.key(later_key(workflow_id)), ConsistentRead=True
    )
    by_queue: dict[str, list[tuple[str, str]]] = {}
    for index, member in enumerate(LaterItem.from_item(later["Item"]).members(following)):
        body = _body(workflow_id, following, index, member, parents)
        url = config.queue_url(member.job, member.level)
        by_queue.setdefault(url, []).append((member_job_id(workflow_id, following, index), body))
    if again:
        by_queue = _undelivered(config, by_queue)
    failed = [
        r for url, bodies in by_queue.items() if bodies for r in send_bodies(config, url, bodies).failed
    ]
    if failed:
        raise EnqueueError(
            f"workflow '{workflow_id}': {len(failed)} jobs of stage {following} were not sent "
            f"({failed[0].error}); the notice comes back and sends them again"
        )


def _undelivered(
    config: StackConfig, by_queue: dict[str, list[tuple[str, str]]]
) -> dict[str, list[tuple[str, str]]]:
    """The bodies whose job has no record yet: one that has was delivered, a second copy would be a
    duplicate."""
    from lambdajobs.runtime.records import get_statuses

    ids = [job_id for bodies in by_queue.values() for job_id, _ in bodies]
    delivered = {j for j, st in get_statuses(ids, config=config).items() if st.has_record}
    return {url: [b for b in bodies if b[0] not in delivered] for url, bodies in by_queue.items()}


def _finish_stage(store: Any, workflow_id: str, stage: int, fields: dict[str, str], ttl_seconds: int) -> None:
    """Mark `stage` advanced, with `fields`, and renew the item's expiry (the job records' TTL from
    now). A stage already marked is left as it is (`WorkflowItem.advanced`)."""
    client = store.client
    expiration = int(time.time()) + ttl_seconds
    values: dict[str, Any] = {f":f{i}": value for i, value in enumerate(fields.values())}
    try:
        client.update_item(
            **table.update(
                store.table,
                workflow_key(workflow_id),
                sets=[
                    f"advanced_{stage} = :now",
                    "updated_at = :now",
                    "expiration = :exp",
                    *(f"#f{i} = :f{i}" for i in range(len(fields))),
                ],
                condition=WorkflowItem.not_advanced_condition(stage),
                values={**values, ":now": now_iso(), ":exp": expiration},
                names={f"#f{i}": name for i, name in enumerate(fields)},
            )
        )
    except client.exceptions.ConditionalCheckFailedException:
        logger.info("the stage was already marked advanced", extra={"stage": stage})
        return
    # The later stages' payloads expire with it (a workflow may run for longer than the TTL); a group,
    # or a workflow whose later stages are all sent, may have none.
    with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):
        client.update_item(
            **table.update(
                store.table,
                later_key(workflow_id),
                sets=["expiration = :exp"],
                condition="attribute_exists(id)",
                values={":exp": expiration},
            )
        )


def from_environment() -> Any:
    """The continuer's Lambda handler, built the way a cold start does."""
    continuer = Continuer(config=StackConfig.from_environment())

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return continuer.handle(event, context)

    return handler
