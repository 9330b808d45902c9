"""The local stack's state on disk: what `lambdajobs dev` holds survives a restart.

One JSON file, `state.json`, in the stack's state folder (`lambdajobs dev`: next to its worker log,
build/local/). What it keeps:
- every queue's messages: the jobs' queues and priority levels, their DLQs, the workflow queue, the
  Scheduler DLQ. Read from moto's SQS backend in this process (the server is in-process), because
  the API cannot read a message without receiving it, nor tell its delay, and cannot set a receive
  count or a message id. Kept: body, message and system attributes, message id (a job whose id is
  its message id keeps its id), message group (a fair queue's tenant), sent time, first receive time
  and receive count, exactly: a job's attempt number goes on where it was, and SQS redrive still
  counts its receives. A delayed message keeps its remaining delay (the time the stack was stopped
  does not count). A message in flight (received and not deleted: a retry waiting out its backoff,
  or a batch that a crash cut short) becomes visible at once when restored, with its receive count
  kept.
- the job table's items (job records, workflows, rate limiters): a Scan, put back with
  BatchWriteItem;
- the data bucket's objects, with their content type and metadata;
- pending one-time schedules (`enqueue(run_at=...)`), at their time: one that came due while the
  stack was stopped fires as soon as it starts. Cron schedules are not saved: they come from the job
  declarations at every start, and a slot missed while stopped is not fired (Scheduler does not
  catch up either).

When (see `LocalStack`): restored after provisioning, before any worker polls; saved on a clean stop
after the in-flight batches have finished, and every 10 s while the stack runs (`LocalStack`'s
`save_every_seconds`; a save that would write what the file holds does not), so that a crash
(kill -9, a power cut) loses at most that interval. A save while batches run is a crash's view
of the stack: it reads the schedules, then the queues (all at once, under the SQS lock), then the
table, so anything that moves from one to the next in between is read twice, never missed (a job id
restored twice runs once: the job record deduplicates it). A job whose run finished after that save
and before a crash runs again after the restart, unless its success was saved: at least once, as on
Lambda.

One stack at a time: a stack holds `state.lock` in the folder while it runs, and a second stack on
the same folder (a second `lambdajobs dev --port 0` in the same project) is refused with one line,
instead of both restoring the same jobs and running them twice.

Never fatal, never silent: a file that cannot be read, or that another stack or another format
version wrote, is set aside (renamed, not deleted) with one line saying so, and the stack starts
empty. Whatever cannot be put back (its queue or table is gone: a job removed from the package) is
written to a side file, with one line saying where. Never imported by the Lambda runtime.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lambdajobs.local import atomic
from lambdajobs.local.provision import Provisioned
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.errors import StateInUseError
from lambdajobs.runtime.settings import scheduler_dead_letter_queue_name

FORMAT = "lambdajobs-local-state"
#: The file format version. A file of another version is set aside, not read.
VERSION = 1
STATE_FILE = "state.json"
#: Where a fresh start moves the state it does not restore (one generation kept).
PREVIOUS_FILE = "state.previous.json"
#: One-time schedule fields that CreateSchedule takes back as GetSchedule gives them.
SCHEDULE_FIELDS = (
    "ScheduleExpression",
    "ScheduleExpressionTimezone",
    "FlexibleTimeWindow",
    "ActionAfterCompletion",
    "Description",
    "State",
    "Target",
)
LOCK_FILE = "state.lock"
BATCH_WRITE_ITEMS = 25  # DynamoDB BatchWriteItem: at most 25 requests

#: Actions (the last part of `X-Amz-Target`) that read and change nothing.
_READS = ("Get", "List", "Describe", "Query", "Scan", "BatchGet", "Head")


class ChangeCounter:
    """The embedded server's WSGI application, counting the requests that may have changed the
    stack's state: anything but a GET or HEAD, a read action (`_READS`), or a `ReceiveMessage` that
    received nothing (the idle long polls of the event sources). A stack with a state file saves
    only when the count moved since its last save: an idle stack reads nothing and writes nothing.
    Conservative: a request whose action it cannot tell counts."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.count = 0
        self._lock = threading.Lock()

    def _changed(self) -> None:
        with self._lock:
            self.count += 1

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("REQUEST_METHOD") in ("GET", "HEAD", "OPTIONS"):
            return self.app(environ, start_response)
        action = str(environ.get("HTTP_X_AMZ_TARGET", "")).rpartition(".")[2]
        if action.startswith(_READS):
            return self.app(environ, start_response)
        if action != "ReceiveMessage":
            self._changed()
            return self.app(environ, start_response)
        body = b"".join(self.app(environ, start_response))
        if b'"MessageId"' in body:  # it received messages: their receive counts moved
            self._changed()
        return [body]


