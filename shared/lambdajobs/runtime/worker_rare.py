"""The worker's paths a plain record's success never takes (`lambdajobs.runtime.worker.Worker` delegates
to these, and imports this module on first use: a cold start whose first record succeeds does not
compile it): a debounced enqueue's claim, a concurrency key's slot, a searchable job's entries, and the
decision after a run that raised, stopped or found its lock held."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import gates, lifecycle
from lambdajobs.runtime.context import LockLost, Suspend
from lambdajobs.runtime.gates import Cancel, Decision, Done, HandBack, Park, RecordSuccess, Run, Supersede
from lambdajobs.runtime.records import error_fields
from lambdajobs.runtime.worker import deadline_margin_ms, logger

if TYPE_CHECKING:
    from lambdajobs.runtime.context import JobContext
    from lambdajobs.runtime.delivery import Delivery
    from lambdajobs.runtime.durable import Durable
    from lambdajobs.runtime.job_record import JobRecord
    from lambdajobs.runtime.spec import JobSpec
    from lambdajobs.runtime.worker import Worker, _Invocation, _Outcome


def job_id_of(w: Worker, spec: JobSpec, record: Any) -> str | None:
    d = w.delivery(spec, record)
    if d.envelope is None or d.payload is None:
        return d.envelope.id if d.envelope is not None else None
    return d.job_id


def debounced(w: Worker, d: Delivery) -> Decision | None:
    """`Worker._debounce` past its check that the delivery is a debounced enqueue."""
    assert d.envelope is not None and d.envelope.debounce is not None and d.job_id is not None
    if d.resume_wake is not None or d.carried is not None:  # it ran: a continuation, an outcome
        return None
    from lambdajobs.runtime import debounce  # debounced jobs only: not at a cold start

    field = d.envelope.debounce
    try:
        runs = debounce.claim(w.store.client, w.store.table, d.spec.name, field.key, d.job_id, field.at)
    except Exception as exc:
        return gates.not_acquired(d, exc, w.rng)
    if runs == debounce.DUPLICATE:
        logger.info("a debounced job id sent again later: that send runs it, not this one")
        return Done("a debounced job id sent again", metric="JobDuplicate")
    if runs != debounce.SUPERSEDED:
        return None
    if d.attempt > 1 and w._started_before(d.job_id):  # a retry of the run: it goes on
        return None
    return Supersede()


def started_before(w: Worker, job_id: str) -> bool:
    try:
        found = w.store.read(job_id)
    except Exception:  # cannot tell: let the run decide (its lock and record)
        return True
    return found is not None and found.state is not None


def key_slot(w: Worker, d: Delivery, invocation: _Invocation) -> tuple[Any, Decision | None]:
    """`Worker._key_slot` past its check that the job has a concurrency key and the delivery a job."""
    per_key = d.spec.concurrency_key
    assert per_key is not None and d.job_id is not None
    from lambdajobs.runtime import keyslots  # jobs with a concurrency key only: not at a cold start

    value = keyslots.key_value(per_key, d.raw_payload or {})
    if value is None:  # a job without a key value is not capped
        return None, None
    context = invocation.context
    left_ms = context.get_remaining_time_in_millis() if context is not None else None
    deadline_ms = int(time.time() * 1000) + int(
        left_ms if left_ms is not None else d.spec.timeout_seconds * 1000
    )
    slots = keyslots.KeySlots(w.store.client, w.store.table, salt=w.stack_config.stack)
    try:
        slot = slots.take(d.spec.name, value, per_key.limit_for(value), d.job_id, deadline_ms)
    except Exception as exc:
        return None, gates.not_acquired(d, exc, w.rng)
    if slot is None:
        delay = keyslots.retry_delay(w.rng)
        return None, HandBack(delay, "its key's runs are at their cap", metric="JobKeyBusy")
    return (slots, slot), None


def release(w: Worker, held: tuple[Any, Any]) -> None:
    slots, slot = held
    failed = w.effects.write(slots.release, slot)
    if failed is not None:  # the entry expires with this invocation
        logger.warning("could not release the key's slot", extra={"error": error_fields(failed)})


def search_entries(w: Worker, d: Delivery, about: dict[str, Any]) -> None:
    from lambdajobs.runtime import search

    assert d.job_id is not None
    items = search.entries(
        d.spec.name,
        d.job_id,
        d.spec.searchable,
        d.raw_payload,
        tenant=about.get("tenant"),
        pii_fields=d.spec.pii_fields,
        enqueued_at=about.get("enqueued_at") or lifecycle.now_iso(),
        expiration=int(time.time()) + w.stack_config.record_ttl_seconds,
        salt=w.stack_config.stack,
    )
    try:
        search.write(w.store.client, w.store.table, items)
    except Exception as exc:
        logger.warning("could not write the job's search entries", extra={"error": error_fields(exc)})
        w._count("JobSearchEntryFailed", 1)


def stopped(w: Worker, d: Delivery, stopped: BaseException) -> Decision:
    if isinstance(stopped, LockLost):
        logger.warning("the job's lock was taken over; this run stops", extra={"reason": str(stopped)})
        return HandBack(d.spec.timeout_seconds, "its lock was taken over")
    if isinstance(stopped, Suspend):
        from lambdajobs.runtime import durable

        logger.info(
            "job parked", extra={"reason": stopped.reason, "wake_at": durable.iso_ms(stopped.wake_ms)}
        )
        return Park(stopped.state, stopped.wake_ms, stopped.reason, w.store.lock_token(), stopped.signal)
    logger.info("job cancelled while it ran; it stopped at a check", extra={"reason": str(stopped)})
    return Cancel(w.store.lock_token(), "cancelled while it ran")


def raised(w: Worker, d: Delivery, run: dict[str, Any], outcome: _Outcome, exc: Exception) -> Decision:
    lock = w.store.lock_token()
    if outcome.returned:
        # The job returned; writing its success failed. Never a job failure: write again, else
        # hand the outcome back with the message, so it is recorded and not run again.
        return RecordSuccess(lifecycle.stored_result(json.dumps(outcome.result, sort_keys=True)), lock)
    if outcome.error is None:
        return gates.not_acquired(d, exc, w.rng)
    if isinstance(outcome.error, lifecycle.RunNotStarted):  # its lock given back (again, if that failed)
        if exc is not outcome.error:
            w.effects.write(w.store.delete_record, run, outcome.error)
        return HandBack(1, "missed its rate-limit slot", keep_slot=False)
    # `exc` is the job's error itself, or Powertools' persistence error when releasing the lock
    # failed: then the release is written again here; the decision is taken on the job's error.
    unreleased = exc is not outcome.error and w.effects.write(w.store.delete_record, run, outcome.error)
    w._count("JobFailed", 1)
    if (traced := sys.modules.get("lambdajobs.runtime.tracing")) is not None:  # a traced run's span
        traced.failed(outcome.error)
    return gates.failed(d, outcome.error, lock, w.rng, unreleased=bool(unreleased))


def read_first(
    w: Worker, d: Delivery, record: Callable[[], JobRecord | None], invocation: _Invocation
) -> Decision:
    """`Worker._decide` past the gates, for a copy past its last attempt or that continues a parked
    durable job: both read the job's record first."""
    spec = d.spec
    if d.attempt > spec.max_attempts:
        try:
            found = record()
        except Exception as exc:
            logger.warning("could not read the job's record", extra={"error": error_fields(exc)})
            return HandBack(spec.backoff.delay(1, w.rng), "read")
        decision = gates.past_last_attempt(d, found, int(time.time() * 1000))
        if decision is not None:
            return decision
    if d.resume_wake is not None:  # a durable job's continuation: no new rate-limit slot
        try:
            found = record()
        except Exception as exc:
            logger.warning("could not read the job's record", extra={"error": error_fields(exc)})
            return HandBack(spec.backoff.delay(1, w.rng), "read", resume=d.resume_wake)
        return gates.resumes_early(d, found, int(time.time() * 1000)) or Run()
    return w._rate_limit(d, record, invocation) or Run()


