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
import json
import random
import time
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from lambdajobs.runtime import config as configuration
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.envelope import parse_body
from lambdajobs.runtime.errors import EnqueueError, EnvelopeError
from lambdajobs.runtime.lifecycle import now_iso
from lambdajobs.runtime.settings import CONTINUER_TIMEOUT_SECONDS, SERVICE_NAME
from lambdajobs.runtime.workflow import (
    LATER_SUFFIX,
    WorkflowState,
    _body,
    _Member,
    later_key,
    member_job_id,
    stage_complete,
    workflow_key,
)

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
                event=event, record_handler=self._process, processor=processor, context=context
            )
            return response

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
                from lambdajobs.runtime.worker import transient

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
    from lambdajobs.runtime.producer import send_bodies
    from lambdajobs.runtime.records import JobRecordStore

    store = JobRecordStore(config)
    client, table = store.client, store.table
    key = {"id": {"S": workflow_key(workflow_id)}}
    item = client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    if not item:
        logger.warning("a notice for a workflow with no record (expired?)", extra={"workflow": workflow_id})
        return "gone"
    if not stage_complete(item, stage):
        return "not complete"
    now = time.time()
    try:
        claimed = client.update_item(
            TableName=table,
            Key=key,
            UpdateExpression=(
                f"SET claim_{stage} = :token, claim_until_{stage} = :until ADD claims_{stage} :one"
            ),
            ConditionExpression=(
                f"attribute_not_exists(advanced_{stage}) AND (attribute_not_exists(claim_{stage}) "
                f"OR claim_{stage} = :token OR claim_until_{stage} < :now)"
            ),
            ExpressionAttributeValues={
                ":token": {"S": token},
                ":until": {"N": str(int(now + CLAIM_SECONDS))},
                ":now": {"N": str(int(now))},
                ":one": {"N": "1"},
            },
            ReturnValues="UPDATED_OLD",
        )
    except client.exceptions.ConditionalCheckFailedException:
        return "claimed elsewhere"
    # A claim there before: this stage's sending started once and stopped (a crash, a failed send).
    again = f"claims_{stage}" in (claimed.get("Attributes") or {})  # (a count: always changes)

    stages = json.loads(item["outline"]["S"])["stages"]
    total, ok, dead = (int(item[f"{c}_{stage}"]["N"]) for c in ("total", "ok", "dead"))
    described = ", ".join(f"{job} x{n}" for job, n in stages[stage]["jobs"].items())
    if stage == len(stages) - 1 or (dead and stages[stage]["on_dead"] == "stop"):
        if dead:
            state = WorkflowState.DEAD
            reason = f"stage {stage} ({described}): {dead} of {total} dead"
            if stage < len(stages) - 1:
                reason += f"; the workflow stopped before stage {stage + 1}"
        else:
            state, reason = WorkflowState.SUCCEEDED, ""
        ended = {"wf_state": state, "ended_at": now_iso(), **({"reason": reason} if reason else {})}
        _finish_stage(client, table, key, stage, ended, config.record_ttl_seconds)
        return state

    following = stage + 1
    parents = {"total": total, "succeeded": ok, "dead": dead}
    by_queue: dict[str, list[tuple[str, str]]] = {}
    later = client.get_item(TableName=table, Key={"id": {"S": later_key(workflow_id)}}, ConsistentRead=True)
    for index, stored in enumerate(json.loads(later["Item"]["later"]["S"])[str(following)]):
        member = _Member(stored["job"], stored["payload"], stored.get("priority"), stored.get("level"))
        body = _body(workflow_id, following, index, member, parents)
        url = config.queue_url(member.job, member.level)
        by_queue.setdefault(url, []).append((member_job_id(workflow_id, following, index), body))
    if again:  # members that already have a record were delivered: a second copy would be a duplicate
        from lambdajobs.runtime.records import NO_RECORD, get_statuses

        ids = [job_id for bodies in by_queue.values() for job_id, _ in bodies]
        delivered = {j for j, st in get_statuses(ids, config=config).items() if st.note != NO_RECORD}
        by_queue = {url: [b for b in bodies if b[0] not in delivered] for url, bodies in by_queue.items()}
    failed = [
        r for url, bodies in by_queue.items() if bodies for r in send_bodies(config, url, bodies).failed
    ]
    if failed:
        raise EnqueueError(
            f"workflow '{workflow_id}': {len(failed)} jobs of stage {following} were not sent "
            f"({failed[0].error}); the notice comes back and sends them again"
        )
    _finish_stage(client, table, key, stage, {f"sent_{following}": now_iso()}, config.record_ttl_seconds)
    return "sent"


def _finish_stage(
    client: Any, table: str, key: dict[str, Any], stage: int, fields: dict[str, str], ttl_seconds: int
) -> None:
    """Mark `stage` advanced, with `fields`, and renew the item's expiry (the job records' TTL from
    now). A stage already marked is left as it is."""
    names = {f"#f{i}": name for i, name in enumerate(fields)}
    values = {f":f{i}": {"S": value} for i, value in enumerate(fields.values())}
    sets = [f"#f{i} = :f{i}" for i in range(len(fields))]
    values[":now"] = {"S": now_iso()}
    values[":exp"] = {"N": str(int(time.time()) + ttl_seconds)}
    try:
        client.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET "
            + ", ".join([f"advanced_{stage} = :now", "updated_at = :now", "expiration = :exp", *sets]),
            ConditionExpression=f"attribute_not_exists(advanced_{stage})",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
    except client.exceptions.ConditionalCheckFailedException:
        logger.info("the stage was already marked advanced", extra={"stage": stage})
        return
    # The later stages' payloads expire with it (a workflow may run for longer than the TTL); a group,
    # or a workflow whose later stages are all sent, may have none.
    with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):
        client.update_item(
            TableName=table,
            Key={"id": {"S": key["id"]["S"] + LATER_SUFFIX}},
            UpdateExpression="SET expiration = :exp",
            ConditionExpression="attribute_exists(id)",
            ExpressionAttributeValues={":exp": values[":exp"]},
        )


def from_environment() -> Any:
    """The continuer's Lambda handler, built the way a cold start does."""
    continuer = Continuer(config=StackConfig.from_environment())

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return continuer.handle(event, context)

    return handler