@dataclass
class Counts:
    """What a state held (or what was put back of it)."""

    messages: int = 0
    delayed: int = 0
    in_flight: int = 0
    items: int = 0
    objects: int = 0
    schedules: int = 0
    parameters: int = 0

    def describe(self, *, restored: bool = False, nonzero: bool = False) -> str:
        """`134 messages (12 delayed, 5 in flight), 66 table items, 1 object, 1 one-time schedule`
        (`nonzero`: without the kinds there are none of)."""
        in_flight = "in flight when saved, visible again" if restored else "in flight"
        detail = [f"{n} {what}" for n, what in ((self.delayed, "delayed"), (self.in_flight, in_flight)) if n]
        kinds = [
            (
                self.messages,
                _plural(self.messages, "message") + (f" ({', '.join(detail)})" if detail else ""),
            ),
            (self.items, _plural(self.items, "table item")),
            (self.objects, _plural(self.objects, "object")),
            (self.schedules, _plural(self.schedules, "one-time schedule")),
            (self.parameters, _plural(self.parameters, "SSM parameter")),
        ]
        return ", ".join(text for n, text in kinds if n or not nonzero)


def _plural(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


# -- JSON for bytes ---------------------------------------------------------------------------------

_BYTES = "$base64"


def _to_json(value: Any) -> Any:
    """`value` with every bytes value as `{"$base64": ...}` (binary message attributes, B items)."""
    if isinstance(value, bytes | bytearray):
        return {_BYTES: base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_to_json(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {_BYTES}:
            return base64.b64decode(value[_BYTES])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


# -- the file ---------------------------------------------------------------------------------------


class StateFile:
    """`state.json` in a folder: read, written atomically, set aside, moved aside for a fresh start."""

    def __init__(self, directory: Path, stack: str) -> None:
        self.directory, self.stack = Path(directory), stack
        self.path = self.directory / STATE_FILE
        self._written = ""  # what the last write held, but for its time
        self._lock: Any = None

    def lock(self) -> None:
        """Hold the folder's lock while the stack runs (released by `unlock`, or when the process ends).

        Raises:
            StateInUseError: another running stack holds it.
        """
        try:
            import fcntl
        except ImportError:  # no flock (Windows): one stack per folder is then up to the user
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        handle = (self.directory / LOCK_FILE).open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise StateInUseError(
                f"another local stack (pid {holder}) keeps its state in {self.directory}: stop it, or give "
                "this one another folder (lambdajobs dev: a --log-file elsewhere)."
            ) from None
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock = handle

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing the file releases the lock
            self._lock = None

    def load(self) -> tuple[dict[str, Any] | None, str | None]:
        """(the saved state, None), or (None, the one line to show): no file, or a file set aside."""
        if not self.path.exists():
            return None, f"Starting empty: no saved state in {self.path} yet."
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(state, dict):
                raise ValueError(f"a JSON {type(state).__name__}, not an object")
        except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            return None, self.set_aside(f"unreadable: {type(exc).__name__}: {exc}")
        if state.get("format") != FORMAT or state.get("version") != VERSION:
            found = f"{state.get('format')!r} version {state.get('version')!r}"
            return None, self.set_aside(
                f"another format wrote it ({found}; this one reads version {VERSION})"
            )
        if state.get("stack") != self.stack:
            return None, self.set_aside(f"stack {state.get('stack')!r} wrote it, not {self.stack!r}")
        return state, None

    def write(self, state: dict[str, Any]) -> bool:
        """Write the state, unless the file already holds it (but for its time): an idle stack's
        periodic saves do not rewrite the file. Whether it wrote."""
        unchanged = json.dumps({k: v for k, v in state.items() if k != "saved_at"}, sort_keys=True)
        if unchanged == self._written and self.path.exists():
            return False
        self._write(self.path, state)
        self._written = unchanged
        return True

    def _write(self, path: Path, state: dict[str, Any]) -> None:
        """Write `path` whole or not at all: a crash mid-write leaves the previous file."""
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        with partial.open("w", encoding="utf-8") as out:
            json.dump(state, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)

    def set_aside(self, why: str) -> str:
        """Rename the state file out of the way (kept, never deleted); the one line that says so."""
        aside = self._free_name("set-aside")
        os.replace(self.path, aside)
        return f"Starting empty: {self.path} was set aside as {aside.name} ({why})."

    def move_to_previous(self) -> str:
        """A fresh start: the state not restored is kept as `state.previous.json` (one generation)."""
        if not self.path.exists():
            return "Starting empty (fresh start)."
        previous = self.directory / PREVIOUS_FILE
        os.replace(self.path, previous)
        return f"Starting empty (fresh start); the state saved before is kept in {previous}."

    def write_not_restored(self, leftover: dict[str, Any]) -> Path:
        path = self._free_name("not-restored")
        self._write(path, {**_header(self.stack), **leftover})
        return path

    def _free_name(self, what: str) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        for n in range(1000):
            path = self.directory / f"state.{what}-{stamp}{f'-{n}' if n else ''}.json"
            if not path.exists():
                return path
        raise FileExistsError(f"no free name for state.{what}-{stamp}.json in {self.directory}")


def _header(stack: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "format": FORMAT,
        "version": VERSION,
        "stack": stack,
        "saved_at": now.isoformat(timespec="seconds").replace("+00:00", "Z"),
    }


# -- reading the stack ------------------------------------------------------------------------------


def _sqs_backend(provisioned: Provisioned, region: str) -> Any:
    """moto's SQS backend of this stack's account and region (the server is in this process)."""
    from moto.sqs.models import sqs_backends

    account = urlparse(provisioned.workflow_queue_url).path.strip("/").split("/")[0]
    return sqs_backends[account][region]


@dataclass
class Capture:
    """Reads a running local stack's state; keeps the bucket's objects it read, by ETag, so that a
    periodic save reads only the objects that changed."""

    config: StackConfig
    provisioned: Provisioned
    region: str
    _objects: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    def __call__(self) -> tuple[dict[str, Any], Counts]:
        counts = Counts()
        # Schedules, then queues, then the table: a one-time schedule fires into a queue, and a job's
        # message is deleted after its record is written, so what moves is read twice, never missed.
        schedules = self._schedules()
        queues = self._queues(counts)
        items = self._items()
        objects = self._bucket()
        parameters = self._parameters()
        counts.items, counts.objects, counts.schedules = len(items), len(objects), len(schedules)
        counts.parameters = len(parameters)
        state = {
            **_header(self.provisioned.stack),
            "queues": queues,
            "table": items,
            "bucket": objects,
            "schedules": schedules,
            "parameters": parameters,
        }
        return state, counts

    def _queues(self, counts: Counts) -> dict[str, list[dict[str, Any]]]:
        backend = _sqs_backend(self.provisioned, self.region)
        queues: dict[str, list[dict[str, Any]]] = {}
        with atomic.lock("sqs"):  # one instant for every queue: no request runs meanwhile
            now_ms = time.time() * 1000
            for name, queue in backend.queues.items():
                saved = [_message(m, now_ms) for m in list(queue._messages)]
                if saved:
                    queues[name] = saved
        for saved in queues.values():
            counts.messages += len(saved)
            counts.delayed += sum(1 for m in saved if m["delay_ms"] > 0)
            counts.in_flight += sum(1 for m in saved if m["in_flight"])
        return queues

    def _items(self) -> list[Any]:
        ddb = self.config.client("dynamodb")
        items: list[Any] = []
        for page in ddb.get_paginator("scan").paginate(TableName=self.provisioned.table, ConsistentRead=True):
            items.extend(_to_json(page.get("Items", [])))
        return items

    def _bucket(self) -> list[dict[str, Any]]:
        s3 = self.config.client("s3")
        bucket = self.provisioned.bucket
        objects, seen = [], {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for listed in page.get("Contents", []):
                key, etag = listed["Key"], listed.get("ETag", "")
                cached = self._objects.get(key)
                if cached is None or cached[0] != etag or not etag:
                    got = s3.get_object(Bucket=bucket, Key=key)
                    saved = {
                        "key": key,
                        "body": base64.b64encode(got["Body"].read()).decode(),
                        "content_type": got.get("ContentType"),
                        "metadata": got.get("Metadata") or {},
                    }
                    cached = (etag, saved)
                seen[key] = cached
                objects.append(cached[1])
        self._objects = seen
        return objects

    def _parameters(self) -> list[dict[str, Any]]:
        """The SSM parameters you put in the stack (not its own manifest, which provisioning writes)."""
        ssm = self.config.client("ssm")
        own = f"/lambdajobs/{self.provisioned.stack}/"
        saved = []
        for page in ssm.get_paginator("get_parameters_by_path").paginate(
            Path="/", Recursive=True, WithDecryption=True
        ):
            for parameter in page.get("Parameters", []):
                if parameter["Name"].startswith(own):
                    continue
                saved.append({k: parameter[k] for k in ("Name", "Type", "Value") if k in parameter})
        return saved

    def _schedules(self) -> list[dict[str, Any]]:
        group = self.provisioned.one_time_group
        if not group:
            return []
        scheduler = self.config.client("scheduler")
        schedules, token = [], None
        while True:
            page = scheduler.list_schedules(GroupName=group, **({"NextToken": token} if token else {}))
            for item in page.get("Schedules", []):
                try:
                    found = scheduler.get_schedule(Name=item["Name"], GroupName=group)
                except scheduler.exceptions.ResourceNotFoundException:
                    continue  # fired and deleted itself since the listing
                saved = {k: found[k] for k in SCHEDULE_FIELDS if k in found}
                schedules.append(_to_json({"Name": item["Name"], **saved}))
            token = page.get("NextToken")
            if not token:
                return schedules


def _message(message: Any, now_ms: float) -> dict[str, Any]:
    """One moto SQS message as saved: a delay as what is left of it; in flight, or not."""
    return {
        "id": message.id,
        "body": message.body,
        "attributes": _to_json(message.message_attributes),
        "system_attributes": _to_json(message.system_attributes),
        "sent_ms": message.sent_timestamp,
        "first_receive_ms": message.approximate_first_receive_timestamp,
        "receive_count": message.approximate_receive_count,
        # the tenant of a fair queue (MessageGroupId on a standard queue): it stays the message's
        "group_id": message.group_id,
        "delay_ms": max(0, int(message.delayed_until - now_ms)),
        # when the delay ends, on the wall clock: a state saved a while before the stop (an idle stack
        # does not save again) restores the delay that is left, not the delay there was
        "delayed_until_ms": int(message.delayed_until) if message.delayed_until > now_ms else 0,
        "in_flight": message.visible_at > now_ms,
    }


# -- putting it back --------------------------------------------------------------------------------


@dataclass
class Restored:
    counts: Counts
    #: One line per kind of thing that could not be put back (and where it was kept instead).
    notes: list[str]


def restore(
    state: dict[str, Any], *, config: StackConfig, provisioned: Provisioned, region: str, file: StateFile
) -> Restored:
    """Put a saved state back into a freshly provisioned stack (before its workers start). Whatever
    cannot be put back is written to a side file next to the state, with one line saying so."""
    counts, lost = Counts(), Counts()
    leftover: dict[str, Any] = {}
    reasons: list[str] = []
    backend = _sqs_backend(provisioned, region)
    missing: dict[str, list[Any]] = {}
    for name, messages in (state.get("queues") or {}).items():
        queue = backend.queues.get(name) or backend.queues.get(renamed(name, provisioned.stack))
        try:
            if queue is None:
                raise LookupError(f"no queue {name} now")
            _put_messages(queue, messages, counts)
        except Exception as exc:
            missing[name] = messages
            lost.messages += len(messages)
            reasons.append(str(exc) if isinstance(exc, LookupError) else f"queue {name}: {_error(exc)}")
    if missing:
        leftover["queues"] = missing
    puts: list[tuple[str, str, Callable[[list[Any]], tuple[list[Any], str]]]] = [
        ("table", "items", lambda items: _put_items(config, provisioned.table, items)),
        ("bucket", "objects", lambda objects: _put_objects(config, provisioned.bucket, objects)),
        ("schedules", "schedules", lambda schedules: _put_schedules(config, provisioned, backend, schedules)),
        ("parameters", "parameters", lambda parameters: _put_parameters(config, parameters)),
    ]
    for kind, what, put in puts:
        saved = state.get(kind) or []
        try:
            failed, reason = put(saved)
        except Exception as exc:  # never a crash: keep what was not put back, and say so
            failed, reason = saved, _error(exc)
        setattr(counts, what, len(saved) - len(failed))
        if failed:
            leftover[kind] = failed
            setattr(lost, what, len(failed))
            reasons.append(reason)
    notes = []
    if leftover:
        kept = file.write_not_restored(leftover)
        notes.append(f"Not restored: {lost.describe(nonzero=True)} ({'; '.join(reasons)}); kept in {kept}.")
    return Restored(counts, notes)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _put_messages(queue: Any, messages: list[dict[str, Any]], counts: Counts) -> None:
    from moto.sqs.models import Message

    with atomic.lock("sqs"):
        now_ms = time.time() * 1000
        for saved in messages:
            message: Any = Message(
                saved["id"], saved["body"], _from_json(saved.get("system_attributes") or {})
            )
            message.message_attributes = _from_json(saved.get("attributes") or {})
            message.sent_timestamp = saved.get("sent_ms") or int(now_ms)
            message.approximate_first_receive_timestamp = saved.get("first_receive_ms")
            message.approximate_receive_count = int(saved.get("receive_count") or 0)
            message.group_id = saved.get("group_id")  # (files saved before it had none: no tenant)
            delay_ms = int(saved.get("delay_ms") or 0)
            if saved.get("delayed_until_ms"):  # (files saved before it had only the delay left then)
                delay_ms = max(0, int(saved["delayed_until_ms"] - now_ms))
            message.delayed_until = now_ms + delay_ms if delay_ms else 0.0
            message.visible_at = 0.0  # in flight when saved: visible again now
            queue.add_message(message)
            counts.messages += 1
            counts.delayed += delay_ms > 0
            counts.in_flight += bool(saved.get("in_flight"))


def _put_items(config: StackConfig, table: str, items: list[Any]) -> tuple[list[Any], str]:
    ddb = config.client("dynamodb")
    failed, reason = [], ""
    for start in range(0, len(items), BATCH_WRITE_ITEMS):
        chunk = items[start : start + BATCH_WRITE_ITEMS]
        requests = [{"PutRequest": {"Item": _from_json(item)}} for item in chunk]
        try:
            left = ddb.batch_write_item(RequestItems={table: requests}).get("UnprocessedItems") or {}
            unprocessed = left.get(table, [])
        except Exception:  # one bad item fails the batch: put them one by one to find it
            unprocessed = requests
        for request in unprocessed:
            try:
                ddb.put_item(TableName=table, Item=request["PutRequest"]["Item"])
            except Exception as exc:
                failed.append(_to_json(request["PutRequest"]["Item"]))
                reason = f"table {table}: {_error(exc)}"
    return failed, reason


def _put_objects(config: StackConfig, bucket: str, objects: list[Any]) -> tuple[list[Any], str]:
    s3 = config.client("s3")
    failed, reason = [], ""
    for saved in objects:
        extra = {"ContentType": saved["content_type"]} if saved.get("content_type") else {}
        try:
            s3.put_object(
                Bucket=bucket,
                Key=saved["key"],
                Body=base64.b64decode(saved["body"]),
                Metadata=saved.get("metadata") or {},
                **extra,
            )
        except Exception as exc:
            failed.append(saved)
            reason = f"bucket {bucket}: {_error(exc)}"
    return failed, reason


def renamed(name: str, stack: str) -> str:
    """The name a queue saved by an earlier lambdajobs has now: job queues were `<stack>-<job>...`
    (now `<stack>_<job>...`, `settings.queue_name`), the Scheduler DLQ `<stack>-scheduler-dlq` (now
    `<stack>--scheduler-dlq`); any other name as it is."""
    if name == f"{stack}-scheduler-dlq":
        return scheduler_dead_letter_queue_name(stack)
    if name.startswith(f"{stack}-") and not name.startswith(f"{stack}--"):
        return f"{stack}_{name[len(stack) + 1 :]}"
    return name


def _put_schedules(
    config: StackConfig, provisioned: Provisioned, backend: Any, schedules: list[Any]
) -> tuple[list[Any], str]:
    scheduler = config.client("scheduler")
    failed, reason = [], ""
    for saved in schedules:
        fields = _from_json(saved)
        arn = str(fields.get("Target", {}).get("Arn", ""))
        target = arn.rsplit(":", 1)[-1]
        if target not in backend.queues and renamed(target, provisioned.stack) in backend.queues:
            target = renamed(target, provisioned.stack)
            fields["Target"] = {**fields["Target"], "Arn": arn.rsplit(":", 1)[0] + ":" + target}
        try:
            if target not in backend.queues:  # it would fire into a queue that is gone
                raise LookupError(f"a schedule's target queue {target} is gone")
            scheduler.create_schedule(GroupName=provisioned.one_time_group, **fields)
        except Exception as exc:
            failed.append(saved)
            reason = str(exc) if isinstance(exc, LookupError) else f"schedules: {_error(exc)}"
    return failed, reason


def _put_parameters(config: StackConfig, parameters: list[Any]) -> tuple[list[Any], str]:
    ssm = config.client("ssm")
    failed, reason = [], ""
    for saved in parameters:
        try:
            ssm.put_parameter(
                Name=saved["Name"], Value=saved["Value"], Type=saved.get("Type", "String"), Overwrite=True
            )
        except Exception as exc:
            failed.append(saved)
            reason = f"SSM parameters: {_error(exc)}"
    return failed, reason
