"""What a failed attempt's write keeps of it beside its error: the payload (`stored_payload`,
`stored_fields`), the traceback and the attempt's history entry (`failure_details`).

Split out of `lambdajobs.runtime.records`, where these names are importable too, as before (loaded
on first use): a worker's cold start whose first record succeeds does not compile them. A module of
its own, apart from `lambdajobs.runtime.store_ops`, so that the light mode (`lambdajobs.runtime.light`
imports `failure_details`) does not load the store's other writes.
"""

from __future__ import annotations

import json
import traceback
from typing import Any

from lambdajobs.runtime import lifecycle, pii
from lambdajobs.runtime.job_record import (
    MAX_HISTORY,
    MAX_HISTORY_MESSAGE_CHARS,
    MAX_STORED_PAYLOAD_BYTES,
    MAX_TRACEBACK_CHARS,
    JobRecord,
    JobState,
)
from lambdajobs.runtime.records import Uncopied, error_fields


def stored_payload(payload: Any, pii_fields: tuple[str, ...] = ()) -> tuple[str, bool]:
    """A payload as a failed attempt stores it: its JSON text (True: cut). Above
    `MAX_STORED_PAYLOAD_BYTES` it is cut, and masked first (`pii.mask_payload` with `pii_fields`):
    a cut payload's text no longer parses, so a reader could not mask it, and it could not be
    enqueued again anyway."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text.encode()) <= MAX_STORED_PAYLOAD_BYTES:
        return text, False
    masked = json.dumps(
        pii.mask_payload(payload, pii_fields), separators=(",", ":"), ensure_ascii=False, default=str
    )
    return masked.encode()[:MAX_STORED_PAYLOAD_BYTES].decode(errors="ignore"), True


def stored_fields(payload: Any) -> dict[str, Any]:
    """A payload as a dead write keeps it (`stored_payload`): `payload`, and `payload_cut` when cut."""
    text, cut = stored_payload(payload, pii.current_fields())
    return {"payload": text, "payload_cut": True if cut else None}


def failure_details(
    run: dict[str, Any], exc: BaseException, outcome: JobState, acquired: dict[str, Any] | None
) -> dict[str, Any]:
    """What a failed attempt's write keeps beside its error (`lifecycle.fail`'s `details`): the payload
    (`run["payload"]`, the envelope's; masked if cut: `stored_payload`), the traceback (scrubbed of
    the record's PII values: `pii` is bound while the job runs; its last `MAX_TRACEBACK_CHARS`), and
    the history with this attempt appended (the record as this run's acquire wrote it: `acquired`),
    its last `MAX_HISTORY`."""
    before = JobRecord.from_item(acquired) if acquired else None
    error = error_fields(exc)
    entry = {
        "attempt": int(run.get("attempt") or 0),
        "started": before.started_at if before is not None else None,
        "ended": lifecycle.now_iso(),
        "outcome": outcome.value,
        "error_type": error["type"],
        "error_message": error["message"][:MAX_HISTORY_MESSAGE_CHARS],
    }
    details: dict[str, Any] = {
        "traceback": pii.scrub("".join(traceback.format_exception(exc)))[-MAX_TRACEBACK_CHARS:],
        "history": [*(before.history if before is not None else ()), entry][-MAX_HISTORY:],
    }
    if "payload" in run:
        payload = run["payload"]
        details.update(stored_fields(payload.value if isinstance(payload, Uncopied) else payload))
    return details