def rate_limit(
    w: Worker, d: Delivery, record: Callable[[], JobRecord | None], invocation: _Invocation
) -> Decision | None:
    """`Worker._rate_limit` of a rate-limited job (`lambdajobs.runtime.ratelimit.gate`)."""
    from lambdajobs.runtime import ratelimit  # rate-limited jobs only: not at a cold start

    limiter = ratelimit.Limiter(w.store.client, w.store.table, salt=w.stack_config.stack)
    return ratelimit.gate(
        d,
        limiter,
        record,
        now_us=int(time.time() * 1_000_000),
        room=lambda wait_ms: invocation.room(d.spec, wait_ms),
        warn=lambda what, exc: logger.warning(what, extra={"error": error_fields(exc)}),
    )


def durable_state(
    w: Worker,
    d: Delivery,
    job_id: str,
    ctx: JobContext,
    fresh: bool,
    acquired: Callable[[], tuple[dict[str, Any] | None, int | None]],
) -> Durable:
    """A run's durable state (`JobContext.durable_factory`), built when a step, a sleep or a wait
    first needs it."""
    from lambdajobs.runtime.durable import Durable  # durable jobs only: not at a cold start

    spec = d.spec
    return Durable(
        job_id=job_id,
        job=spec.name,
        timeout_seconds=spec.timeout_seconds,
        max_duration_seconds=spec.max_duration_seconds,
        margin_ms=deadline_margin_ms(spec),
        remaining_ms=lambda: ctx.remaining_seconds() * 1000,
        acquired=acquired,
        write=lambda name, value, lock: w.store.checkpoint(job_id, name, value, lock),
        fresh_invocation=fresh,
    )
