"""Search entries: a job's records found by the payload fields it declares searchable.

`@job(searchable=("customer_id", "address.country", "@tenant"))`. At a job's first attempt the worker
writes one item per field in one BatchWriteItem, `lambdajobs#sx#<field>#<job id>`, carrying the job
index's keys: `ix` = `<job>?<field>=<value>` and `ix_at` = when the job was enqueued. The job index
(`settings.JOB_INDEX`, in every stack) is the one index that serves every job and field: CloudFormation
changes one global secondary index per stack update, so an index per field would not scale past the
first.

Costs: 2 write units per field per job (the item, and its index entry), none for a job that declares
no searchable field. The entry expires with the record's TTL (from the first attempt).

A value is its text (`value_text`); a field that is also one of the job's `pii_fields` (or a value
longer than `MAX_VALUE_CHARS`) is stored as a sha256 digest salted with the stack name, and searched by
hashing the query the same way: a personal value is never in the index, and it is found by its exact
value only.

A pointer write that fails never fails the job: the worker logs it and counts `JobSearchEntryFailed`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from lambdajobs.runtime import table as codec
from lambdajobs.runtime.settings import SEARCH_ID_PREFIX, TENANT_FIELD

#: A value longer than this is stored (and searched) as its digest: a GSI partition key is at most
#: 2,048 bytes, and an entry's key is its job's name, its field and the value.
MAX_VALUE_CHARS = 256

__all__ = ["MAX_VALUE_CHARS", "entry_id", "index_value", "job_id_of", "payload_value", "value_text"]


def value_text(value: Any) -> str | None:
    """A field's value as searched: text as it is, `true`/`false`, numbers and anything else as
    compact JSON (keys sorted); None for a null or absent field (no entry)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def payload_value(payload: Mapping[str, Any] | None, field: str, tenant: str | None = None) -> str | None:
    """The text of `field` (a dotted path, or `TENANT_FIELD`) in a payload, or None."""
    if field == TENANT_FIELD:
        return tenant or None
    node: Any = payload
    for part in field.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return value_text(node)


def _hashed(text: str, salt: str) -> str:
    return "sha256:" + hashlib.sha256(f"{salt}#{text}".encode()).hexdigest()


def index_value(text: str, *, hashed: bool, salt: str) -> str:
    """The value as the entry's key holds it: hashed for a PII field or a long value."""
    return _hashed(text, salt) if hashed or len(text) > MAX_VALUE_CHARS else text


def index_key(job: str, field: str, value: str) -> str:
    """The job index partition key of the entries of `job`'s `field` = `value` (as `index_value`)."""
    return f"{job}?{field}={value}"


def entry_id(field: str, job_id: str) -> str:
    return f"{SEARCH_ID_PREFIX}{field}#{job_id}"


def job_id_of(item_id: str, field: str) -> str:
    """The job id of an entry's item id (`entry_id`)."""
    return item_id[len(SEARCH_ID_PREFIX) + len(field) + 1 :]


def entries(
    job: str,
    job_id: str,
    fields: tuple[str, ...],
    payload: Mapping[str, Any] | None,
    *,
    tenant: str | None,
    pii_fields: tuple[str, ...],
    enqueued_at: str,
    expiration: int,
    salt: str,
) -> list[codec.Item]:
    """The entry items of a job's searchable fields that have a value."""
    items = []
    for field in fields:
        text = payload_value(payload, field, tenant)
        if text is None:
            continue
        value = index_value(text, hashed=field in pii_fields, salt=salt)
        items.append(
            codec.encode(
                {
                    "id": entry_id(field, job_id),
                    "ix": index_key(job, field, value),
                    "ix_at": enqueued_at,
                    "expiration": expiration,
                }
            )
        )
    return items


def write(client: Any, table: str, items: list[codec.Item]) -> None:
    """The entries in one BatchWriteItem (at most 25 items: a job declares fewer fields); the items
    left unprocessed (a throttle) are sent once more.

    Raises:
        ClientError: the calls failed; RuntimeError: items still unprocessed after the second call.
    """
    if not items:
        return
    request = {table: [{"PutRequest": {"Item": item}} for item in items]}
    for _ in range(2):
        response = client.batch_write_item(RequestItems=request)
        request = response.get("UnprocessedItems") or {}
        if not request:
            return
    raise RuntimeError(f"{len(request.get(table, []))} search entries left unprocessed")
